"""A simulated human whose endpoint fails at a chosen turn: the infrastructure failure every framework adapter must
survive without raising out of the rollout or scoring the episode (docs/integrations.md, lost episodes)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openai_stub import StubOpenAIServer

# The human's first turn, and a later one (its first reply went through).
FAILING_TURNS = (1, 2)


@contextmanager
def human_failing_at(turn: int) -> Iterator[dict[str, Any]]:
    """Env options whose human (a real OpenAI-compatible endpoint) answers the agent's turns before ``turn`` and
    answers HTTP 400, with no retries, from ``turn`` on."""
    with StubOpenAIServer(default=lambda request: "I don't know.") as human:
        human.script([("text", "An empty input gives 0.")] * (turn - 1) + [("status", 400)] * 20)
        options = {"base_url": human.base_url, "api_key": "k", "max_retries": 0}
        yield {"simulator": "openai:human", "simulator_options": options}
