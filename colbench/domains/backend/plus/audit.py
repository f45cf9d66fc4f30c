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
from colbench.domains.backend.plus.calls import CallOutcome, mutant_budget, run_calls, run_sources
from colbench.domains.backend.plus.inputs import domain_of, random_calls, templates
from colbench.domains.backend.plus.mutants import Mutant, mutants
from colbench.domains.backend.plus.screen import TaskScreen
from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import InfraError
from colbench.sandbox.contract import Budget
from colbench.types.task import Task

PROBES = 200
"""Inputs the independent generator tries per task."""
ROUND = 24
"""Inputs of the survivors' first round (each later round twice the inputs run so far): most wrong mutants show
early."""
AUDIT_VERSION = "1"


@dataclass(frozen=True)
class Survivor:
    """A mutant that passed every test: its edit, and a call on which it is wrong ("" if none was found).
    ``settled`` is False where a gate's question was answered before this survivor was either shown wrong or run
    on every input: it is then neither wrong nor possibly equivalent."""

    mutant: Mutant
    witness: str = ""
    settled: bool = True

    @property
    def possibly_equivalent(self) -> bool:
        return self.settled and not self.witness

    def row(self) -> dict[str, Any]:
        return {
            "index": self.mutant.index,
            "operator": self.mutant.operator,
            "edit": self.mutant.edit,
            "possibly_equivalent": self.possibly_equivalent,
            "witness": self.witness,
            **({} if self.settled else {"settled": False}),
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

    @property
    def witnessed(self) -> bool:
        """Whether every survivor is settled (shown wrong or run on every input): the score is then exact."""
        return all(s.settled for s in self.survivors)

    @property
    def possibly_equivalent(self) -> int:
        return sum(s.possibly_equivalent for s in self.survivors)

    @property
    def wrong(self) -> int:
        """The survivors shown wrong (a witness found)."""
        return sum(bool(s.witness) for s in self.survivors)

    @property
    def killed_indices(self) -> frozenset[int]:
        """The indices of the mutants the tests killed (for an audit made with ``MUTANT_LIMIT``, as
        ``augment_task`` makes its mutants: what it would otherwise score again)."""
        return frozenset(range(self.mutants)) - {s.mutant.index for s in self.survivors}

    @property
    def score(self) -> float | None:
        """Killed over the mutants not possibly equivalent (None when there are none); an unsettled survivor
        counts as wrong, so with any the score is a lower bound."""
        judged = self.mutants - self.possibly_equivalent
        return self.killed / judged if judged else None

    @property
    def most(self) -> float | None:
        """The score were every unsettled survivor equivalent: the most it can be (``score`` when all settled)."""
        judged = self.killed + self.wrong
        return self.killed / judged if judged else None

    def row(self) -> dict[str, Any]:
        unsettled = sum(not s.settled for s in self.survivors)
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
            **({} if self.witnessed else {"witnessed": False, "unsettled": unsettled}),
        }


@dataclass(frozen=True)
class Gate:
    """A gate's question about a task's tests: does the mutation score reach ``threshold``? With ``killed`` of
    ``mutants`` killed by the tests, it is settled by a few survivors: enough of them wrong (the score stays under
    the threshold even were the others equivalent) or enough possibly equivalent (it reaches it even were the
    others wrong). Compared as ``TaskAudit.score`` and ``most`` compute it."""

    killed: int
    mutants: int
    threshold: float

    def rejects(self, wrong: int) -> bool:
        return self.killed + wrong > 0 and self.killed / (self.killed + wrong) < self.threshold

    def accepts(self, equivalent: int) -> bool:
        judged = self.mutants - equivalent
        return judged > 0 and self.killed / judged >= self.threshold

    @property
    def wrong_needed(self) -> int:
        return next((w for w in range(self.mutants + 1) if self.rejects(w)), self.mutants + 1)

    @property
    def equivalent_needed(self) -> int:
        return next((e for e in range(self.mutants + 1) if self.accepts(e)), self.mutants + 1)


def audit_task(
    task: Task,
    scorer: BackendScorer,
    *,
    limit: int = MUTANT_LIMIT,
    threshold: float | None = None,
    screen: TaskScreen | None = None,
    made: Sequence[Mutant] | None = None,
) -> TaskAudit:
    """The mutation analysis of one task with ``scorer``'s tests and rules. With ``threshold`` (a gate's), the
    survivors are run on independent inputs only until the answer is certain (``Gate``): not at all where the
    tests' kills alone reach it (``killed / mutants``, the score if every survivor is wrong), else until enough
    survivors are wrong or possibly equivalent. The survivors left unsettled count as wrong in ``score`` (a lower
    bound) and as equivalent in ``most``; the answer is ``score >= threshold`` either way. ``screen``: the task's,
    where the caller shares one; ``made``: ``task_mutants(task, limit)``, where the caller made them already (the
    gates do, while the sandbox runs the reference)."""
    problem = reference_problem(task, scorer)
    if problem:
        return TaskAudit(task.task_id, problem=problem)
    if made is None:
        made = task_mutants(task, limit)
    try:
        found = (screen or TaskScreen(task, scorer)).successes([m.code for m in made])
    except InfraError as exc:
        return TaskAudit(task.task_id, problem=f"the sandbox could not score a mutant: {exc}")
    surviving = [m for m, success in zip(made, found, strict=True) if success]
    tests = sum(exp.judgeable for exp in scorer.expected(task)) if made else 0
    killed = len(made) - len(surviving)
    gate = None if threshold is None else Gate(killed, len(made), threshold)
    if gate is not None and surviving and gate.accepts(0):  # reached with all of them wrong
        return TaskAudit(task.task_id, len(made), killed, tuple(Survivor(m, settled=False) for m in surviving), tests)
    survivors = tuple(witnessed(task, scorer, surviving, gate))
    return TaskAudit(task.task_id, mutants=len(made), killed=killed, survivors=survivors, tests=tests)


