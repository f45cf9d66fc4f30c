"""ColBench+ test augmentation: new test calls that tell a task's reference from its wrong variants.

For one task (docs/tasks.md, "ColBench+"):

1. The reference is checked on its own tests with the scorer's rules; a task whose reference is nondeterministic on
   one of them, or raises on all of them, gets no plus tests (``PlusTests.note`` says why).
2. Candidate calls are made from the task's own test calls (``inputs.mutated_calls``: boundary values from the
   reference's comparisons first, then type-aware edits), optionally with calls a model proposes
   (``proposals``), in the input domain and the magnitude the tests use (``inputs.in_magnitude``: a number
   beyond it only at a boundary of a constant the reference compares with, never so far that an answer recursing
   once per unit goes deeper than the tests would take it, ``inputs.depth_safe``).
3. The reference runs each candidate once, held to machine-independent budgets (the sandbox's ``Budget``); candidates on
   which it raises, goes over a budget or returns a value the judge cannot compare are dropped, and so is one with
   a number beyond the tests' magnitude on which no comparison of the reference stands otherwise than on the test
   it was made from (``_compared``: no comparison needed the value).
4. The reference's single-edit mutants (``mutants``) are split in two halves by a hash of their code. The
   augmenter sees only the *fit* half, and wider edits that are never measured (``mutants.fit_only``: numbers
   scaled and moved, comparison boundaries moved either way, terms, ``min`` / ``max`` arguments and ``and`` /
   ``or`` operands dropped, strings cut, floor divisions rounded up). Those targets (the fit mutants the task's
   own tests do not kill, and the wider edits) run on the ``SHORTLIST`` candidates that cover the most the tests
   do not; a target none of them tells apart runs on the other candidates, and one none of those does on
   ``SECOND`` second-generation candidates (edits of the first's: ``_kill_matrix``, ``_second``). It keeps the
   fewest candidates, greedily (the one that does the most still wanted, ties to the earlier), that kill each
   fit mutant twice and each wider edit once, cover what the task's tests do not (``_coverage``: lines,
   comparison outcomes, decisive boundaries, a list shorter than every test's), up to ``MAX_TESTS`` tests in
   all, then at least ``MIN_PLUS`` calls with values new to the test set. The other half is left for measuring
   (``bench/plus_tests.py``), so the reported scores are not fitted.
5. The kept calls are run again as the scorer runs a test (twice, each in a fresh process); any the scorer could
   not judge is dropped.

Everything is seeded by the task's content id and ``AUGMENTER_VERSION``: the same task gets the same plus tests on
any machine. Changing anything here that changes output means a new version.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from colbench.domains.backend.judging import plan
from colbench.domains.backend.plus.calls import CallOutcome, mutant_budget, run_calls, run_sources
from colbench.domains.backend.plus.coverage import instrument
from colbench.domains.backend.plus.inputs import (
    Candidate,
    Family,
    domain_of,
    edited_calls,
    mutated_calls,
    templates,
)
from colbench.domains.backend.plus.mutants import FIT_ONLY_LIMIT, Mutant, fit_only, mutants
from colbench.domains.backend.scorer import BackendScorer, expected_from
from colbench.domains.backend.values import values_equal
from colbench.types.task import PlusTests, Task, content_id

AUGMENTER_VERSION = "2"
MAX_TESTS = 30
"""Tests per task at most, the task's own included: scoring cost stays close to today's."""
CANDIDATES = 1500
"""Candidate calls the reference runs per task."""
SHORTLIST = 400
"""Candidates the mutants run: those that cover the most the task's tests do not."""
SECOND = 300
"""Second-generation candidates (edits of the first's) run where a target no first-generation call tells apart
is left."""
MUTANT_LIMIT = 80
"""Mutants made per task (a spread of them when a reference has more)."""
COVER = 2
"""The augmenter keeps adding calls until every fit mutant it can kill is killed this many times (a wider edit,
once)."""
MIN_PLUS = 5
"""Plus tests per task at least (where there are candidates): after the fit mutants are killed, calls whose
reference values are new to the test set, so faults the fit half does not show are still looked for."""

Proposer = Callable[[Task, Sequence[Family]], list[str]]
"""Extra candidate calls for a task (a model's, ``proposals.ModelProposer``)."""


@dataclass(frozen=True)
class Augmented:
    """One task with its plus tests, and the mutants the augmenter made of its reference (``fit``: the indices of
    the half it fitted on; the bench measures the plus tests on the other half)."""

    task: Task
    mutants: tuple[Mutant, ...] = ()
    fit: frozenset[int] = frozenset()

    @property
    def plus(self) -> PlusTests:
        assert self.task.plus is not None
        return self.task.plus


