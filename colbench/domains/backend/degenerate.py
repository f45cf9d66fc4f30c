"""``colbench tasks check`` for backend tasks: can every test be passed by the reference, and failed by an answer
that computes nothing?

For each task the reference is judged as the scorer judges it (``BackendScorer.reference``), then every degenerate
answer of ``judging.degenerate_answers`` (returns None, raises, constants, an argument, ...) runs against the judged
expressions and against each test's probes (the task's calls in it). A finding is one of:

- ``reference cannot pass``: the reference raises, times out, is nondeterministic, or returns what cannot be
  compared on this test, so the test is not counted;
- ``reference fails as an answer``: the reference, scored as an answer, fails a counted test;
- ``dropped``: the test uses none of the task's code;
- ``judged on its calls``: the scorer judges the test's calls instead of the test as written (rule 3);
- ``hole``: a degenerate answer passes the test while its calls give values unlike the reference's, or the test
  uses none of the task's code and is counted (the old rules): any answer can pass it;
- ``degenerate success``: a degenerate answer passes every counted test of the task while some call differs;
- ``constant success``: a degenerate answer passes every counted test and every call gives the reference's value:
  the reference itself returns what computing nothing returns on these tests (dead code, a bug, or tests that see
  one value), so the task rewards a constant answer.

``hole`` and ``degenerate success`` are what the judging rules exist to prevent: with the current rules they should
not occur. ``constant success`` is the task's, not the rules': 8 of the 300 test-sample tasks have one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from colbench.domains.backend import degenerate_outcomes
from colbench.domains.backend.judging import degenerate_answers, plan
from colbench.domains.backend.plus.calls import CallOutcome
from colbench.domains.backend.plus.screen import TaskScreen, verdict
from colbench.domains.backend.scorer import BackendScorer, same_outcome
from colbench.domains.backend.values import EXACT, values_equal
from colbench.errors import InfraError
from colbench.types.task import Task

KINDS = (
    "reference cannot pass",
    "reference fails as an answer",
    "dropped",
    "judged on its calls",
    "hole",
    "degenerate success",
    "constant success",
)


@dataclass
class Findings:
    """What the check found in one task: ``(test name, kind, detail)`` rows, its counted tests and whether the
    reference, scored as an answer, passes all of them."""

    task_id: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    tests: int = 0
    counted: int = 0
    reference_passes: bool = False
    error: str = ""


def audit_task(scorer: BackendScorer, task: Task) -> Findings:
    """The findings of one task (see the module docstring)."""
    found = Findings(task.task_id, tests=len(task.test_cases))
    try:
        reference = scorer.reference(task)
        as_answer = scorer.score(task, task.ground_truth)
    except InfraError as exc:
        found.error = str(exc)
        return found
    expected = reference.expected()
    found.counted, found.reference_passes = as_answer.tests_total, bool(as_answer.success)
    for result in as_answer.tests:
        if result.judgeable and not result.passed:
            found.rows.append((result.name, "reference fails as an answer", result.detail))
    for test, exp in zip(reference.plans, expected, strict=True):
        if test.dropped:
            found.rows.append((test.name, "dropped", test.dropped))
        elif not exp.judgeable:
            found.rows.append((test.name, "reference cannot pass", exp.reason))
        elif test.note:
            found.rows.append((test.name, "judged on its calls", test.note))
    probes = [plan(name, expr, task.ground_truth).probes for name, expr in task.test_cases]
    flat = [p for group in probes for p in group]
    judged = [test.judged for test in reference.plans]
    try:
        reference_probes = scorer.run(task.ground_truth, flat, "reference")
    except InfraError as exc:
        found.error = str(exc)
        return found
    counted = [i for i, exp in enumerate(expected) if exp.judgeable]
    for i in counted:
        if not probes[i]:  # counted under the old rules: its value is the reference's for every answer
            found.rows.append((reference.plans[i].name, "hole", "it uses none of the task's code: every answer passes"))
    answers = degenerate_answers(task.ground_truth)
    for label, outcomes in zip(answers, _run_all(scorer, list(answers.values()), judged + flat), strict=True):
        if isinstance(outcomes, InfraError):
            found.error = str(outcomes)
            return found
        got, got_probes = outcomes[: len(judged)], outcomes[len(judged) :]
        passed, differs, at = [], [], 0
        for i, group in enumerate(probes):
            mine = got_probes[at : at + len(group)]
            theirs = reference_probes[at : at + len(group)]
            at += len(group)
            differs.append(not all(same_outcome(a, b) for a, b in zip(theirs, mine, strict=True)))
            passed.append(i in counted and scorer.passes(expected[i], got[i]))
        for i in counted:
            if passed[i] and differs[i]:
                found.rows.append((reference.plans[i].name, "hole", f"an answer that {label} passes it"))
        if counted and all(passed[i] for i in counted):
            if any(differs[i] for i in counted):
                found.rows.append(("*", "degenerate success", f"an answer that {label} passes every counted test"))
            else:
                why = f"an answer that {label} passes every counted test, as the reference's values"
                found.rows.append(("*", "constant success", why))
    return found


def holes(scorer: BackendScorer, task: Task, screen: TaskScreen | None = None) -> list[tuple[str, str, str]]:
    """The ``hole`` and ``degenerate success`` rows of ``audit_task``, in its order, with the degenerate answers
    judged by the batch runner (``screen``; their probes run only for an answer that passes a counted test) wherever
    it settles them, else by ``audit_task``; the reference is not scored as an answer. What the generator's gate
    asks, at a fraction of the check's cost. An InfraError where the sandbox cannot run."""
    screen = screen or TaskScreen(task, scorer)
    names = [test.name for test in scorer.reference(task).plans]
    probes = [plan(name, expr, task.ground_truth).probes for name, expr in task.test_cases]
    counted = [(c, i) for c, i in enumerate(screen.counted) if i < len(probes)]  # as audit_task: the task's own
    rows = [
        (names[i], "hole", "it uses none of the task's code: every answer passes") for _, i in counted if not probes[i]
    ]
    answers = degenerate_answers(task.ground_truth)
    if not screen.usable:
        return _checked(scorer, task)
    labels = list(answers)
    outcomes = _answer_outcomes(screen, answers, labels, screen.calls)
    passes = screen.judge(outcomes)
    if any(None in row for row in passes):
        return _checked(scorer, task)
    tried = [k for k, row in enumerate(passes) if any(row[c] for c, _ in counted)]
    tests = sorted({i for k in tried for c, i in counted if passes[k][c]})  # what a degenerate answer passes
    calls = [p for i in tests for p in probes[i]]
    (reference,) = _on_calls(screen, calls, [screen.reference], lambda missing: [screen.run_reference(missing)])
    tried_labels = [labels[k] for k in tried]
    had = [outcomes[k] for k in tried]
    found = _on_calls(screen, calls, had, lambda missing: _answer_outcomes(screen, answers, tried_labels, missing))
    runs = dict(zip(tried, found, strict=True))
    for k, label in enumerate(answers):
        if k not in runs:
            continue
        differs: dict[int, bool | None] = {}
        at = 0
        for i in tests:
            n = len(probes[i])
            differs[i] = _differ(list(zip(reference[at : at + n], runs[k][at : at + n], strict=True)))
            at += n
        passed = {i: bool(passes[k][c]) for c, i in counted}
        if any(passed[i] and differs[i] is None for i in tests):
            return _checked(scorer, task)
        rows += [
            (names[i], "hole", f"an answer that {label} passes it") for _, i in counted if passed[i] and differs.get(i)
        ]
        if counted and all(passed.values()) and any(differs.get(i) for _, i in counted):
            rows.append(("*", "degenerate success", f"an answer that {label} passes every counted test"))
    return rows


