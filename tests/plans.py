"""The run plans the tests make (``RunPlan.resolve``): an offline eval of scripted players on a bundled sample, and
a plan that is only forecast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from colbench.env.domain import Domain, get_domain
from colbench.eval import RunPlan
from colbench.tasks import Task, load_split


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


def forecast_by_hand() -> tuple[Domain, Task, dict[str, str]]:
    """What the forecasts worked out by hand forecast: the backend domain, the first task of ``backend-sample``, and
    that task's prompt as 400 characters (100 tokens)."""
    task = load_split("backend-sample")[0]
    return get_domain("backend"), task, {task.task_id: "x" * 400}


def forecast_plan(agent: str, simulator: str, **options: Any) -> RunPlan:
    """A ``ColBench-Backend-v1`` plan of ``agent`` and ``simulator`` that is only forecast: nothing is written to its
    ``out``."""
    return RunPlan.resolve(env_id="ColBench-Backend-v1", agent=agent, simulator=simulator, out="unused", **options)
