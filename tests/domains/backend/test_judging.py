"""Scoring holes: tests whose value no answer can change are judged by what they mean, views and iterators are
compared by content, and ``tasks check`` finds what degenerate answers could pass."""

from __future__ import annotations

import pytest

from colbench.domains.backend.degenerate import audit, audit_task
from colbench.domains.backend.judging import DROPPED_NO_CODE, degenerate_answers, plan
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.domain import get_domain
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.tasks import Task

TURNOUT = "def calculate_voter_turnout(registered, voted):\n    return round(voted / registered * 100, 1)\n"
PRINTED = [  # the shape found in the real test split: every test prints, so every test compares None == 10.0
    f"print(calculate_voter_turnout({r}, {v})) == {round(v / r * 100, 1)}"
    for r, v in [(1000, 100), (200, 50), (10, 5), (3, 1), (7, 7), (90, 45), (8, 2), (50, 1), (64, 16), (12, 9)]
]
GARBAGE = "def calculate_voter_turnout(a, b): return 'garbage'"


def task(reference: str, tests: list[str], task_id: str = "t") -> Task:
    return Task(
        task_id, "backend", "Write it.", reference, reference, tuple((f"test{i + 1}", e) for i, e in enumerate(tests))
    )


@pytest.fixture(scope="module")
def sandbox(bwrap_sandbox: BwrapSandbox) -> BwrapSandbox:
    return bwrap_sandbox


def test_the_printed_tests_hole_is_closed(sandbox: BwrapSandbox) -> None:
    printed = task(TURNOUT, PRINTED)
    legacy, current = BackendScorer(sandbox, rules=2), BackendScorer(sandbox, rules=3)
    assert legacy.score(printed, GARBAGE).tests_passed == 10  # what colbench 0.1 (and the original) gave
    garbage = current.score(printed, GARBAGE)
    assert (garbage.tests_passed, garbage.tests_total) == (0, 10)
    assert garbage.tests[0].judged == "calculate_voter_turnout(1000, 100)"
    right = current.score(printed, "I WANT TO ANSWER:\n" + TURNOUT)
    assert right.success and right.tests_passed == 10


@pytest.mark.parametrize(
    ("expression", "judged", "probes"),
    [
        ("f(1)", "f(1)", ("f(1)",)),
        ("print(f(1))", "f(1)", ("f(1)",)),
        ("print(f(1)) == 3", "f(1)", ("f(1)",)),
        ("3 == f(1)", "f(1)", ("f(1)",)),
        ("f(1) != [1, 2]", "f(1)", ("f(1)",)),
        ("f(1) is None", "f(1)", ("f(1)",)),
        ("round(f(1), 2)", "round(f(1), 2)", ("f(1)",)),
        ("f(1) == f(2)", "f(1) == f(2)", ("f(1)", "f(2)")),
        ("Acc(5).add(2).total", "Acc(5).add(2).total", ("Acc(5).add(2)",)),
        ("[f(x) for x in range(3)]", "[f(x) for x in range(3)]", ("f(x)",)),
        ("f(RATE)", "f(RATE)", ("f(RATE)",)),
        ("print(f('é', \"ü\")) == 'ß'", "f('é', \"ü\")", ("f('é', \"ü\")",)),  # offsets count UTF-8 bytes
        ("sorted(f(1,\n  2))", "sorted(f(1,\n  2))", ("f(1,\n  2)",)),  # over several lines
    ],
)
def test_static_rules(expression: str, judged: str, probes: tuple[str, ...]) -> None:
    reference = "RATE = 2\ndef f(x):\n    return x\nclass Acc:\n    pass\n"
    found = plan("t", expression, reference)
    assert (found.judged, found.probes, found.dropped) == (judged, probes, "")
    assert found.wrapped == (probes != (judged,))


@pytest.mark.parametrize("expression", ["1 + 1 == 2", "len([1, 2, 3])", "print('hello')", "'f(1)'"])
def test_a_test_without_the_tasks_code_is_dropped(expression: str) -> None:
    assert plan("t", expression, "def f(x):\n    return x\n").dropped == DROPPED_NO_CODE


def test_tests_degenerate_answers_can_pass_are_judged_on_their_calls(sandbox: BwrapSandbox) -> None:
    reference = "def f(x):\n    return x * 2.5\n"
    tests = ["isinstance(f(2), float)", "f(4) > 0", "round(f(2), 0)", "f(3) == 7.5", "sorted([f(1), f(2)])", "1 == 1"]
    scorer = BackendScorer(sandbox)
    ref = scorer.reference(task(reference, tests))
    judged = [p.judged for p in ref.plans]
    assert judged[:2] == ["f(2)", "f(4)"]  # an answer returning 0.0 (resp. 1) reproduces their values
    assert judged[2] == "round(f(2), 0)"  # no degenerate answer gives 5.0: judged as written
    assert judged[3] == "f(3)" and judged[4] == "sorted([f(1), f(2)])"
    assert ref.plans[5].dropped
    score = scorer.score(task(reference, tests), "def f(x):\n    return 1.0")  # a float, positive, wrong
    assert [t.passed for t in score.tests] == [False, False, False, False, False, False]
    assert score.tests_total == 5
    assert scorer.score(task(reference, tests), reference).success


