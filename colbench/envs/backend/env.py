"""``ColBench-Backend-v0``: write a Python function with a simulated human, scored by sandboxed unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from colbench.envs.base import ANSWER_MARKER, MAX_TURNS, ColbenchEnv, Episode
from colbench.sandbox import Sandbox, shared_sandbox
from colbench.scoring.backend import BackendScorer
from colbench.simulator import Simulator, Turn
from colbench.tasks import Task

DEFAULT_TASKS = "backend-test"


class BackendEnv(ColbenchEnv):
    """``step(text)`` ends the episode when ``text`` contains ``I WANT TO ANSWER:`` or when it is the
    ``max_turns``-th agent turn (then the whole text is the answer); the answer is scored and the reward is the
    fraction of judgeable tests passed. Otherwise the simulated human answers and that answer is the next
    observation. Infrastructure failures (sandbox, LLM endpoint) raise ``InfraError``: they are never a reward.

    ``simulator`` is a spec (``openai:MODEL``, ``local``, ``scripted``) completed by ``simulator_options``
    (``base_url``, ``api_key``, ``cache_dir``, ...), or any ``Simulator``.
    """

    domain = "backend"
    default_tasks = DEFAULT_TASKS

    def __init__(
        self,
        tasks: str | Sequence[Task] = DEFAULT_TASKS,
        simulator: str | Simulator = "scripted",
        sandbox: str | Sandbox = "auto",
        *,
        simulator_options: dict[str, Any] | None = None,
        max_turns: int = MAX_TURNS,
        expose_hidden: bool = False,
        scorer: BackendScorer | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            tasks,
            simulator,
            simulator_options=simulator_options,
            max_turns=max_turns,
            expose_hidden=expose_hidden,
            render_mode=render_mode,
        )
        self._sandbox_spec = sandbox
        self._scorer = scorer

    @property
    def scorer(self) -> BackendScorer:
        if self._scorer is None:
            spec = self._sandbox_spec
            self._scorer = BackendScorer(shared_sandbox(spec) if isinstance(spec, str) else spec)
        return self._scorer

    def _finish(self, episode: Episode, turn: Turn) -> tuple[float, dict[str, Any]]:
        score = self.scorer.score(episode.task, turn.text)
        return float(score.pass_rate), {
            "score": score.details(),
            "success": score.success,
            "pass_rate": score.pass_rate,
            "tests_passed": score.tests_passed,
            "tests_total": score.tests_total,
        }


__all__ = ["ANSWER_MARKER", "DEFAULT_TASKS", "MAX_TURNS", "BackendEnv"]