def task_mutants(task: Task, limit: int = MUTANT_LIMIT) -> list[Mutant]:
    """The mutants the audit judges for ``task`` (seeded by its content, as the augmenter's)."""
    return mutants(task.ground_truth, limit=limit, seed=seed_of(task))


def witnessed(
    task: Task, scorer: BackendScorer, surviving: Sequence[Mutant], gate: Gate | None = None
) -> list[Survivor]:
    """Each survivor with the first independent input on which it differs from the reference. With ``gate``, the
    probing stops once its question is answered (the rest left unsettled): after a first round for all (its first
    few survivors alone, where their being wrong settles it), the others go on in waves of as many as could
    settle it by being possibly equivalent; the reference runs on the inputs only as the rounds reach them."""
    if not surviving:
        return []
    families = templates(task.test_cases, task.ground_truth)
    rng = random.Random(f"audit:{seed_of(task)}:{AUDIT_VERSION}")
    calls = random_calls(families, domain_of(families, task.ground_truth), rng, PROBES)
    probes = _Probes(task, scorer, calls, block=len(calls) if gate is None else 2 * ROUND, gate=gate)
    if gate is None:
        probes.rounds(list(surviving), 0)
    else:
        left = probes.rounds(list(surviving), 0, once=True)
        while left and not probes.answered():
            size = max(1, gate.equivalent_needed - len(probes.through))
            wave, left = left[:size], left[size:]
            probes.rounds(wave, ROUND)
    return [
        Survivor(m, probes.witness.get(m.index, ""), m.index in probes.witness or m.index in probes.through)
        for m in surviving
    ]


class _Probes:
    """The independent inputs on which the reference returns a value (the reference run on the first ``block``
    inputs, then, if the rounds go further, on the rest), and what the survivors run on them showed: a witness
    for each one shown wrong, and the survivors that ran every input without one (``through``). (A mutant may do
    ten times the reference's most work on the inputs run so far: with a first block smaller than all, a slow
    mutant can meet a lower budget.)"""

    def __init__(self, task: Task, scorer: BackendScorer, calls: list[str], block: int, gate: Gate | None) -> None:
        self.task, self.scorer, self.calls, self.block, self.gate = task, scorer, calls, block, gate
        self.ran = 0
        self.valid: list[tuple[str, CallOutcome]] = []
        self.witness: dict[int, str] = {}
        self.through: set[int] = set()

    def answered(self) -> bool:
        gate = self.gate
        return gate is not None and (gate.rejects(len(self.witness)) or gate.accepts(len(self.through)))

    def reach(self, needed: int) -> int:
        """How many valid inputs there are once the reference has run on enough for ``needed`` (or on all)."""
        while len(self.valid) < needed and self.ran < len(self.calls):
            block = self.calls[self.ran : self.ran + self.block] if not self.ran else self.calls[self.ran :]
            scorer = self.scorer
            outcomes = run_calls(scorer.sandbox, self.task.ground_truth, block, seed=scorer.seed, pool="reference")
            self.valid += [(c, o) for c, o in zip(block, outcomes, strict=True) if o.is_value]
            self.ran += len(block)
        return min(needed, len(self.valid))

    def rounds(self, pending: list[Mutant], start: int, *, once: bool = False) -> list[Mutant]:
        """Runs ``pending`` from input ``start`` in rounds of growing size (most wrong mutants show early) until
        each is shown wrong or has run every input, or the gate's question is answered; with ``once``, one round,
        returning those still to go on."""
        size = ROUND if not start else 2 * start
        while pending and self.reach(start + 1) > start:
            chunk = self.valid[start : self.reach(start + size)]
            budget = mutant_budget([o for _, o in self.valid])
            first = len(pending) if self.gate is None or start else max(1, self.gate.wrong_needed - len(self.witness))
            still: list[Mutant] = []
            for part in (pending[:first], pending[first:]):
                if part and not self.answered():
                    still += self._run(part, chunk, budget)
            if self.answered():
                return []
            pending, start, size = still, start + size, 2 * size
            if once and self.reach(start + 1) > start:
                return pending
        self.through.update(m.index for m in pending)
        return []

    def _run(self, part: list[Mutant], chunk: list[tuple[str, CallOutcome]], budget: Budget) -> list[Mutant]:
        """One request: each of ``part`` on ``chunk``; those shown wrong get their witness, the rest are returned."""
        sandbox, seed = self.scorer.sandbox, self.scorer.seed
        runs = run_sources(sandbox, [(m.code, [c for c, _ in chunk]) for m in part], seed=seed, budget=budget)
        still = []
        for mutant, outcomes in zip(part, runs, strict=True):
            found = next((c for (c, e), got in zip(chunk, outcomes, strict=True) if not e.same(got)), "")
            if found:
                self.witness[mutant.index] = found
            else:
                still.append(mutant)
        return still


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
