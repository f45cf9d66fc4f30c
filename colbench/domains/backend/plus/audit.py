"""Mutation analysis of a task's tests (``colbench tasks audit``): which wrong variants of the reference get full
reward.

Each task's reference is mutated (``mutants``); every mutant is judged as the scorer the audit is given would score
it as an answer (v1: the task's tests; v2: with its plus tests), by the batch runner where it gives the scorer's
verdict, else by the scorer (``screen.TaskScreen``). A mutant that fails a test is
*killed*. A surviving mutant is run, with the reference, on inputs from an independent generator
(``inputs.random_calls``: every argument drawn afresh from its shape, its own seed, ``PROBES`` calls): where some
input tells them apart it is *wrong* (the witness call is reported), where none does it is *possibly equivalent*
and left out of the mutation score, killed / (mutants - possibly equivalent).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.domains.backend.plus.augment import MUTANT_LIMIT, reference_problem, seed_of
from colbench.domains.backend.plus.calls import BATCH, CallOutcome, mutant_budget, run_calls, run_sources
from colbench.domains.backend.plus.inputs import domain_of, random_calls, templates
from colbench.domains.backend.plus.mutants import Mutant, mutants
from colbench.domains.backend.plus.screen import TaskScreen
from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import InfraError
from colbench.types.task import Task

PROBES = 200
"""Inputs the independent generator tries per task."""
AUDIT_VERSION = "1"


@dataclass(frozen=True)
class Survivor:
    """A mutant that passed every test: its edit, and a call on which it is wrong ("" if none was found)."""

    mutant: Mutant
    witness: str = ""

    @property
    def possibly_equivalent(self) -> bool:
        return not self.witness

    def row(self) -> dict[str, Any]:
        return {
            "index": self.mutant.index,
            "operator": self.mutant.operator,
            "edit": self.mutant.edit,
            "possibly_equivalent": self.possibly_equivalent,
            "witness": self.witness,
        }


@dataclass(frozen=True)
class TaskAudit:
    """One task's mutation analysis (``problem``: why it could not be audited)."""

    task_id: str
    mutants: int = 0
    killed: int = 0
    survivors: tuple[Survivor, ...] = field(default=())
    tests: int = 0
    problem: str = ""
    witnessed: bool = True
    """False when the survivors were not run on independent inputs (``audit_task``'s ``threshold`` was settled
    without): none is then counted possibly equivalent, so ``score`` is a lower bound."""
    upper_bound: bool = False
    """True when the probing stopped once enough survivors were wrong to leave ``audit_task``'s ``threshold`` out
    of reach: the survivors it did not finish count as possibly equivalent, so ``score`` is an upper bound."""

    @property
    def possibly_equivalent(self) -> int:
        return sum(s.possibly_equivalent for s in self.survivors) if self.witnessed else 0

    @property
    def killed_indices(self) -> frozenset[int]:
        """The indices of the mutants the tests killed (for an audit made with ``MUTANT_LIMIT``, as
        ``augment_task`` makes its mutants: what it would otherwise score again)."""
        return frozenset(range(self.mutants)) - {s.mutant.index for s in self.survivors}

    @property
    def score(self) -> float | None:
        """Killed over the mutants not possibly equivalent (None when there are none)."""
        judged = self.mutants - self.possibly_equivalent
        return self.killed / judged if judged else None

    def row(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "tests": self.tests,
            "mutants": self.mutants,
            "killed": self.killed,
            "surviving": len(self.survivors),
            "possibly_equivalent": self.possibly_equivalent,
            "mutation_score": self.score,
            "survivors": [s.row() for s in self.survivors],
            "problem": self.problem,
            **({} if self.witnessed else {"witnessed": False}),
            **({"upper_bound": True} if self.upper_bound else {}),
        }


def audit_task(
    task: Task,
    scorer: BackendScorer,
    *,
    limit: int = MUTANT_LIMIT,
    threshold: float | None = None,
    screen: TaskScreen | None = None,
) -> TaskAudit:
    """The mutation analysis of one task with ``scorer``'s tests and rules. With ``threshold`` (a gate's), the
    survivors are not run on independent inputs where the tests' kills alone reach it: ``killed / mutants``, the
    score if every survivor is wrong, is the least it can be; the audit then says it did not witness them
    (``TaskAudit.witnessed``) and its score is that lower bound. Below it, the probing stops as soon as enough
    survivors are wrong that the score stays under the threshold whatever the others are
    (``TaskAudit.upper_bound``). ``screen``: the task's, where the caller shares one."""
    problem = reference_problem(task, scorer)
    if problem:
        return TaskAudit(task.task_id, problem=problem)
    made = mutants(task.ground_truth, limit=limit, seed=seed_of(task))
    try:
        found = (screen or TaskScreen(task, scorer)).successes([m.code for m in made])
    except InfraError as exc:
        return TaskAudit(task.task_id, problem=f"the sandbox could not score a mutant: {exc}")
    surviving = [m for m, success in zip(made, found, strict=True) if success]
    tests = sum(exp.judgeable for exp in scorer.expected(task)) if made else 0
    killed = len(made) - len(surviving)
    if threshold is not None and surviving and killed / len(made) >= threshold:  # reached with all of them wrong
        unwitnessed = tuple(Survivor(m) for m in surviving)
        return TaskAudit(task.task_id, len(made), killed, unwitnessed, tests, witnessed=False)
    enough = None if threshold is None else _wrong_enough(killed, threshold)
    survivors = tuple(witnessed(task, scorer, surviving, enough))
    return TaskAudit(
        task.task_id,
        mutants=len(made),
        killed=killed,
        survivors=survivors,
        tests=tests,
        upper_bound=enough is not None and sum(not s.possibly_equivalent for s in survivors) >= enough,
    )