def seed_of(task: Task) -> str:
    """The task's content id (the same for the same task in any file) and the augmenter's version."""
    return f"{content_id(task.domain, task.to_row())}:{AUGMENTER_VERSION}"


def is_fit(task: Task, mutant: Mutant) -> bool:
    """Whether ``mutant`` is in the half the augmenter fits on (the other half is held out)."""
    digest = hashlib.sha256(f"{seed_of(task)}:{mutant.code}".encode()).digest()
    return digest[0] % 2 == 0


def _none(task: Task, note: str) -> Augmented:
    return Augmented(replace(task, plus=PlusTests((), AUGMENTER_VERSION, note)))


def reference_problem(task: Task, scorer: BackendScorer) -> str:
    """Why the task's reference cannot anchor new tests ("" when it can)."""
    expected = scorer.expected(task)
    for (name, _), exp in zip(scorer.tests(task), expected, strict=True):
        if "nondeterministic" in exp.reason:
            return f"the reference is nondeterministic on its own test {name}"
    if not any(exp.judgeable for exp in expected):
        reasons = sorted({exp.reason for exp in expected})
        return f"the reference passes none of its own tests ({'; '.join(reasons)[:200]})"
    return ""


def augment_task(
    task: Task, scorer: BackendScorer, *, proposer: Proposer | None = None, killed: frozenset[int] | None = None
) -> Augmented:
    """``task`` with its plus tests (``task.plus``), made as the module docstring says. ``killed``: the indices of
    the mutants (``mutants(reference, limit=MUTANT_LIMIT)``) the task's own tests kill, where the caller has
    scored them already (the mutation audit has): they are not scored again."""
    problem = reference_problem(task, scorer)
    if problem:
        return _none(task, problem)
    reference, sandbox = task.ground_truth, scorer.sandbox
    families = templates(task.test_cases, reference)
    if not families:
        return _none(task, "no test calls the task's code with literal arguments to vary")
    rng = random.Random(f"augment:{seed_of(task)}")
    domain = domain_of(families, reference)
    made_from = {c.call: c for c in mutated_calls(families, domain, rng, CANDIDATES)}
    if proposer is not None:
        made_from.update((c, Candidate(c, "")) for c in proposer(task, families) if c not in made_from)
    candidates = list(made_from)
    probed = instrument(reference)
    originals = [t.source for f in families for t in f.templates]
    outcomes = run_calls(sandbox, probed, originals + candidates, seed=scorer.seed, pool="reference", cover=True)
    covered = frozenset(item for o in outcomes[: len(originals)] for item in o.covered)
    seen_values = dict(zip(originals, outcomes[: len(originals)], strict=True))
    tests = [(c, o) for c, o in zip(originals, outcomes[: len(originals)], strict=True) if o.is_value]
    kept = [
        (c, o)
        for c, o in zip(candidates, outcomes[len(originals) :], strict=True)
        if o.is_value and (not made_from[c].beyond or _compared(o, seen_values.get(made_from[c].source)))
    ]
    new = [_coverage(o, covered, seen_values.get(made_from[c].source)) | made_from[c].short for c, o in kept]
    rank = sorted(range(len(kept)), key=lambda k: (-sum(str(i).endswith("!") for i in new[k]), -len(new[k])))
    shortlist = sorted(rank[:SHORTLIST])
    made = mutants(reference, limit=MUTANT_LIMIT, seed=seed_of(task))
    fit = frozenset(m.index for m in made if is_fit(task, m))
    original = set(killed) if killed is not None else _killed_by_original(task, scorer, made)
    wider = fit_only(reference, limit=FIT_ONLY_LIMIT, seed=seed_of(task))
    targets = [m for m in made if m.index in fit and m.index not in original] + wider
    kills, left = _kill_matrix(scorer, targets, tests, kept, shortlist)
    wanted = {k: new[k] | kills[k] for k in kills}
    if left:  # a second generation of calls, made from the first, for the targets none of it tells apart
        base = [made_from[c] for c, _ in kept]
        second = edited_calls(families, domain, rng, base, SECOND)
        found = _second(scorer, probed, left, tests + kept, [c for c in second if c.call not in made_from])
        for candidate, outcome, killing in found:
            source = seen_values.get(candidate.source)
            if candidate.beyond and not _compared(outcome, source):
                continue
            kept.append((candidate.call, outcome))
            wanted[len(kept) - 1] = _coverage(outcome, covered, source) | candidate.short | killing
    pool = sorted(wanted)
    kept = [kept[k] for k in pool]
    wanted_list = [wanted[k] for k in pool]
    cap = max(0, MAX_TESTS - len(task.test_cases))
    chosen = _diverse(_cover(wanted_list, cap=cap), [o for _, o in kept], scorer.expected(task), cap=min(cap, MIN_PLUS))
    calls = _judgeable(task, scorer, [kept[i][0] for i in chosen])
    names = {name for name, _ in task.test_cases}
    cases = tuple((_name(k, names), call) for k, call in enumerate(calls, start=1))
    plus = PlusTests(cases, AUGMENTER_VERSION)
    return Augmented(replace(task, plus=plus), tuple(made), fit)


