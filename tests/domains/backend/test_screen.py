"""The batch-runner screen (``plus.screen``): many answers of one trust judged in one request, with the scorer's
verdict wherever it gives one and the scorer itself everywhere else; and the degenerate gate built on it."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import pytest
from hand_tasks import TIERED, make_task
from paths import REPO

from colbench.domains.backend import degenerate
from colbench.domains.backend.plus.calls import BATCH, mutant_budget, run_beside, run_calls, run_sources
from colbench.domains.backend.plus.mutants import mutants
from colbench.domains.backend.plus.screen import REFERENCE_BUDGET, successes
from colbench.domains.backend.scorer import BackendScore, BackendScorer
from colbench.sandbox import contract
from colbench.sandbox.contract import Limits
from colbench.tasks import Task

# Calls at the reference's thresholds (5, 20, 50): its off-by-one mutants fail them.
AT_THRESHOLDS = [f"shipping_cost({w}, {e})" for w, e in ((2, False), (5, True), (20, False), (21, True), (50, True))]
RIGHT = "def shipping_cost(w, e):\n    c = 30 + (w - 20) * 2 if w > 20 else 15 if w >= 5 else 8\n    return round(c * 1.5 if e and w < 50 else c, 2)\n"
# Answers of every outcome the batch runner has: right and wrong values, a wrong type, a raise, a module that fails,
# a value it does not carry (a generator, an object of the answer's class), values the scorer holds equal to
# nothing (a function, a bare object, a tuple holding a builtin: settled in the batch), a process it loses
# (os._exit), work over its budget, and the text forms the scorer unwraps (a fenced block, an empty answer).
ODD_ANSWERS = {
    "right": RIGHT,
    "right, fenced in prose": f"Here it is:\n```python\n{RIGHT}```\n",
    "right, reads __file__": RIGHT.replace("    c =", "    assert __file__\n    c ="),
    "right, a float for an int": RIGHT.replace("return round(", "return float(round(") + ")",
    "a list for a number": RIGHT.replace("return round(", "return [round(") + "]",
    "off by one": RIGHT.replace("w >= 5", "w > 5"),
    "raises": "def shipping_cost(w, e):\n    raise ValueError(w)\n",
    "module fails": "import no_such_module_here\n" + RIGHT,
    "a generator": "def shipping_cost(w, e):\n    yield 8\n",
    "a function": "def shipping_cost(w, e):\n    return shipping_cost\n",
    "a bare object": "def shipping_cost(w, e):\n    return object()\n",
    "a pair holding a builtin": "def shipping_cost(w, e):\n    return (8, len)\n",
    "a class equal to every type": "class M(type):\n    __eq__ = lambda c, o: True\n    __hash__ = type.__hash__\n"
    "class C(metaclass=M):\n    pass\ndef shipping_cost(w, e):\n    return C()\n",
    "kills its process": "import os\ndef shipping_cost(w, e):\n    os._exit(3)\n",
    "loops a while, then right": RIGHT.replace("    c =", "    for _ in range(300_000):\n        pass\n    c ="),
    "empty": "",
    "prose only": "I cannot write this.",
}


def tiered() -> Task:
    return make_task(TIERED, AT_THRESHOLDS, task_id="tiered-screen")


def left_to_the_scorer(scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The answers the screen hands to ``scorer.score_many``, as they are handed."""
    handed: list[str] = []
    score_many = scorer.score_many

    def recording(pairs: Sequence[tuple[Task, str]]) -> list[BackendScore]:
        handed.extend(answer for _, answer in pairs)
        return score_many(pairs)

    monkeypatch.setattr(scorer, "score_many", recording)
    return handed


