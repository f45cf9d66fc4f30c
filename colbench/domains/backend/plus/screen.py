"""Many answers to one task judged on its counted tests in one sandbox request: the scorer's verdict, at the cost of
the batch runner, wherever the batch runner can give it.

Scoring an answer (``BackendScorer.score``) costs a process per test. The mutation audit scores up to 80 mutants of
a task and the degenerate check a dozen answers, so a generated candidate's gates cost tens of times scoring its
reference. Here the answers' judged calls go to the batch runner (``calls.run_sources``), where the calls of many
answers share a process. The batch runner is not the scorer (its values are built-in types and classes only; its
limits count work, not seconds), so its verdict is taken only where it must be the scorer's:

* the reference, run by the batch runner on the counted tests, must give the values the scorer expects, each one
  (the same types, the same values), else nothing is settled here and every answer is scored by the scorer;
* a call that returns a value is judged with the scorer's tolerance; one that raises, whose module fails to run,
  or that returns what the scorer holds equal to nothing (a function, a module: ``opaque``), fails its test, as
  in the scorer;
* an answer with an outcome the batch runner cannot judge (over a budget, a value of a type it does not carry, a
  process the sandbox stopped) on a counted test, and no failed test besides, is scored by the scorer.

One known difference errs one way only: the batch runner carries a NumPy array as the list it holds, so an answer
returning an array where the reference returns a list passes here and fails in the scorer. Such a verdict can only
count a mutant as surviving or a degenerate answer as passing, which makes the gates stricter, never laxer.

The answers share test processes with each other and, in the request that runs the reference beside them (the
first, ``calls.run_beside``, made in the reference's pool), with the reference, after it: they must be of the
reference's own trust, such as its mutants or answers that compute nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from colbench.domains.backend.plus.calls import CallOutcome, mutant_budget, run_beside, run_calls, run_sources
from colbench.domains.backend.scorer import BackendScorer, Expected, extract_code
from colbench.domains.backend.values import EXACT, Tolerance, values_equal
from colbench.errors import InfraError
from colbench.sandbox.contract import Budget
from colbench.types.task import Task

REFERENCE_BUDGET = Budget(max_ops=1_000_000)
"""The reference's batch run: a reference that does more work than this is scored the scorer's way."""


def judged(expected: Expected, got: CallOutcome, tolerance: Tolerance = EXACT) -> bool | None:
    """Whether ``got`` passes a counted test expecting ``expected`` (None: the batch runner cannot say)."""
    if got.is_value:
        return values_equal(expected.value, got.value, tolerance)
    if got.kind in ("raised", "module", "opaque"):
        return False
    return None


def verdict(row: Sequence[bool | None]) -> bool | None:
    """Whether an answer passes every counted test, from whether it passes each (None: not settled here)."""
    return False if False in row else None if None in row else True


def agrees(expected: Sequence[Expected], reference: Sequence[CallOutcome]) -> bool:
    """Whether the batch runner's reference outcomes are the scorer's expected values, exactly."""
    return all(r.is_value and values_equal(e.value, r.value, EXACT) for e, r in zip(expected, reference, strict=True))


class TaskScreen:
    """One task under one scorer: its counted tests' judged calls, the reference's batch outcomes on them (run once,
    when first needed) and answers judged against them. The mutation audit and the degenerate gate of one
    candidate share one, so the reference runs once for both."""

    def __init__(self, task: Task, scorer: BackendScorer) -> None:
        self.task, self.scorer = task, scorer
        reference = scorer.reference(task)
        expected = reference.expected()
        self.counted = [i for i, exp in enumerate(expected) if exp.judgeable]
        """The indices, among ``scorer.tests(task)``, of the tests that count."""
        self.expected = [expected[i] for i in self.counted]
        self.calls = [reference.plans[i].judged for i in self.counted]

    @cached_property
    def reference(self) -> list[CallOutcome]:
        """The batch runner's outcomes of the reference on ``calls`` (its own request, in the ``reference`` pool)."""
        return self.run_reference(self.calls)

    @property
    def reference_ran(self) -> bool:
        """Whether ``reference`` is known (a cached property: set once computed, or by ``outcomes``)."""
        return "reference" in self.__dict__

    @cached_property
    def usable(self) -> bool:
        """Whether the batch runner gives the scorer's expected values (else nothing is settled here)."""
        return agrees(self.expected, self.reference)

    def run_reference(self, calls: Sequence[str]) -> list[CallOutcome]:
        scorer = self.scorer
        return run_calls(
            scorer.sandbox, self.task.ground_truth, calls, seed=scorer.seed, budget=REFERENCE_BUDGET, pool="reference"
        )

    def run(self, jobs: Sequence[tuple[str, Sequence[str]]]) -> list[list[CallOutcome]]:
        """The outcomes of each ``(code, calls)`` job, in one request; an answer may do ten times the reference's
        work (on the counted tests), and a process the sandbox stops loses only its own job's calls."""
        scorer = self.scorer
        budget = Budget(
            max_ops=mutant_budget(self.reference).max_ops, backstop_s=max(10.0, 2 * scorer.limits.timeout_s)
        )
        return run_sources(scorer.sandbox, jobs, seed=scorer.seed, budget=budget, retry=False)

    def outcomes(self, codes: Sequence[str]) -> list[list[CallOutcome]]:
        """Each code's batch outcomes on the counted tests' judged calls (``calls``), in one request: the one that
        also runs the reference, where it has not run yet (``calls.run_beside``), else (or where that request lost
        an expression) one of their own."""
        jobs = [(code, self.calls) for code in codes]
        if not self.reference_ran and jobs:
            scorer = self.scorer
            both = run_beside(
                scorer.sandbox, self.task.ground_truth, self.calls, jobs, seed=scorer.seed, budget=REFERENCE_BUDGET
            )
            if both is not None:
                self.__dict__["reference"], found = both
                return found
        return self.run(jobs)

    def judge(self, outcomes: Sequence[Sequence[CallOutcome]]) -> list[list[bool | None]]:
        """Whether each code passes each counted test, from its ``outcomes`` (None where the batch runner cannot
        say); only when ``usable``."""
        tolerance = self.scorer.tolerance
        return [[judged(e, o, tolerance) for e, o in zip(self.expected, got, strict=True)] for got in outcomes]

    def passes(self, codes: Sequence[str]) -> list[list[bool | None]]:
        """``judge(outcomes(codes))``; what it says counts only when ``usable``."""
        return self.judge(self.outcomes(codes))

    def verdicts(self, codes: Sequence[str]) -> list[bool | None]:
        """Whether each code passes every counted test (None: not settled here)."""
        if not codes or (self.reference_ran and not self.usable):
            return [None for _ in codes]
        rows = self.passes(codes)  # the reference runs beside them, where it has not run yet
        if not self.usable:
            return [None for _ in codes]
        return [verdict(row) for row in rows]

    def successes(self, answers: Sequence[str]) -> list[bool]:
        """``scorer.score(task, answer).success`` for each answer (see the module docstring for how); an answer the
        sandbox could not run is an InfraError, as the scorer's is."""
        if not self.counted:
            return [False for _ in answers]
        codes = [extract_code(answer) for answer in answers]
        present = [k for k, code in enumerate(codes) if code.strip()]
        verdicts: list[bool | None] = [False] * len(answers)  # the scorer fails every test of an empty answer
        for k, found in zip(present, self.verdicts([codes[k] for k in present]), strict=True):
            verdicts[k] = found
        return self.settle(answers, verdicts)

    def settle(self, answers: Sequence[str], verdicts: Sequence[bool | None]) -> list[bool]:
        """``verdicts``, each None in it the scorer's verdict on its answer (all scored in one call); an answer the
        sandbox could not run is an InfraError."""
        settled = list(verdicts)
        unsettled = [k for k, found in enumerate(settled) if found is None]
        scores = self.scorer.score_many([(self.task, answers[k]) for k in unsettled])
        for k, score in zip(unsettled, scores, strict=True):
            if score.success is None:
                raise InfraError(score.error)
            settled[k] = score.success
        return [bool(found) for found in settled]


def successes(task: Task, scorer: BackendScorer, answers: Sequence[str]) -> list[bool]:
    return TaskScreen(task, scorer).successes(answers)