def _name(k: int, taken: set[str]) -> str:
    name = f"plus{k}"
    while name in taken:
        name = "_" + name
    return name


def _killed_by_original(task: Task, scorer: BackendScorer, made: Sequence[Mutant]) -> set[int]:
    """The mutants the task's own tests already fail (as the scorer judges them)."""
    scores = scorer.score_many([(task, m.code) for m in made])
    return {m.index for m, s in zip(made, scores, strict=True) if s.success is False}


def _kill_matrix(
    scorer: BackendScorer,
    targets: Sequence[Mutant],
    tests: Sequence[tuple[str, CallOutcome]],
    kept: Sequence[tuple[str, CallOutcome]],
    shortlist: Sequence[int],
) -> tuple[dict[int, frozenset[int]], list[Mutant]]:
    """The target mutants each call tells from the reference (its outcome differs), for the shortlisted calls
    and, where a target none of them tells apart, the other kept calls that do (by index into ``kept``); and the
    targets none of them tells apart. (A wider edit the task's tests kill already is a target all the same: a plus
    test that tells it apart too is an input near the task's own that matters, such as a string one letter off the
    one the code looks for.) Two requests: the targets on the shortlist, then those left on the rest; ``tests``,
    the reference on the task's own calls, only sets the budgets with the rest."""
    found: dict[int, set[int]] = {k: set() for k in shortlist}
    if not targets or not kept:
        return {k: frozenset() for k in found}, []
    budget = mutant_budget([o for _, o in [*tests, *kept]])

    def untold(group: Sequence[Mutant], at: Sequence[int]) -> list[Mutant]:
        """One request: ``group`` on the kept calls ``at``; each call's kills noted, the mutants none tells apart
        returned."""
        calls = [kept[k][0] for k in at]
        runs = run_sources(scorer.sandbox, [(m.code, calls) for m in group], seed=scorer.seed, budget=budget)
        left = []
        for mutant, outcomes in zip(group, runs, strict=True):
            hits = [k for k, got in zip(at, outcomes, strict=True) if _differs(kept[k][1], got)]
            for k in hits:
                found.setdefault(k, set()).add(mutant.index)
            if not hits:
                left.append(mutant)
        return left

    left = untold(targets, shortlist)
    rest = sorted(set(range(len(kept))) - set(shortlist))
    still = untold(left, rest) if left and rest else left
    return {k: frozenset(v) for k, v in found.items()}, still


def _second(
    scorer: BackendScorer,
    probed: str,
    targets: Sequence[Mutant],
    before: Sequence[tuple[str, CallOutcome]],
    second: Sequence[Candidate],
) -> list[tuple[Candidate, CallOutcome, frozenset[int]]]:
    """The second-generation calls that tell one of ``targets`` from the reference, with the reference's outcome
    (what it covers, from ``probed``) and the targets each tells apart. Two requests: the reference on them, then
    the targets on those it returns a value on (budgets set by all the calls the reference ran, ``before``)."""
    if not targets or not second:
        return []
    calls = [c.call for c in second]
    outcomes = run_calls(scorer.sandbox, probed, calls, seed=scorer.seed, pool="reference", cover=True)
    ok = [(c, o) for c, o in zip(second, outcomes, strict=True) if o.is_value]
    if not ok:
        return []
    budget = mutant_budget([o for _, o in before] + [o for _, o in ok])
    jobs = [(m.code, [c.call for c, _ in ok]) for m in targets]
    runs = run_sources(scorer.sandbox, jobs, seed=scorer.seed, budget=budget)
    killing: list[set[int]] = [set() for _ in ok]
    for mutant, got in zip(targets, runs, strict=True):
        for k, ((_, expected), outcome) in enumerate(zip(ok, got, strict=True)):
            if _differs(expected, outcome):
                killing[k].add(mutant.index)
    return [(c, o, frozenset(k)) for (c, o), k in zip(ok, killing, strict=True) if k]