def test_the_screen_gives_the_scorers_verdict_on_mutants_and_odd_answers(
    scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = tiered()
    answers = [m.code for m in mutants(TIERED)] + list(ODD_ANSWERS.values())
    expected = [s.success for s in scorer.score_many([(task, a) for a in answers])]
    handed = left_to_the_scorer(scorer, monkeypatch)
    assert successes(task, scorer, answers) == expected
    unsettled = {"a generator", "a class equal to every type", "kills its process", "loops a while, then right"}
    assert handed == [ODD_ANSWERS[k] for k in ODD_ANSWERS if k in unsettled]  # every mutant settled in the batch
    odd = dict(zip(ODD_ANSWERS, expected[-len(ODD_ANSWERS) :], strict=True))
    # "loops a while, then right" is over the batch runner's budget: the scorer settled it
    assert {k for k, v in odd.items() if v} == {k for k in ODD_ANSWERS if k.startswith(("right", "loops"))}
    assert True in expected[: -len(ODD_ANSWERS)] and False in expected[: -len(ODD_ANSWERS)]  # survivors and kills


def test_a_reference_the_batch_runner_cannot_match_leaves_every_verdict_to_the_scorer(
    scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A generator's values are not carried by the batch runner: nothing is settled there, the scorer judges all.
    reference = "def evens(n):\n    return (i for i in range(n) if i % 2 == 0)\n"
    task = make_task(reference, ["evens(5)", "evens(8)"], task_id="generator-screen")
    answers = [reference, reference.replace("% 2 == 0", "% 2 == 1"), "def evens(n):\n    return [0, 2, 4]\n"]
    expected = [s.success for s in scorer.score_many([(task, a) for a in answers])]
    handed = left_to_the_scorer(scorer, monkeypatch)
    assert successes(task, scorer, answers) == expected == [True, False, False]
    assert handed == answers


def test_an_answer_the_sandbox_cannot_run_is_an_infrastructure_error_not_a_verdict(scorer: BackendScorer) -> None:
    from colbench.errors import InfraError
    from colbench.sandbox.bwrap import BwrapSandbox

    broken = BwrapSandbox(workers=1, limits=Limits(timeout_s=3.0))
    broken.close()
    with pytest.raises(InfraError):
        successes(tiered(), BackendScorer(broken, limits=Limits(timeout_s=3.0)), [RIGHT])


def test_short_jobs_share_a_process_and_a_lost_one_is_rerun_job_by_job_then_call_by_call(
    scorer: BackendScorer,
) -> None:
    calls = AT_THRESHOLDS[:3]
    killer = "import os\ndef shipping_cost(w, e):\n    if w == 5:\n        os._exit(3)\n    return 0\n"
    jobs = [(TIERED, calls), (killer, calls), (RIGHT, calls)]  # 9 calls: one process
    retried = run_sources(scorer.sandbox, jobs)
    assert [o.kind for o in retried[1]] == ["value", "lost", "value"]
    assert [o.value for o in retried[0]] == [o.value for o in retried[2]] == [8, 22.5, 15]
    alone = run_sources(scorer.sandbox, jobs, retry=False)  # its neighbours rerun alone; the job itself is lost
    assert alone[0] == retried[0] and alone[2] == retried[2] and {o.kind for o in alone[1]} == {"lost"}


def test_the_degenerate_gate_finds_what_tasks_check_finds(
    scorer: BackendScorer, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    weak = [
        make_task("def f(x):\n    return x * 2.5\n", ["isinstance(f(2), float)", "f(2) > 0", "f(3)"], task_id="weak"),
        make_task("def f(x):\n    return None\n", ["f(1)", "f(2) is None"], task_id="none"),
        make_task("def f(xs):\n    return sorted(xs)\n", ["len(f([3, 1])) == 2", "f([]) == []"], task_id="len"),
        make_task("def f(x):\n    return 1 / x\n", ["f(0)", "f(1)", "2 + 2 == 4"], task_id="raises"),
        tiered(),
        # A callback argument: "returns its first argument" returns a function, which the batch settles.
        make_task("def f(g, x):\n    return g(x) + 1\n", ["f(abs, -2)", "f(len, 'ab')", "f(str.upper, 'a')"], "call"),
    ]
    old_rules = BackendScorer(scorer.sandbox, limits=scorer.limits, rules=2)
    found = {}
    for judge in (scorer, old_rules):
        for task in [*bundled_tasks[:12], *weak]:
            rows = [row for row in degenerate.audit_task(judge, task).rows if row[1] in ("hole", "degenerate success")]
            assert degenerate.holes(judge, task) == rows, (judge.rules, task.task_id)
            found[judge.rules, task.task_id] = rows
    assert found[2, "weak"] and found[2, "len"]  # the old rules' holes, found by both
    assert not any(found[3, t.task_id] for t in [*bundled_tasks[:12], *weak])
    fell_back: list[str] = []
    monkeypatch.setattr(degenerate, "audit_task", lambda judge, task: fell_back.append(task.task_id))
    assert degenerate.holes(scorer, weak[-1]) == [] and not fell_back


def test_batched_calls_run_in_the_lean_parent_and_numpy_tasks_still_work(scorer: BackendScorer) -> None:
    # The runner sends a job whose text names one of its FAT_WORDS to the parent that preloaded them (slower forks):
    # a batch's sources and calls are that text, and nothing else of the job names them.
    spec = importlib.util.spec_from_file_location("colbench_runner", REPO / "sandbox" / "runner.py")
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    job = {"code": "", "tests": [[["def f(n):\n    return n\n", ["f(1)"]]]], "calls": {"max_ops": 1}}
    assert not runner._fat(job)
    assert runner._fat({**job, "tests": [[["import numpy\ndef f(n):\n    return n\n", ["f(1)"]]]]})
    source = "import numpy as np\ndef f(n):\n    np.random.seed(1)\n    return np.arange(n) * 2, np.int64(n), np.random.randint(0, 10**6)\n"
    first, again = run_sources(scorer.sandbox, [(source, ["f(3)", "f(0)"])] * 2)
    assert first == again and first[0].value == ([0, 2, 4], 3, first[0].value[2]) and first[1].value[0] == []


def test_classes_are_carried_by_name_and_judged_as_the_scorer_judges_them(
    scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = "def kind(x):\n    return type(x)\n"
    task = make_task(reference, ["kind(1)", "kind('a')", "kind([1])", "kind(None)"], task_id="classes-screen")
    answers = [
        reference,
        "def kind(x):\n    return int\n",
        "def kind(x):\n    return x.__class__\n",
        "def kind(x):\n    return [type(x)][0] if x is not None else type(None)\n",
        # a class whose metaclass says it equals everything: carried by its name, so equal to nothing expected
        "class M(type):\n    __eq__ = lambda c, o: True\n    __hash__ = type.__hash__\n"
        "class C(metaclass=M):\n    pass\ndef kind(x):\n    return C\n",
        "def kind(x):\n    return (type(x), 1)[0]\n",
    ]
    expected = [s.success for s in scorer.score_many([(task, a) for a in answers])]
    handed = left_to_the_scorer(scorer, monkeypatch)
    assert successes(task, scorer, answers) == expected == [True, False, True, True, False, True]
    assert handed == []  # all settled in the batch, where classes once sent the whole task to the scorer


def test_each_call_is_compiled_once_a_process_with_evals_rules(scorer: BackendScorer) -> None:
    source = "def f(x):\n    return x + 1\n"
    calls = ["f(1)", "  f(2)", "f(", "f(1, x=1, x=2)", "f(1)"]
    jobs = [(source, calls), (source.replace("+ 1", "+ 2"), calls)]
    first, second = run_sources(scorer.sandbox, jobs)
    assert [(o.kind, o.value, o.detail) for o in first] == [
        ("value", 2, ""),
        ("value", 3, ""),  # leading blanks dropped, as eval drops them
        ("raised", None, "SyntaxError"),
        ("raised", None, "SyntaxError"),
        ("value", 2, ""),
    ]
    assert [o.value for o in second] == [3, 4, None, None, 3]  # the second job's calls ran its own module


def test_the_reference_runs_beside_its_mutants_with_the_budgets_two_requests_would_give(
    scorer: BackendScorer,
) -> None:
    loops = "def shipping_cost(w, e):\n    while w > 0:\n        pass\n"
    jobs = [(m.code, AT_THRESHOLDS) for m in mutants(TIERED)] + [(loops, AT_THRESHOLDS)]
    many = jobs * (2 * BATCH // (len(jobs) * len(AT_THRESHOLDS)) + 1)  # more than one test expression
    reference = run_calls(scorer.sandbox, TIERED, AT_THRESHOLDS, budget=REFERENCE_BUDGET, pool="reference")
    apart = run_sources(scorer.sandbox, many, budget=mutant_budget(reference))
    both = run_beside(scorer.sandbox, TIERED, AT_THRESHOLDS, many, budget=REFERENCE_BUDGET)
    assert both is not None and both == (reference, apart)
    assert {o.kind for o in apart[len(jobs) - 1]} == {"budget"}  # the loop met the budget the reference's work set
    killer = "import os\ndef shipping_cost(w, e):\n    os._exit(3)\n"
    assert run_beside(scorer.sandbox, TIERED, AT_THRESHOLDS, [(killer, AT_THRESHOLDS)], budget=REFERENCE_BUDGET) is None


def test_the_screen_runs_the_reference_and_the_mutants_in_one_request(
    scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = make_task(TIERED, AT_THRESHOLDS, task_id="tiered-one-request")
    answers = [m.code for m in mutants(TIERED)]
    expected = [s.success for s in scorer.score_many([(task, a) for a in answers])]
    scorer.expected(task)  # the scorer's own runs, before the screen is watched
    requests: list[str] = []
    run_calls, run_tests = scorer.sandbox.run_calls, scorer.sandbox.run_tests

    def counted(batches: Sequence[contract.Batch], **options: Any) -> list[contract.TestOutcome]:
        requests.append(options.get("pool", "answer"))
        return run_calls(batches, **options)

    def scored(*args: Any, **options: Any) -> list[contract.TestOutcome]:
        requests.append("run_tests")
        return run_tests(*args, **options)

    monkeypatch.setattr(scorer.sandbox, "run_calls", counted)
    monkeypatch.setattr(scorer.sandbox, "run_tests", scored)
    assert successes(task, scorer, answers) == expected
    assert requests == ["reference"]