def _wrong_enough(killed: int, threshold: float) -> int:
    """The fewest wrong survivors that keep ``killed / (killed + wrong)`` under ``threshold``."""
    wrong = 0
    while killed >= threshold * (killed + wrong):
        wrong += 1
    return wrong


def witnessed(
    task: Task, scorer: BackendScorer, surviving: Sequence[Mutant], enough: int | None = None
) -> list[Survivor]:
    """Each survivor with the first independent input on which it differs from the reference. With ``enough`` (a
    gate's question: are this many survivors wrong?), probing stops once that many have a witness, the rest left
    without one, and the reference runs on the inputs only as the rounds reach them."""
    if not surviving:
        return []
    families = templates(task.test_cases, task.ground_truth)
    rng = random.Random(f"audit:{seed_of(task)}:{AUDIT_VERSION}")
    calls = random_calls(families, domain_of(families, task.ground_truth), rng, PROBES)
    inputs = _ProbeInputs(task, scorer, calls, block=len(calls) if enough is None else 2 * BATCH)
    witness: dict[int, str] = {}
    pending, start, size = list(surviving), 0, BATCH
    while pending and inputs.reach(start + 1) > start:  # in rounds of growing size: most wrong mutants show early
        chunk = inputs.valid[start : inputs.reach(start + size)]
        budget = mutant_budget([o for _, o in inputs.valid])
        # In the first round (where most wrong survivors show), the first few go alone: they may settle it.
        first = len(pending) if enough is None or start else max(1, enough - len(witness))
        still = []
        for group in (pending[:first], pending[first:]):
            if not group or (enough is not None and len(witness) >= enough):
                continue
            runs = run_sources(
                scorer.sandbox, [(m.code, [c for c, _ in chunk]) for m in group], seed=scorer.seed, budget=budget
            )
            for mutant, outcomes in zip(group, runs, strict=True):
                found = next((c for (c, e), got in zip(chunk, outcomes, strict=True) if not e.same(got)), "")
                if found:
                    witness[mutant.index] = found
                else:
                    still.append(mutant)
        if enough is not None and len(witness) >= enough:
            break
        pending, start, size = still, start + size, 2 * size
    return [Survivor(m, witness.get(m.index, "")) for m in surviving]


class _ProbeInputs:
    """The probe calls on which the reference returns a value, with its outcomes: the reference runs on the first
    ``block`` calls, then, if the rounds go further, on the rest. (A mutant may do ten times the reference's most
    work on the calls run so far: with a first block smaller than all the calls, a slow mutant can meet a lower
    budget.)"""

    def __init__(self, task: Task, scorer: BackendScorer, calls: list[str], block: int) -> None:
        self.task, self.scorer, self.calls, self.block = task, scorer, calls, block
        self.ran = 0
        self.valid: list[tuple[str, CallOutcome]] = []

    def reach(self, needed: int) -> int:
        """How many valid calls there are once the reference has run on enough calls for ``needed`` (or on all)."""
        while len(self.valid) < needed and self.ran < len(self.calls):
            block = self.calls[self.ran : self.ran + self.block] if not self.ran else self.calls[self.ran :]
            scorer = self.scorer
            outcomes = run_calls(scorer.sandbox, self.task.ground_truth, block, seed=scorer.seed, pool="reference")
            self.valid += [(c, o) for c, o in zip(block, outcomes, strict=True) if o.is_value]
            self.ran += len(block)
        return min(needed, len(self.valid))


@dataclass(frozen=True)
class Summary:
    """A split's mutation analysis in a few numbers."""

    tasks: int
    audited: int
    mutants: int
    killed: int
    possibly_equivalent: int
    tasks_with_wrong_survivor: int

    @property
    def score(self) -> float:
        judged = self.mutants - self.possibly_equivalent
        return self.killed / judged if judged else 1.0

    def line(self) -> str:
        share = self.tasks_with_wrong_survivor / max(self.audited, 1)
        return (
            f"{self.audited}/{self.tasks} tasks audited: {self.mutants} mutants, {self.killed} killed, "
            f"{self.mutants - self.killed} surviving ({self.possibly_equivalent} possibly equivalent); mutation "
            f"score {self.score:.3f}; tasks where a wrong mutant gets full reward: {self.tasks_with_wrong_survivor} "
            f"({100 * share:.1f}%)"
        )


def summarize(audits: Sequence[TaskAudit]) -> Summary:
    done = [a for a in audits if not a.problem]
    return Summary(
        tasks=len(audits),
        audited=len(done),
        mutants=sum(a.mutants for a in done),
        killed=sum(a.killed for a in done),
        possibly_equivalent=sum(a.possibly_equivalent for a in done),
        tasks_with_wrong_survivor=sum(any(not s.possibly_equivalent for s in a.survivors) for a in done),
    )
