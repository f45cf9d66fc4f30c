"""The optional ``solver`` gate: is the hidden information needed, and enough?

A ColBench task is worth playing when the agent must ask: a solver model given the request alone should fail more
often than one also given what the human knows (the spec-faithfulness check of the published ColBench RL
re-implementation, which keeps a task spec only where a solver rebuilds the reference from it). Each of the two
views gets ``tries`` answers from the solver, scored by the candidate's own tests in the sandbox (an answer
succeeds when it passes all of them). The candidate passes when the informed solver succeeds strictly more often:
a request that gives the task away (the blind solver does as well) and hidden information that does not make the
task solvable (neither succeeds) are both rejected, with the counts in the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.domains.backend.scorer import BackendScorer, extract_code
from colbench.errors import InfraError, LLMError
from colbench.llm.client import LLMClient
from colbench.types.task import Task

_PROMPT = (Path(__file__).parent / "solver_prompt.txt").read_text(encoding="utf-8")
TRIES = 2
"""Answers per view by default: enough to tell "never" from "sometimes" at the cost of four solver calls."""


def solver_prompt(task: Task, informed: bool) -> str:
    """The solver's message: the request, and with ``informed`` what only the human knows."""
    details = f"What they know and would tell you if asked: {task.hidden_information.strip()}\n" if informed else ""
    return _PROMPT.format(problem_description=task.problem_description.strip(), details=details)


@dataclass(frozen=True)
class SolverCheck:
    """Successes out of ``tries`` with the request alone (``blind``) and with the hidden information
    (``informed``); ``error`` when the solver or the sandbox failed."""

    model: str
    tries: int
    blind: int = 0
    informed: int = 0
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and self.informed > self.blind

    def reason(self) -> str:
        counts = (
            f"the request alone solved it {self.blind}/{self.tries}, "
            f"with the hidden information {self.informed}/{self.tries}"
        )
        if self.informed <= self.blind and self.informed:
            return f"{counts}: the hidden information is not needed"
        return f"{counts}: the hidden information does not make it solvable"

    def row(self) -> dict[str, Any]:
        return {"model": self.model, "tries": self.tries, "request_alone": self.blind, "informed": self.informed}


class SolverGate:
    """The gate with one solver model behind ``client`` (``model``: its spec, for the records)."""

    def __init__(self, client: LLMClient, model: str, tries: int = TRIES) -> None:
        self.client, self.model, self.tries = client, model, tries

    def check(self, task: Task, scorer: BackendScorer) -> SolverCheck:
        try:
            blind, informed = (self._successes(task, scorer, view) for view in (False, True))
        except (LLMError, InfraError) as exc:
            return SolverCheck(self.model, self.tries, error=f"the solver gate failed: {exc}"[:300])
        return SolverCheck(self.model, self.tries, blind, informed)

    def _successes(self, task: Task, scorer: BackendScorer, informed: bool) -> int:
        prompt = solver_prompt(task, informed)
        answers = [self.client.chat([{"role": "user", "content": prompt}]).text for _ in range(self.tries)]
        scores = scorer.score_many([(task, extract_code(answer)) for answer in answers])
        return sum(bool(score.success) for score in scores)
