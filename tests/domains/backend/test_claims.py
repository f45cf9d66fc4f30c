"""The backend claims checker (colbench/domains/backend/claims.py, claim_finder.py): a human's claims about what the
task's function returns, found on the host and settled by running the reference in the real sandbox.

Every form of claim is found and judged; a false value is false with the reference's value beside it; what cannot
be run (the reference raises, times out, differs between runs, the call is not literal) is unchecked, never false;
negations, hedges, questions and properties of a result are no claims; hostile replies return quickly; the CLI
writes every row in order and refuses a malformed file before writing anything; and the labelled bench
(bench/claims_labelled.py) keeps its recall and false-alarm bounds on the bundled sample."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from malformed import one_line_naming
from paths import REPO

from colbench.domains.backend import DOMAIN
from colbench.domains.backend.claim_calls import function_names
from colbench.domains.backend.claim_finder import MAX_CLAIMS, find_claims
from colbench.domains.backend.claims import BackendClaimChecker
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.claim_check import check, check_rows
from colbench.sandbox.contract import Sandbox
from colbench.types.claims import Claim, untrue
from colbench.types.task import Task


def task(ground_truth: str, tests: list[str], task_id: str, description: str = "Write it.") -> Task:
    return Task(
        task_id=task_id,
        domain="backend",
        problem_description=description,
        ground_truth=ground_truth,
        hidden_information=ground_truth,
        test_cases=tuple((f"test{i + 1}", call) for i, call in enumerate(tests)),
    )


TOTAL = task("def total(xs):\n    return sum(xs)\n", ["total([1, 2])"], "total")
PAIR = task("def pair(a, b):\n    return (a + b, a - b)\n", ["pair(5, 3)"], "pair")
RATIO = task("def ratio(a, b):\n    return a / b\n", ["ratio(1, 3)"], "ratio")  # ratio(1, 0) raises
GREET = task("def greet(name):\n    return 'Hello, ' + name\n", ["greet('Ann')"], "greet")
BIG = task("def big(n):\n    return n * 1000\n", ["big(1234)"], "big")
SLOW = task("def slow(n):\n    if n > 5:\n        while True:\n            pass\n    return n\n", ["slow(1)"], "slow")
CLOCK = task("import time\n\ndef clock(n):\n    return time.perf_counter_ns() + n\n", ["clock(1)"], "clock")


@pytest.fixture(scope="module")
def checker(scorer: BackendScorer) -> BackendClaimChecker:
    return BackendClaimChecker(scorer)


def claims_of(checker: BackendClaimChecker, t: Task, reply: str, question: str | None = None) -> tuple[Claim, ...]:
    return check(checker, t, reply, question)


def only(claims: tuple[Claim, ...]) -> Claim:
    assert len(claims) == 1, claims
    return claims[0]


# -- every form, true and false ------------------------------------------------------------------------------------
FORMS = [
    ("arrow", "total([1, 2]) -> {v}", None),
    ("unicode arrow", "total([1, 2]) → {v}", None),
    ("equals", "e.g. total([1, 2]) == {v}", None),
    ("assert", "My test is `assert total([1, 2]) == {v}`.", None),
    ("colon", "Example: total([1, 2]): {v}", None),
    ("should return", "Yeah, so total([1, 2]) should return {v}.", None),
    ("code spans", "`total([1, 2])` should give `{v}`.", None),
    ("i'd expect", "I'd expect total([1, 2]) to be {v}.", None),
    ("i got", "When I ran total([1, 2]) on my laptop I got {v}.", None),
    ("value first", "You should get {v} from total([1, 2]).", None),
    ("is what", "{v} is what total([1, 2]) should return.", None),
    ("doctest", ">>> total([1, 2])\n{v}\n", None),
    ("next line label", "Input: total([1, 2])\nOutput: {v}", None),
    ("comment", "```\nprint(total([1, 2]))  # {v}\n```", None),
    ("q&a sentence", "It should be {v}.", "What should total([1, 2]) return?"),
    ("q&a bare", "{v}", "What should total([1, 2]) return?"),
    ("q&a chatty", "Oh, that's {v}.", "And total([1, 2])?"),
    ("prose for", "for [1, 2] it returns {v}", None),
    ("prose given", "Given [1, 2], you'd get {v}.", None),
    ("prose input is", "If the input is [1, 2], the output should be {v}.", None),
    ("prose value first", "It should return {v} given [1, 2].", None),
    ("next sentence", "Let's say we call total([1, 2]). The result should be {v}.", None),
    ("repeated question", "total([1, 2])? That's {v}.", None),
    ("a verb of no list", "total([1, 2]) spews out {v}.", None),
    ("markdown", "**total([1, 2])** → **{v}**", None),
    ("table", "| call | result |\n|---|---|\n| `total([1, 2])` | `{v}` |", None),
    ("short answer", "I'd go with {v}.", "What does total([1, 2]) evaluate to?"),
    ("in / out", "[1, 2] in, {v} out.", None),
]


@pytest.mark.parametrize(("form", "reply", "question"), FORMS, ids=[f[0] for f in FORMS])
def test_each_form_is_found_and_judged(
    checker: BackendClaimChecker, form: str, reply: str, question: str | None
) -> None:
    right = only(claims_of(checker, TOTAL, reply.format(v=3), question))
    assert (right.call, right.stated, right.verdict, right.actual) == ("total([1, 2])", "3", "true", "3")
    wrong = only(claims_of(checker, TOTAL, reply.format(v=4), question))
    assert (wrong.call, wrong.stated, wrong.verdict, wrong.actual) == ("total([1, 2])", "4", "false", "3")
    assert wrong.why == "the reference gives another value"
    said = reply.format(v=4)[wrong.span[0] : wrong.span[1]]
    assert "4" in said and ("total([1, 2])" in said or "[1, 2]" in said or question is not None)


def test_an_empty_list_in_prose_is_the_call_with_an_empty_list(checker: BackendClaimChecker) -> None:
    for reply in ("an empty list gives 0", "An empty list should give 0.", "If the list is empty, it should return 0."):
        assert (only(claims_of(checker, TOTAL, reply)).call, only(claims_of(checker, TOTAL, reply)).verdict) == (
            "total([])",
            "true",
        )
    claim = only(claims_of(checker, TOTAL, "For an empty list it returns 1."))
    assert (claim.call, claim.verdict, claim.actual) == ("total([])", "false", "0")


def test_prose_claims_only_for_a_function_of_one_parameter(checker: BackendClaimChecker) -> None:
    assert function_names(TOTAL.ground_truth, ("total([1, 2])",), "")[1] == 1
    assert function_names(PAIR.ground_truth, ("pair(5, 3)",), "")[1] is None
    assert claims_of(checker, PAIR, "for 5 it returns 8") == ()


@pytest.mark.parametrize(
    ("question", "reply", "verdict"),
    [
        ("Should total([1, 2]) return 3?", "Yes.", "true"),
        ("So total([1, 2]) gives 3, right?", "Yep, that's it.", "true"),
        ("Can you confirm that total([1, 2]) returns 4?", "Confirmed.", "false"),
        ("Does total([1, 2]) give 4?", "No.", "true"),  # "not 4": true
        ("Is total([1, 2]) supposed to be 3?", "No, it isn't.", "false"),  # "not 3": false
        ("Should total([1, 2]) return 4 or something else?", "Exactly that.", "false"),
        ("Does total([1, 2]) produce 3?", "It does.", "true"),
        ("Correct me if I'm wrong, but total([1, 2]) returns 4?", "You're wrong, it doesn't.", "true"),
    ],
)
def test_yes_or_no_to_a_question_that_states_a_value(
    checker: BackendClaimChecker, question: str, reply: str, verdict: str
) -> None:
    claim = only(claims_of(checker, TOTAL, reply, question))
    assert (claim.call, claim.verdict, claim.actual) == ("total([1, 2])", verdict, "3")


@pytest.mark.parametrize(
    "reply",
    [
        "No idea, honestly.",
        "Not sure, I'd have to check.",
        "Right now I can't check.",
        "Sure, let me look it up later.",
    ],
)
def test_an_unsure_reply_to_a_yes_no_question_is_no_claim(checker: BackendClaimChecker, reply: str) -> None:
    for stated in ("3", "4"):
        assert claims_of(checker, TOTAL, reply, f"Does total([1, 2]) give {stated}?") == ()


def test_values_written_as_people_write_them_are_true(checker: BackendClaimChecker) -> None:
    rounded = only(claims_of(checker, RATIO, "ratio(1, 3) should return 0.33"))
    assert rounded.verdict == "true" and rounded.actual == "0.3333333333333333"
    assert only(claims_of(checker, RATIO, "ratio(1, 3) should return 0.3")).verdict == "true"
    assert only(claims_of(checker, RATIO, "ratio(1, 3) should return 0.34")).verdict == "false"
    assert only(claims_of(checker, RATIO, "ratio(1, 3) should return about 0.33")).verdict == "true"
    as_list = only(claims_of(checker, PAIR, "pair(5, 3) returns [8, 2]"))
    assert as_list.verdict == "true" and as_list.actual == "(8, 2)"
    assert only(claims_of(checker, PAIR, "pair(5, 3) returns (8, 2)")).verdict == "true"
    assert only(claims_of(checker, PAIR, "pair(5, 3) returns [8, 3]")).verdict == "false"
    thousands = only(claims_of(checker, BIG, "big(1234) gives 1,234,000"))
    assert (thousands.stated, thousands.verdict) == ("1234000", "true")
    assert only(claims_of(checker, BIG, "`big(1234)` gives `1,234,000`")).verdict == "true"
    assert only(claims_of(checker, GREET, 'greet("Ann") returns "Hello, Ann"')).verdict == "true"
    assert only(claims_of(checker, GREET, "greet('Ann') returns “Hello, Ann”")).verdict == "true"
    assert only(claims_of(checker, GREET, "greet('Ann') returns 'Hello Ann'")).verdict == "false"
    assert only(claims_of(checker, PAIR, "pair(5, 3) returns [8, 2], as JSON: fine")).verdict == "true"
    assert only(claims_of(checker, TOTAL, "total([]) returns zero.")).verdict == "true"


def test_several_claims_in_one_reply_each_judged(checker: BackendClaimChecker) -> None:
    claims = claims_of(checker, TOTAL, "total([1, 2]) gives 3, and `total([5])` returns 6. total([]) -> 0")
    assert [(c.call, c.verdict) for c in claims] == [
        ("total([1, 2])", "true"),
        ("total([5])", "false"),
        ("total([])", "true"),
    ]
    assert untrue(claims)
    paired = claims_of(checker, TOTAL, "total([1]) and total([2, 2]) should return 1 and 5 respectively.")
    assert [(c.call, c.stated, c.verdict) for c in paired] == [
        ("total([1])", "1", "true"),
        ("total([2, 2])", "5", "false"),
    ]


# -- what cannot be run is unchecked, never false ----------------------------------------------------------------
def test_a_call_the_reference_raises_on_is_unchecked(checker: BackendClaimChecker) -> None:
    claim = only(claims_of(checker, RATIO, "ratio(1, 0) should return 0"))
    assert claim.verdict == "unchecked" and claim.actual is None and "ZeroDivisionError" in claim.why


def test_a_call_the_reference_times_out_on_is_unchecked(checker: BackendClaimChecker) -> None:
    claim = only(claims_of(checker, SLOW, "slow(9) should return 9"))
    assert claim.verdict == "unchecked" and "timeout" in claim.why.lower()


def test_a_nondeterministic_call_is_unchecked(checker: BackendClaimChecker) -> None:
    claim = only(claims_of(checker, CLOCK, "clock(1) should return 5"))
    assert claim.verdict == "unchecked" and "nondeterministic" in claim.why


@pytest.mark.parametrize("reply", ["total(x) should return 3", "total(xs + [1]) -> 4", "total(*args) == 7"])
def test_a_call_that_is_not_literal_is_unchecked(checker: BackendClaimChecker, reply: str) -> None:
    claim = only(claims_of(checker, TOTAL, reply))
    assert claim.verdict == "unchecked" and claim.why == "the call's arguments are not literal values"


# -- no claim -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply",
    [
        "total([1, 2]) should not return 5.",
        "total([1, 2]) shouldn't be 5, that was the old bug.",
        "I doubt total([1, 2]) returns 5.",
        "Please don't hardcode total([1, 2]) = 5.",
        "total([1, 2]) returns 5 or 6, I can't remember.",
        "total([1, 2]) gives something between 5 and 10.",
        "total([1, 2]) returns 5 items.",
        "Maybe total([1, 2]) returns 5, but I'm really not sure.",
        "Does total([1, 2]) return 5?",
        "So total([1, 2]) gives 5, right?",
        "Why does total([1, 2]) return 5 and not something else?",
        "If total([1, 2]) returns 5, then the formula is off.",
        "The first item of total([1, 2]) should be 5.",
        "The length of total([1, 2]) is 5.",
        "`len(total([1, 2]))` should be 5.",
        "Twice total([1, 2]) is 5.",
        "1 + total([1, 2]) is 5",
        "When I ran total([1, 2]) on my laptop it took 5 seconds.",
        "I ran total([1, 2]) and got an error.",
        "total([1, 2]) is called 5 times a day.",
        "Please keep the name total, my 5 other scripts call it.",
        "Version 2.1.3 of my script did it in 5 steps, back in 2019.",
        "def total(xs) is the signature; xs has 5 items.",
        "total([1, 2]) should return 5... no wait, I'm not sure.",
        "In the old version total([1, 2]) returned 5, but that was a bug.",
        "total([1, 2]) and total([3]) return 5 and 6 respectively, I think, no wait, I doubt it.",
        "total([1, 2]) takes 5.",
    ],
)
def test_negations_hedges_questions_and_properties_are_no_claims(checker: BackendClaimChecker, reply: str) -> None:
    assert checker.find(TOTAL, reply) == []


@pytest.mark.parametrize(
    "reply",
    [
        "1) it should handle empty input\n2) it should be fast",
        "2 things matter to me: speed and clarity.",
        "Nothing special, just add them up.",
        "It should be fast, that's all I care about.",
        "Not sure, maybe 5?",
        "I don't know exactly, maybe check the description?",
        "5 is the number of items, not the result.",
        "See line 5.",
    ],
)
def test_an_answer_that_states_no_value_is_no_claim(checker: BackendClaimChecker, reply: str) -> None:
    assert checker.find(TOTAL, reply, "What should total([1, 2]) return?") == []


def test_a_reply_without_claims_runs_nothing(scorer: BackendScorer) -> None:
    class Refusing(BackendScorer):
        def reference_values(self, task: Task, calls: Any) -> Any:
            raise AssertionError("a reply without claims must not reach the sandbox")

    quiet = BackendClaimChecker(Refusing(scorer.sandbox))
    assert check(quiet, TOTAL, "Thanks! I run this 5 times a day.") == ()
    assert check_rows(
        quiet, [(TOTAL, "Keep the name total.", None), (TOTAL, "No idea.", "Does total([1]) give 1?")]
    ) == [
        (),
        (),
    ]


# -- hostile replies are bounded -------------------------------------------------------------------------------------
HOSTILE = {
    "5 MB of text": "total([1, 2]) -> 3 " + "lorem ipsum 12 " * 350_000,
    "brackets 10,000 deep": "total(" + "[" * 10_000 + "1" + "]" * 10_000 + ") -> 1",
    "a value 10,000 deep": "total([1, 2]) -> " + "[" * 10_000 + "]" * 10_000,
    "code that is not a call": "def total(xs):\n    return sum(xs)\n" * 2_000,
    "a call with 10,000 arguments": "total(" + ", ".join(["1"] * 10_000) + ") == 10000",
    "unbalanced quotes": "total(['" + "a', 'b" * 3_000 + ") == 3 and " + "for '" * 4_000,
    "many calls": "total([1]) -> 1, " * 5_000,
    "many prose arguments": "for [1, 2] it returns " * 3_000,
    "nested calls": "total(" * 5_000 + ")" * 5_000 + " == 0",
    "many quotes": "'" * 20_000,
    "many backticks": "`total([1])` is `" * 3_000,
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_reply_returns_quickly_without_exceptions(checker: BackendClaimChecker, name: str) -> None:
    reply = HOSTILE[name]
    started = time.perf_counter()
    found = checker.find(TOTAL, reply, reply)
    claims = checker.settle(TOTAL, [found])[0]
    elapsed = time.perf_counter() - started
    assert len(found) <= MAX_CLAIMS and len(claims) == len(found)
    assert all(c.verdict in ("true", "false", "unchecked") for c in claims)
    assert elapsed < 5.0, f"{name}: {elapsed:.2f} s"


def test_hostile_finding_alone_stays_well_under_a_second() -> None:
    names, single = function_names(TOTAL.ground_truth, ("total([1, 2])",), "")
    for name, reply in HOSTILE.items():
        started = time.perf_counter()
        find_claims(reply, names, single, reply)
        assert time.perf_counter() - started < 1.0, name


# -- the CLI ---------------------------------------------------------------------------------------------------------
def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_claims_check_writes_every_row_in_order(tmp_path: Path, scorer: BackendScorer) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_row()) + "\n" for t in (TOTAL, RATIO, GREET)))
    rows = [
        {"task_id": "total", "reply": "total([1, 2]) should return 3."},
        {"task_id": "ratio", "reply": "ratio(1, 0) gives 0"},
        {"task_id": "greet", "reply": "Thanks, that's all I need.", "extra": [1]},
        {"task_id": "total", "reply": "It should be 4.", "question": "What does total([2, 2]) return?"},
        {"task_id": "greet", "reply": "greet('Bo') -> 'Hi, Bo'"},
    ]
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out" / "checked.jsonl"
    done = colbench(
        "claims", "check", "--tasks", str(tasks), "--replies", str(replies), "--out", str(out), "--sandbox", "bwrap"
    )
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [{k: v for k, v in w.items() if k not in ("claims", "untrue")} for w in written] == rows
    assert [w["untrue"] for w in written] == [False, False, False, False, True]
    assert [[c["verdict"] for c in w["claims"]] for w in written] == [["true"], ["unchecked"], [], ["true"], ["false"]]
    assert written[4]["claims"][0]["actual"] == "'Hello, Bo'" and written[4]["claims"][0]["call"] == "greet('Bo')"
    assert written[3]["claims"][0]["call"] == "total([2, 2])"
    assert "checked 5 replies" in done.stdout and str(out) in done.stdout


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("not json at all", "invalid JSON"),
        ('{"task_id": "total"}', "field 'reply'"),
        ('{"task_id": "nope", "reply": "x"}', "is not in the task file"),
        ('{"task_id": "total", "reply": "x", "question": 3}', "field 'question'"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_a_malformed_row_exits_2_naming_the_line_before_writing(tmp_path: Path, bad: str, says: str) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TOTAL.to_row()) + "\n")
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"task_id": "total", "reply": "total([1, 2]) -> 3"}) + "\n" + bad + "\n")
    out = tmp_path / "out.jsonl"
    done = colbench("claims", "check", "--tasks", str(tasks), "--replies", str(replies), "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    one_line_naming(done.stderr.strip(), f"{replies}:2", says)
    assert not out.exists()


# -- the real sample and the Docker runtime ------------------------------------------------------------------------
def test_claims_about_the_bundled_samples_test_calls_are_true(scorer: BackendScorer, bundled_tasks: list[Task]) -> None:
    """The reference's own values, stated back, are true: whatever the value type the bundled tasks return."""
    checker = BackendClaimChecker(scorer)
    rows = []
    for t in bundled_tasks:
        call = t.test_cases[0][1]
        (expected,) = scorer.reference_values(t, [call])
        if expected.judgeable:
            rows.append((t, f"{call} should return {expected.value!r}.", None))
    results = check_rows(checker, rows)
    assert len(rows) >= 15
    assert sum(any(c.verdict == "true" for c in claims) for claims in results) >= len(rows) - 2
    assert not any(untrue(claims) for claims in results)


