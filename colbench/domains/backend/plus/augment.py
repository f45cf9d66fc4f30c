"""ColBench+ test augmentation: new test calls that tell a task's reference from its wrong variants.

For one task (docs/tasks.md, "ColBench+"):

1. The reference is checked on its own tests with the scorer's rules; a task whose reference is nondeterministic on
   one of them, or raises on all of them, gets no plus tests (``PlusTests.note`` says why).
2. Candidate calls are made from the task's own test calls (``inputs.mutated_calls``: boundary values from the
   reference's comparisons first, then type-aware edits), optionally with calls a model proposes
   (``proposals``), in the input domain the tests use.
3. The reference runs each candidate once, held to machine-independent budgets (``calls.Budget``); candidates on
   which it raises, goes over a budget or returns a value the judge cannot compare are dropped.
4. The reference's single-edit mutants (``mutants``) are split in two halves by a hash of their code. The
   augmenter sees only the *fit* half: it runs the fit mutants that the task's own tests do not kill on every
   candidate, then keeps the fewest candidates that kill them, greedily (the candidate killing the most mutants
   not yet killed twice, ties to the earlier candidate), up to ``MAX_TESTS`` tests in all. It also fits on
   wider edits that are never measured (``mutants.fit_only``: numbers scaled, strings cut, ``and`` / ``or``
   operands dropped), and
   wants calls that cover what the task's tests do not (``_coverage``), then at least ``MIN_PLUS`` calls with
   values new to the test set. The other half is left for measuring (``bench/plus_tests.py``), so the reported
   scores are not fitted.
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
from colbench.domains.backend.plus.inputs import Family, domain_of, mutated_calls, templates
from colbench.domains.backend.plus.mutants import Mutant, fit_only, mutants
from colbench.domains.backend.scorer import BackendScorer, expected_from
from colbench.domains.backend.values import values_equal
from colbench.types.task import PlusTests, Task, content_id

AUGMENTER_VERSION = "1"
MAX_TESTS = 30
"""Tests per task at most, the task's own included: scoring cost stays close to today's."""
CANDIDATES = 1500
"""Candidate calls the reference runs per task."""
SHORTLIST = 400
"""Candidates the mutants run: those that cover the most the task's tests do not."""
MUTANT_LIMIT = 80
"""Mutants made per task (a spread of them when a reference has more)."""
COVER = 2
"""The augmenter keeps adding calls until every fit mutant it can kill is killed this many times."""
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
    made_from = dict(mutated_calls(families, domain_of(families, reference), rng, CANDIDATES))
    if proposer is not None:
        made_from.update((c, "") for c in proposer(task, families) if c not in made_from)
    candidates = list(made_from)
    probed = instrument(reference)
    originals = [t.source for f in families for t in f.templates]
    outcomes = run_calls(sandbox, probed, originals + candidates, seed=scorer.seed, pool="reference", cover=True)
    covered = frozenset(item for o in outcomes[: len(originals)] for item in o.covered)
    seen_values = dict(zip(originals, outcomes[: len(originals)], strict=True))
    reference_out = outcomes[len(originals) :]
    kept = [(c, o) for c, o in zip(candidates, reference_out, strict=True) if o.is_value]
    new = [_coverage(o, covered, seen_values.get(made_from[c])) for c, o in kept]
    rank = sorted(range(len(kept)), key=lambda k: (-sum(str(i).endswith("!") for i in new[k]), -len(new[k])))
    shortlist = sorted(rank[:SHORTLIST])
    kept = [kept[k] for k in shortlist]
    made = mutants(reference, limit=MUTANT_LIMIT, seed=seed_of(task))
    fit = frozenset(m.index for m in made if is_fit(task, m))
    original = set(killed) if killed is not None else _killed_by_original(task, scorer, made)
    targets = [m for m in made if m.index in fit and m.index not in original] + fit_only(reference)
    kills = _kill_matrix(scorer, targets, kept)
    wanted = [_coverage(o, covered, seen_values.get(made_from[call])) | kills[k] for k, (call, o) in enumerate(kept)]
    cap = max(0, MAX_TESTS - len(task.test_cases))
    chosen = _diverse(_cover(wanted, cap=cap), [o for _, o in kept], scorer.expected(task), cap=min(cap, MIN_PLUS))
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
    scorer: BackendScorer, targets: Sequence[Mutant], kept: Sequence[tuple[str, CallOutcome]]
) -> list[frozenset[int]]:
    """For each kept call, the target mutants whose outcome on it differs from the reference's."""
    if not targets or not kept:
        return [frozenset() for _ in kept]
    calls = [c for c, _ in kept]
    budget = mutant_budget([o for _, o in kept])
    killed: list[set[int]] = [set() for _ in kept]
    runs = run_sources(scorer.sandbox, [(m.code, calls) for m in targets], seed=scorer.seed, budget=budget)
    for mutant, outcomes in zip(targets, runs, strict=True):
        for k, ((_, expected), got) in enumerate(zip(kept, outcomes, strict=True)):
            if got.kind == "lost" or not expected.same(got):
                killed[k].add(mutant.index)
    return [frozenset(k) for k in killed]


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
    kills, or covers what the task's tests do not, a decisive boundary twice too: ``_coverage``), ties to the
    earlier call, until none helps or ``cap`` are kept; returned in candidate order."""
    need = {m: COVER if isinstance(m, int) or m.endswith("!") else 1 for row in kills for m in row}
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
