"""Degenerate answers' outcomes worked out on the host (``degenerate_outcomes``) against the batch runner's in the
sandbox: equal on every answer and every literal call, and nothing claimed for a call that would run task code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hand_tasks import make_task

from colbench.domains.backend import degenerate, degenerate_outcomes
from colbench.domains.backend.judging import degenerate_answers
from colbench.domains.backend.plus.calls import CallOutcome, run_sources
from colbench.domains.backend.plus.screen import TaskScreen
from colbench.domains.backend.scorer import BackendScorer
from colbench.tasks import Task

REFERENCE = (
    "import math\n"
    "def f(a, b=2, *rest, **named):\n    return a\n"
    "async def g(x):\n    return x\n"
    "class Box:\n    def get(self):\n        return 1\n"
    "LIMIT = 3\n"
)
LITERAL_CALLS = [
    "f(1)",
    "f()",
    "  f(-0.0, b=(1, 'x'))",
    "f([1, {2, 3}], {(1, 2): {4}}, None, True)",
    "f(b={1: [2.5]}, a=1j)",
    "f(b'\\x00xy', '\u00e9', -1000)",
    "f(())",
    "g('only')",
    "f(a=[], b={})",
]
NOT_LITERAL = [
    "f(LIMIT)",  # a name: the answer's module decides its value
    "f(*[1, 2])",
    "f(**{'a': 1})",
    "f(math.pi)",
    "Box().get()",
    "len(f(1))",
    "f(1)[0]",
    "h(1)",  # not a function of the reference
    "f(" + repr("x" * 2000) + ")",  # larger than any argument claimed on the host
    "f(" + "[" * 60 + "]" * 60 + ")",  # short, but nested deeper than any claimed on the host
    "f(1, a=1, a=2)",  # does not compile
    "f(lambda: 1)",
]


def sandbox_outcomes(scorer: BackendScorer, reference: str, calls: Sequence[str]) -> list[list[CallOutcome]]:
    runs = run_sources(scorer.sandbox, [(code, calls) for code in degenerate_answers(reference).values()])
    return [[replace(o, ops=0) for o in row] for row in runs]  # the work counted: a reference's only is ever read


def test_host_outcomes_are_the_batch_runners_on_every_answer_and_literal_call(scorer: BackendScorer) -> None:
    labels = list(degenerate_answers(REFERENCE))
    host = degenerate_outcomes.outcomes(REFERENCE, labels, LITERAL_CALLS)
    assert host is not None
    assert host == sandbox_outcomes(scorer, REFERENCE, LITERAL_CALLS)  # kinds, values to the type, details
    assert {o.kind for row in host for o in row} == {"value", "raised"}


@pytest.mark.parametrize("call", NOT_LITERAL)
def test_a_call_that_is_not_a_literal_call_of_a_task_function_is_left_to_the_sandbox(call: str) -> None:
    assert degenerate_outcomes.outcomes(REFERENCE, list(degenerate_answers(REFERENCE)), ["f(1)", call]) is None


def test_host_outcomes_agree_on_real_tasks(scorer: BackendScorer, bundled_tasks: list[Task]) -> None:
    claimed = 0
    for task in bundled_tasks[:15]:
        calls = TaskScreen(task, scorer).calls
        host = degenerate_outcomes.outcomes(task.ground_truth, list(degenerate_answers(task.ground_truth)), calls)
        if host is not None:
            claimed += 1
            assert host == sandbox_outcomes(scorer, task.ground_truth, calls), task.task_id
    assert claimed >= 10  # most tasks call their function with literals only


def test_the_degenerate_gate_asks_the_sandbox_nothing_for_literal_calls(
    scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    weak = make_task("def f(x):\n    return x * 2.5\n", ["f(2) > 0", "f(3) > 1"], task_id="weak-literal")
    screen = TaskScreen(weak, scorer)
    assert screen.usable  # the reference's batch run, made before the gate is watched
    asked: list[object] = []
    run = screen.run

    def watched(jobs: Sequence[tuple[str, Sequence[str]]]) -> list[list[CallOutcome]]:
        asked.append(jobs)
        return run(jobs)

    monkeypatch.setattr(screen, "run", watched)
    rows = degenerate.holes(scorer, weak, screen)
    assert asked == []
    rules = BackendScorer(scorer.sandbox, limits=scorer.limits, rules=2)  # the old rules: holes to find
    old = make_task("def f(x):\n    return x * 2.5\n", ["f(2) > 0", "f(3) > 1"], task_id="weak-literal-old")
    found = degenerate.holes(rules, old)
    assert (
        rows == []
        and found
        and found == [r for r in degenerate.audit_task(rules, old).rows if r[1] in ("hole", "degenerate success")]
    )


def test_an_answer_that_computes_nothing_and_passes_every_test_is_found_even_where_the_reference_agrees(
    scorer: BackendScorer, bundled_tasks: list[Task]
) -> None:
    constant = make_task(
        'def total(prices, code):\n    rate = {"A": 0.1}.get(code.lower(), 0)\n    return sum(p * rate for p in prices)\n',
        ["total([1, 2], 'A') == 0", "total([5], 'a') == 0", "total([], 'B') == 0"],
        task_id="always-zero",
    )
    echo = make_task("def tidy(s):\n    return s.strip() if s else s\n", ["tidy('a')", "tidy('b c')"], task_id="echo")
    assert degenerate.constant_successes(scorer, constant)[:1] == ["returns 0"]
    assert degenerate.constant_successes(scorer, echo) == ["returns its first argument"]
    assert degenerate.holes(scorer, constant) == []  # tasks check's holes need a call the reference answers otherwise
    for task in [*bundled_tasks[:10], constant, echo]:  # the scorer's own verdicts, answer by answer
        answers = degenerate_answers(task.ground_truth)
        scores = scorer.score_many([(task, code) for code in answers.values()])
        direct = [label for label, score in zip(answers, scores, strict=True) if score.success]
        assert degenerate.constant_successes(scorer, task) == direct, task.task_id
