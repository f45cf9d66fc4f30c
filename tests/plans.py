"""The run plans the tests make (``RunPlan.resolve``): an offline eval of scripted players on a bundled sample, and
a plan that is only forecast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from colbench.eval import RunPlan


def scripted_plan(out: Path | str, **options: Any) -> RunPlan:
    """An eval of ``ColBench-Backend-v1`` by the scripted reference agent with the scripted human on
    ``backend-sample``, into ``out``, without a progress bar; ``options`` change any of these or add others, as
    ``RunPlan.resolve`` takes them (``env_id``, ``agent``, ``tasks``, ``limit``, ``sandbox``, ...)."""
    settings: dict[str, Any] = {
        "env_id": "ColBench-Backend-v1",
        "agent": "scripted:reference",
        "simulator": "scripted",
        "out": out,
        "tasks": "backend-sample",
        "progress": "off",
        **options,
    }
    return RunPlan.resolve(**settings)


def forecast_plan(agent: str, simulator: str, **options: Any) -> RunPlan:
    """A ``ColBench-Backend-v1`` plan of ``agent`` and ``simulator`` that is only forecast: nothing is written to its
    ``out``."""
    return RunPlan.resolve(env_id="ColBench-Backend-v1", agent=agent, simulator=simulator, out="unused", **options)