def constant_successes(scorer: BackendScorer, task: Task, screen: TaskScreen | None = None) -> list[str]:
    """The degenerate answers (by label) that pass every counted test of ``task``, as the scorer would score them.

    Unlike ``holes``, this counts an answer the reference agrees with: a reference that returns one value on every
    test (or hands back its argument) is as easy to match as it is, so a task it makes rewards computing nothing,
    which ``colbench tasks generate`` must not keep. Judged on the host where the calls are literal
    (``degenerate_outcomes``), else by the batch runner, else by the scorer."""
    screen = screen or TaskScreen(task, scorer)
    if not screen.counted:
        return []
    answers = degenerate_answers(task.ground_truth)
    labels = list(answers)
    verdicts: list[bool | None] = [None for _ in labels]
    if screen.usable:
        rows = screen.judge(_answer_outcomes(screen, answers, labels, screen.calls))
        verdicts = [verdict(row) for row in rows]
    passed = screen.settle(list(answers.values()), verdicts)
    return [label for label, success in zip(labels, passed, strict=True) if success]


def _answer_outcomes(
    screen: TaskScreen, answers: dict[str, str], labels: Sequence[str], calls: Sequence[str]
) -> list[list[CallOutcome]]:
    """The degenerate answers' (``labels`` of ``answers``) outcomes on ``calls``: worked out on the host where that
    is exact (``degenerate_outcomes``), else in one request of the screen's."""
    known = degenerate_outcomes.outcomes(screen.task.ground_truth, labels, calls)
    return known if known is not None else screen.run([(answers[label], calls) for label in labels])


