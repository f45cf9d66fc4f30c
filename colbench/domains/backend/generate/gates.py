"""The gates a generated candidate must pass to be kept, each run in the sandbox, in order; the first that fails
names the reject's gate and reason (docs/generate.md, "Gates").

Cheap gates come first, so a bad candidate costs little: the reference's own tests (which the scorer runs twice,
one sandbox exec, to see nondeterminism), the request leak (no sandbox), an answer computing nothing that passes
every test (the degenerate gate's cheap half), the mutation score, which stops at what its kills settle
(``audit_task``'s ``threshold``), then the degenerate answers' holes, test by test. Only a candidate that passed every
gate is augmented (its plus tests, as ``colbench tasks augment`` makes them), reusing the audit's mutant scores.
Deduplication is the caller's (it depends on the tasks kept before), and it runs before these gates.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from colbench.domains.backend import degenerate
from colbench.domains.backend.leaks import THRESHOLD as LEAK_THRESHOLD
from colbench.domains.backend.leaks import leak_score
from colbench.domains.backend.plus.audit import audit_task, task_mutants
from colbench.domains.backend.plus.augment import augment_task
from colbench.domains.backend.plus.screen import TaskScreen
from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import InfraError
from colbench.types.task import Task

MUTATION_THRESHOLD = 0.7
"""Killed share of the mutants (not possibly equivalent) the candidate's own tests must reach: weaker tests would
reward wrong answers, so the candidate is rejected (not repaired). The test split's own tests reach it on 94.3% of
its tasks (its 5th percentile is 0.68; ``bench/mutation_gate.py``, docs/generate.md): a kept task is tested about
as well as the tasks agents are scored on."""
_HOST = ThreadPoolExecutor(1, thread_name_prefix="colbench-gates")
"""Runs a candidate's host work (its mutants) beside its sandbox requests; threads of its own, so a caller's pool
never waits on itself."""
GATES = (
    *("reply", "duplicate", "deterministic", "judgeable", "leak", "mutation", "degenerate", "solver", "augment"),
    "infra",
)


@dataclass
class Verdict:
    """A candidate after the sandbox gates: the task (with plus tests) when kept, else the failing gate's reason."""

    task: Task
    gate: str = ""
    reason: str = ""
    passed: list[str] = field(default_factory=list)
    mutation_score: float | None = None
    mutation_witnessed: bool = True
    """False: some survivors were left unsettled once the gate's question was answered, so ``mutation_score``
    (counting them as wrong) is a lower bound (``TaskAudit.witnessed``)."""
    killed: frozenset[int] | None = None
    """The mutants the candidate's tests kill (the audit's), for ``add_plus_tests``."""
    solver: dict[str, Any] | None = None
    """The solver gate's counts, where it ran (``solver_gate.SolverCheck.row``)."""


def validate(task: Task, scorer: BackendScorer) -> Verdict:
    """Run the sandbox gates on ``task`` (an InfraError is an ``infra`` reject, never a crash); a candidate that
    passes them all is not augmented yet (``add_plus_tests``)."""
    verdict = Verdict(task)
    try:
        _run(verdict, scorer)
    except InfraError as exc:
        verdict.gate, verdict.reason = "infra", str(exc)
    return verdict


def signatures(code: str) -> str:
    """The reference's ``def`` lines: public (a ColBench request states the signature), so the leak gate does not
    count them; without this, 6 of the first 12 real test tasks read as leaking, with it none of the 300 do."""
    return "\n".join(line.strip() for line in code.splitlines() if line.lstrip().startswith(("def ", "async def ")))


def _run(verdict: Verdict, scorer: BackendScorer) -> None:
    task = verdict.task
    # the mutants are host work (a few ms a task): made while this thread waits for the sandbox
    made = _HOST.submit(task_mutants, task)
    expected = scorer.expected(task)
    for (name, _), exp in zip(scorer.tests(task), expected, strict=True):
        if "nondeterministic" in exp.reason:
            verdict.gate, verdict.reason = "deterministic", f"{name}: {exp.reason}"
            return
    verdict.passed.append("deterministic")
    for (name, _), exp in zip(scorer.tests(task), expected, strict=True):
        if not exp.judgeable:
            verdict.gate, verdict.reason = "judgeable", f"{name}: {exp.reason}"[:300]
            return
    verdict.passed.append("judgeable")
    leak = leak_score(task.problem_description, task.ground_truth, signatures(task.ground_truth))
    if leak >= LEAK_THRESHOLD:
        verdict.gate, verdict.reason = "leak", f"the request gives the reference away (leak score {leak:.2f})"
        return
    verdict.passed.append("leak")
    screen = TaskScreen(task, scorer)  # the mutation and degenerate gates share the reference's batch run
    # The degenerate gate's cheap half first: an answer that computes nothing and passes every test (mostly worked
    # out on the host) rejects a candidate before the mutation gate's probing, which such a reference, its code
    # mostly dead, makes long: its mutants are equivalent.
    passing = degenerate.constant_successes(scorer, task, screen)
    if passing:
        verdict.gate, verdict.reason = "degenerate", f"an answer that {passing[0]} passes every test"
        return
    audit = audit_task(task, scorer, threshold=MUTATION_THRESHOLD, screen=screen, made=made.result())
    verdict.mutation_score, verdict.mutation_witnessed = audit.score, audit.witnessed
    if audit.problem or audit.score is None or audit.score < MUTATION_THRESHOLD:
        # Rejected: the score (a lower bound while survivors are unsettled) is under the threshold, and so is the
        # most it can be, which the reason gives.
        judged, most = audit.killed + audit.wrong, audit.most
        why = audit.problem or (
            "no mutant tells the tests apart from the reference"
            if most is None
            else f"{audit.killed}/{judged} mutants killed ({'' if audit.witnessed else 'at most '}"
            f"{most:.2f} < {MUTATION_THRESHOLD})"
        )
        verdict.gate, verdict.reason = "mutation", why
        return
    verdict.passed.append("mutation")
    verdict.killed = audit.killed_indices
    holes = [f"{name}: {detail}" for name, _, detail in degenerate.holes(scorer, task, screen)]
    if holes:
        verdict.gate, verdict.reason = "degenerate", holes[0][:300]
        return
    verdict.passed.append("degenerate")


def add_plus_tests(verdict: Verdict, scorer: BackendScorer) -> None:
    """Give a candidate that passed every gate its plus tests, as ``colbench tasks augment`` makes them (the audit's
    mutant scores reused); one that cannot have any is an ``augment`` reject (an InfraError an ``infra`` one)."""
    try:
        augmented = augment_task(verdict.task, scorer, killed=verdict.killed)
    except InfraError as exc:
        verdict.gate, verdict.reason = "infra", str(exc)
        return
    if augmented.task.plus is None or augmented.task.plus.note:
        verdict.gate = "augment"
        verdict.reason = augmented.task.plus.note if augmented.task.plus else "no plus tests"
        return
    verdict.task = augmented.task
    verdict.passed.append("augment")