def _differs(expected: CallOutcome, got: CallOutcome) -> bool:
    return got.kind == "lost" or not expected.same(got)


def _compared(outcome: CallOutcome, template: CallOutcome | None) -> bool:
    """Whether some comparison of the reference stands otherwise on a call than on the test it was made from (or
    is evaluated on one only): what a call with a number beyond the tests' magnitude must show to be kept."""
    if template is None or not template.is_value:
        return False
    mine, theirs = _relations(outcome), _relations(template)
    return any(mine.get(c) != theirs.get(c) for c in mine.keys() | theirs.keys())


def _relations(outcome: CallOutcome) -> dict[str, set[str]]:
    """How the operands of each comparison a call evaluated stood (``{"C3": {"lt", "eq"}}``)."""
    found: dict[str, set[str]] = {}
    for item in outcome.covered:
        if item.startswith("C"):
            comparison, _, relation = item.partition(":")
            found.setdefault(comparison, set()).add(relation)
    return found


def _coverage(outcome: CallOutcome, covered: frozenset[str], template: CallOutcome | None) -> frozenset[int | str]:
    """What a call covers that the task's tests do not: lines and comparison relations they never reach, and
    a *decisive boundary* (``C3:eq!``): the call differs from the test it was made from in how the operands of one
    comparison stand, and of no other comparison both evaluated, its operands are now equal, and its value differs
    from that test's: the boundary of that comparison alone decides the value, so a fault there (``<`` for ``<=``,
    a constant off by one) shows."""
    new = frozenset(outcome.covered - covered)
    if template is None or not template.is_value or outcome.same(template):
        return new
    mine, theirs = _relations(outcome), _relations(template)
    changed = [c for c in mine.keys() & theirs.keys() if mine[c] != theirs[c]]
    if len(changed) == 1 and "eq" in mine[changed[0]] and "eq" not in theirs[changed[0]]:
        return new | {f"{changed[0]}:eq!"}
    return new


def _cover(kills: Sequence[frozenset[int | str]], *, cap: int) -> list[int]:
    """The calls kept: greedily, the one that does the most still wanted (kills a fit mutant short of ``COVER``
    kills or a wider edit, a negative index, not killed yet, or covers what the task's tests do not, a decisive
    boundary twice too: ``_coverage``), ties to the earlier call, until none helps or ``cap`` are kept; returned in
    candidate order."""
    need = {m: COVER if (isinstance(m, int) and m >= 0) or str(m).endswith("!") else 1 for row in kills for m in row}
    chosen: list[int] = []
    while len(chosen) < cap:
        best, gain = -1, 0
        for k, row in enumerate(kills):
            if k in chosen:
                continue
            g = sum(1 for m in row if need[m] > 0)
            if g > gain:
                best, gain = k, g
        if best < 0:
            break
        chosen.append(best)
        for m in kills[best]:
            need[m] -= 1
    return sorted(chosen)


def _diverse(chosen: list[int], outcomes: Sequence[CallOutcome], expected: Sequence[Any], *, cap: int) -> list[int]:
    """``chosen`` topped up to ``cap`` calls with those whose reference value no test has yet (in candidate
    order), then with the next calls in candidate order; in candidate order."""
    values = [e.value for e in expected if e.judgeable] + [outcomes[k].value for k in chosen]
    picked = list(chosen)
    for new_value_only in (True, False):
        for k, outcome in enumerate(outcomes):
            if len(picked) >= cap:
                return sorted(picked)
            if k in picked:
                continue
            if new_value_only and any(values_equal(outcome.value, v) for v in values):
                continue
            picked.append(k)
            values.append(outcome.value)
    return sorted(picked)


def _judgeable(task: Task, scorer: BackendScorer, calls: Sequence[str]) -> list[str]:
    """The calls the scorer can judge: the reference, run as the scorer runs a test (twice, in fresh processes),
    returns the same comparable value both times."""
    plans = [plan(f"plus{k}", call, task.ground_truth) for k, call in enumerate(calls)]
    judged = [p.judged for p in plans]
    if not judged:
        return []
    runs = max(2, scorer.reference_runs)
    flat = scorer.sandbox.run_tests(
        task.ground_truth,
        judged,
        limits=scorer.limits,
        seed=scorer.seed,
        pool="reference",
        repeat=runs,
        shared_process=True,
    )
    n = len(judged)
    keep = []
    for i, call in enumerate(calls):
        if plans[i].dropped or plans[i].wrapped:
            continue
        if expected_from([flat[r * n + i] for r in range(runs)]).judgeable:
            keep.append(call)
    return keep