def _on_calls(
    screen: TaskScreen,
    calls: Sequence[str],
    had: Sequence[Sequence[CallOutcome]],
    run: Callable[[list[str]], list[list[CallOutcome]]],
) -> list[list[CallOutcome]]:
    """Each program's batch outcomes on ``calls``: those it has already (``had``, on the screen's judged calls; a
    probe that is a test's judged call is the usual case) reused, the rest got from ``run(missing)`` in one
    request (one list per program)."""
    judged = set(screen.calls)
    missing = [call for call in dict.fromkeys(calls) if call not in judged]
    extra = run(missing) if missing else [[] for _ in had]
    found = []
    for known, more in zip(had, extra, strict=True):
        outcome = {**dict(zip(screen.calls, known, strict=True)), **dict(zip(missing, more, strict=True))}
        found.append([outcome[call] for call in calls])
    return found


def _checked(scorer: BackendScorer, task: Task) -> list[tuple[str, str, str]]:
    """``audit_task``'s hole rows: where the batch runner cannot settle the degenerate answers."""
    found = audit_task(scorer, task)
    if found.error:
        raise InfraError(found.error)
    return [row for row in found.rows if row[1] in ("hole", "degenerate success")]


def _differ(pairs: Sequence[tuple[CallOutcome, CallOutcome]]) -> bool | None:
    """Whether a degenerate answer's probes differ from the reference's as ``same_outcome`` sees them (a value
    unlike the reference's, or a value where it failed): None where the batch runner cannot say."""
    for ours, theirs in pairs:
        kinds = {_kind(ours), _kind(theirs)}
        if None in kinds:
            return None
        if kinds == {"value"}:
            if not values_equal(ours.value, theirs.value, EXACT):
                return True
        elif len(kinds) > 1:
            return True
    return False


def _kind(outcome: CallOutcome) -> str | None:
    """The scorer's outcome kind of a batch outcome: a module that fails to run is a test that raises."""
    return "value" if outcome.is_value else "raised" if outcome.kind in ("raised", "module") else None


def _run_all(scorer: BackendScorer, answers: Sequence[str], tests: list[str]) -> list[Any]:
    """Each answer's outcomes on ``tests`` (or the InfraError it met), the answers sent at once: the sandbox's
    workers share their tests instead of waiting for one answer at a time."""

    def one(code: str) -> Any:
        try:
            return scorer.run(code, tests, "answer")
        except InfraError as exc:
            return exc

    with ThreadPoolExecutor(max(1, len(answers)), thread_name_prefix="colbench-degenerate") as pool:
        return list(pool.map(one, answers))


def audit(scorer: BackendScorer, tasks: Sequence[Task], jobs: int) -> Iterator[str]:
    """One line per finding, then a summary line of counts."""
    started = time.monotonic()
    counts: Counter[str] = Counter()
    tests = counted = passing = 0
    with ThreadPoolExecutor(max(1, jobs), thread_name_prefix="colbench-check") as pool:
        for findings in pool.map(lambda task: audit_task(scorer, task), tasks):
            tests += findings.tests
            counted += findings.counted
            passing += findings.reference_passes
            if findings.error:
                counts["infrastructure error"] += 1
                yield f"{findings.task_id}\t*\tinfrastructure error\t{findings.error}"
            seen: set[tuple[str, str]] = set()
            for name, kind, detail in findings.rows:
                if (name, kind) in seen:  # one row per test and kind (several degenerate answers may pass it)
                    continue
                seen.add((name, kind))
                counts[kind] += 1
                yield f"{findings.task_id}\t{name}\t{kind}\t{detail}"
    summary = ", ".join(f"{kind} {counts[kind]}" for kind in KINDS)
    infra = f", infrastructure errors {counts['infrastructure error']}" if counts["infrastructure error"] else ""
    yield (
        f"checked {len(tasks)} tasks in {time.monotonic() - started:.1f}s (judging rules {scorer.rules}): "
        f"reference passes all counted tests on {passing}/{len(tasks)}; {counted}/{tests} tests counted; "
        f"findings: {summary}{infra}"
    )