@pytest.mark.docker
def test_claims_settle_the_same_in_docker(docker_sandbox: Sandbox) -> None:
    checker = DOMAIN.claim_checker(BackendScorer(docker_sandbox))
    claims = check_rows(
        checker,
        [(TOTAL, "total([1, 2]) -> 3", None), (TOTAL, "total([1, 2]) -> 4", None), (RATIO, "ratio(1, 0) -> 0", None)],
    )
    assert [[c.verdict for c in group] for group in claims] == [["true"], ["false"], ["unchecked"]]


# -- the bench keeps working ----------------------------------------------------------------------------------------
def bench_module(name: str) -> ModuleType:
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_labelled_bench_on_the_bundled_sample(scorer: BackendScorer, bundled_tasks: list[Task]) -> None:
    labelled = bench_module("claims_labelled")
    bench = bench_module("claims_checker")
    rows = labelled.labelled_claims(bundled_tasks, scorer, seed=0)
    assert {item.label for _, item in rows} == {"true", "false", "none"}
    assert len({item.kind for _, item in rows if item.label != "none"}) >= 12
    results = check_rows(BackendClaimChecker(scorer), [(t, i.reply, i.question) for t, i in rows])
    got = bench.figures(rows, results)
    assert got["false"] >= 100 and got["true"] >= 100 and got["none"] >= 100
    assert got["recall"] >= 0.85, got
    assert got["false_alarms_true"] <= 0.03 and got["false_alarms_none"] <= 0.03, got