def test_views_and_iterators_compare_by_content(sandbox: BwrapSandbox) -> None:
    reference = (
        "def keys(d):\n    return d.keys()\n"
        "def values(d):\n    return d.values()\n"
        "def items(d):\n    return d.items()\n"
        "def upto(n):\n    return range(n)\n"
        "def gen(n):\n    return (i * i for i in range(n))\n"
        "def pairs(a, b):\n    return zip(a, b)\n"
    )
    tests = ["keys({1: 2, 3: 4})", "values({1: [2], 3: 4})", "items({1: [2]})", "upto(4)", "gen(3)", "pairs([1], 'a')"]
    scorer = BackendScorer(sandbox)
    the_task = task(reference, tests)
    assert all(e.judgeable for e in scorer.expected(the_task))
    plain = (
        "def keys(d):\n    return set(d)\n"
        "def values(d):\n    return list(d.values())\n"
        "def items(d):\n    return dict(d)\n"
        "def upto(n):\n    return list(range(n))\n"
        "def gen(n):\n    return [i * i for i in range(n)]\n"
        "def pairs(a, b):\n    return [(1, 'a')]\n"
    )
    assert scorer.score(the_task, plain).tests_passed == 6
    assert scorer.score(the_task, reference).success
    wrong = plain.replace("[i * i for i in range(n)]", "[i for i in range(n)]").replace("set(d)", "set()")
    assert scorer.score(the_task, wrong).tests_passed == 4
    endless = task("import itertools\ndef f():\n    return itertools.count()\n", ["f()"])
    assert not scorer.expected(endless)[0].judgeable  # refused as too long, not a hang


def test_degenerate_answers_define_every_name() -> None:
    reference = "LIMIT = 3\ndef f(a, b=1):\n    return a\nclass Shop:\n    def total(self):\n        return 0\n"
    answers = degenerate_answers(reference)
    assert len(answers) >= 12 and "returns None" in answers and "raises" in answers
    for code in answers.values():
        namespace: dict[str, object] = {}
        exec(compile(code, "<degenerate>", "exec"), namespace)  # our own generated code, not an agent's
        assert {"LIMIT", "f", "Shop"} <= set(namespace)
        assert callable(namespace["Shop"](1, x=2).total)  # type: ignore[operator]


def test_tasks_check_finds_the_holes_of_the_old_rules_and_none_of_the_new(sandbox: BwrapSandbox) -> None:
    reference = "def f(x):\n    return x * 2.5\n"
    weak = task(reference, ["isinstance(f(2), float)", "print(f(2)) == 5.0", "f(2)", "2 + 2 == 4"])
    old, new = BackendScorer(sandbox, rules=2), BackendScorer(sandbox, rules=3)
    old_kinds = {(name, kind) for name, kind, _ in audit_task(old, weak).rows}
    assert {("test1", "hole"), ("test2", "hole"), ("test4", "hole")} <= old_kinds and ("test3", "hole") not in old_kinds
    new_rows = audit_task(new, weak).rows
    assert not any(kind in ("hole", "degenerate success") for _, kind, _ in new_rows)
    assert {("test1", "judged on its calls"), ("test4", "dropped")} <= {(n, k) for n, k, _ in new_rows}
    printed = audit_task(old, task(TURNOUT, PRINTED))
    assert ("*", "degenerate success") in {(n, k) for n, k, _ in printed.rows}  # any answer succeeded before


def test_a_degenerate_answer_may_pass_where_the_reference_gives_its_values(sandbox: BwrapSandbox) -> None:
    none = task("def f(x):\n    return None\n", ["f(1)", "f(2) is None"])
    rows = audit_task(BackendScorer(sandbox), none).rows
    assert not any(kind in ("hole", "degenerate success") for _, kind, _ in rows)


def test_tasks_check_reports_tests_the_reference_cannot_pass(sandbox: BwrapSandbox) -> None:
    broken = task(
        "import random\ndef f(x):\n    return 1 / x\ndef g():\n    return random.SystemRandom().random()\n",
        ["f(1)", "f(0)", "g()", "2 + 2"],
    )
    lines = list(audit(BackendScorer(sandbox), [broken], jobs=1))
    kinds = {line.split("\t")[1]: line.split("\t")[2] for line in lines[:-1]}
    assert kinds == {
        "test2": "reference cannot pass",
        "test3": "reference cannot pass",
        "test4": "dropped",
        "*": "constant success",  # its one counted test, f(1) == 1.0, is passed by an answer that returns 1
    }
    assert "1/4 tests counted" in lines[-1] and "reference cannot pass 2" in lines[-1]
    assert "constant success 1" in lines[-1]


def test_the_env_ids_carry_their_judging_rules() -> None:
    import gymnasium as gym

    import colbench  # noqa: F401 (registers the ids)

    assert gym.spec("ColBench-Backend-v1").kwargs["rules"] == 3
    assert gym.spec("ColBench-Backend-v0").kwargs["rules"] == 2
    domain = get_domain("backend")
    assert domain.shared_scorer({"sandbox": "bwrap", "rules": 2}) is not domain.shared_scorer({"sandbox": "bwrap"})
