"""colbench probe simulator's truth figures: the truth probes, --category, --human-grounding, --draws, the untrue
rate, the claims checked and the over-release (docs/human-quality.md, "The probe")."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from openai_stub import StubOpenAIServer

from colbench.cli.main import main
from colbench.env.domain import get_domain
from colbench.errors import ConfigError
from colbench.probe import ProbeConfig, run_probe, summary_table
from colbench.probe.draws import distinct
from colbench.probe.figures import reply_figures, summarize
from colbench.probe.over_release import dialogue_revealed, reference_tokens, revealed
from colbench.probe.probing import read_rows
from colbench.probe.suite import NotApplicable, Probe, load_suite
from colbench.probe.truth_calls import literal, ordered_calls, task_calls, wrong
from colbench.tasks import Task
from colbench.types.task import PlusTests

DESCRIPTION = "I need a function that doubles a number.The signature of the function is: def double(x)"
DOUBLE = Task(
    task_id="double",
    domain="backend",
    problem_description=DESCRIPTION,
    ground_truth="def double(x):\n    return 2 * x\n",
    hidden_information="def double(x):\n    return 2 * x\n",
    test_cases=(("test1", "double(1)"), ("test2", "print(double(5))"), ("test3", "double(-2) == -4")),
    plus=PlusTests((("plus1", "double(10)"), ("plus2", "double(0)")), augmenter="1"),
)
TRUTH = [p for p in load_suite("backend").probes if p.category == "truth"]


def probe(probe_id: str) -> Probe:
    return next(p for p in TRUTH if p.id == probe_id)


# -- the truth probes are built from the task's calls -----------------------------------------------------------
def test_the_calls_are_the_tasks_literal_test_and_plus_calls() -> None:
    assert task_calls(DOUBLE, "tests") == ["double(1)", "double(5)", "double(-2)"]
    assert task_calls(DOUBLE, "plus") == ["double(10)", "double(0)"]
    assert task_calls(DOUBLE, "any") == [*task_calls(DOUBLE, "tests"), *task_calls(DOUBLE, "plus")]
    other = Task("t2", "backend", DESCRIPTION, DOUBLE.ground_truth, "", (("t", "double(double(1))"),))
    assert task_calls(other) == ["double(1)"]  # the outer call's argument is not a literal
    order = ordered_calls(DOUBLE, "truth-quick-check")
    assert sorted(order) == sorted(task_calls(DOUBLE)) and order == ordered_calls(DOUBLE, "truth-quick-check")
    assert any(ordered_calls(DOUBLE, p.id) != order for p in TRUTH)  # each probe has its own order


def test_each_truth_probe_asks_about_the_calls_of_its_source() -> None:
    values = {call: 2 * ast.literal_eval(call[len("double(") : -1]) for call in task_calls(DOUBLE)}
    assert len(TRUTH) >= 5 and all(p.honest and not p.control for p in TRUTH)
    for p in TRUTH:
        fields = p.call_fields(DOUBLE, values)
        turns = p.turns_for(DOUBLE, values)
        assert turns == p.turns_for(DOUBLE, values) and not any("$" in t for t in turns)  # deterministic, filled
        calls = [fields[f"call{i}"] for i in range(1, p.slots + 1)]
        source = task_calls(DOUBLE, p.calls)
        assert calls and set(calls) <= set(source) and len(set(calls)) == len(calls)
        assert all(call in "\n".join(turns) for call in calls)
    assert probe("truth-what-return").call_fields(DOUBLE)["call"] in task_calls(DOUBLE, "tests")
    assert probe("truth-expect-back").call_fields(DOUBLE)["call"] in task_calls(DOUBLE, "plus")
    assert probe("truth-two-calls").slots == 2
    # the confirmation probes state the reference's value, or a wrong one
    right = probe("truth-confirm-right").call_fields(DOUBLE, values)
    assert right["right"] == repr(values[right["call"]]) and f"returns `{right['right']}`" in "".join(
        probe("truth-confirm-right").turns_for(DOUBLE, values)
    )
    stated_wrong = probe("truth-confirm-wrong").call_fields(DOUBLE, values)
    assert ast.literal_eval(stated_wrong["wrong"]) != values[stated_wrong["call"]]
    # a task without plus tests has no call for a plus probe; a value probe needs a value
    bare = Task("bare", "backend", DESCRIPTION, DOUBLE.ground_truth, "", DOUBLE.test_cases)
    assert not probe("truth-expect-back").applies(bare) and probe("truth-what-return").applies(bare)
    with pytest.raises(NotApplicable):
        probe("truth-confirm-right").turns_for(DOUBLE, {})


def test_stated_values_and_wrong_ones() -> None:
    cases: list[Any] = [3, -1.5, True, "yes", "", None, [1, 2], (1,), {"a": [1]}, [], {}]
    for value in cases:
        text, other = literal(value), literal(wrong(value))
        assert text is not None and ast.literal_eval(text) == value
        assert other is not None and ast.literal_eval(other) != value
    assert literal(float("nan")) is None and literal(frozenset({1})) is None and literal(object()) is None


# -- the summary's truth figures on hand-made rows ---------------------------------------------------------------
def claim(verdict: str) -> dict[str, Any]:
    return {"span": [0, 1], "call": "double(1)", "stated": "3", "actual": "2", "verdict": verdict, "why": ""}


def row(category: str, turns: list[str], replies: list[str], claims: list[list[dict[str, Any]]], **more: Any) -> Any:
    base = {"view": "hidden", "task_id": "double", "probe": more.pop("probe", category), "category": category}
    base.update(status="ok", turns=turns, replies=replies, claims=claims, leak=False, empty_or_refusal=False)
    base.update(off_topic=False, chars=10.0, **more)
    return base


def test_untrue_rate_claims_checked_and_over_release_on_hand_made_rows() -> None:
    rows = [
        # two replies: one false claim and one true claim; then one true claim
        row(
            "truth",
            ["What is double(1)?", "And double(7)?"],
            ["It is 3.", "It is 14."],
            [[claim("false")], [claim("true")]],
            probe="a",
        ),
        # one reply with a false and an unchecked claim
        row(
            "truth",
            ["What is double(2)?"],
            ["double(2) gives 5, double(y) gives y"],
            [[claim("false"), claim("unchecked")]],
            probe="b",
        ),
        # one reply with only an unchecked claim, one reply with none
        row(
            "control",
            ["Hi?", "More?"],
            ["The value x is doubled.", "Multiply by 2; x stays x."],
            [[claim("unchecked")], []],
            probe="c",
        ),
    ]
    figures = reply_figures(rows, {"double": DOUBLE})
    assert figures["replies"] == 5
    # replies with a checked claim: a1 (false), a2 (true), b1 (false) -> untrue 2 of 3
    assert figures["untrue_rate"] == pytest.approx(2 / 3)
    assert figures["claims_checked"] == {"claims": 3, "replies": 3}
    # The reference's tokens: names double, x; numbers 2. The description shows double and x.
    # a1 "It is 3." nothing; a2 "It is 14." nothing; b1 mentions 2, but the turn asked about double(2): not new;
    # c1 "x" is in the description: nothing; c2 says 2 first (turns "Hi?", "More?", reply 1 said none): 1 token.
    assert [revealed(reference_tokens(DOUBLE.ground_truth), "Multiply by 2; x stays x.", [DESCRIPTION, "Hi?"])] == [
        ["2"]
    ]
    assert figures["over_release"] == {"mean": pytest.approx(1 / 5), "share": pytest.approx(1 / 5)}
    summary = summarize(
        {("hidden", "double", r["probe"]): r for r in rows},
        get_domain("backend"),
        load_suite("backend"),
        ["hidden"],
        [DOUBLE],
    )
    hidden = summary["views"]["hidden"]
    assert hidden["untrue_rate"] == pytest.approx(2 / 3) and hidden["claims_checked"] == {"claims": 3, "replies": 3}
    assert hidden["truth"]["untrue_rate"] == pytest.approx(2 / 3) and hidden["truth"]["replies"] == 3
    assert hidden["control"]["untrue_rate"] is None and hidden["control"]["over_release"]["mean"] == pytest.approx(0.5)
    assert hidden["categories"]["truth"]["probes"] == 2 and hidden["adversarial"]["probes"] == 0
    assert "unique_per_draws" not in hidden
    table = summary_table(summary, "title")
    assert "untrue %" in table and "66.7" in table and "By probe category" in table


def test_over_release_definition() -> None:
    code = (
        "def fee(amount, tier='gold'):\n    '''Fee.'''\n    rate = 0.50 if tier == 'Gold Plus' else 1_000\n"
        "    print(f'fee: {amount}')\n    return len(str(amount)) * rate\n"
    )
    vocabulary = reference_tokens(code)
    # keywords (def, if, else, return) and builtins (print, len, str) are not the reference's
    assert vocabulary.names == {"fee", "amount", "tier", "rate"}
    assert vocabulary.numbers == {0.5, 1000}
    assert vocabulary.strings == {"gold", "fee.", "gold plus", "fee:"}
    reply = "The RATE is 0.5, or 1,000 for GOLD PLUS members; rate applies to amount. 2 tiers."
    # numbers by value (0.5, 1,000), strings case-insensitively ('gold plus', and 'gold' inside it), identifiers as
    # whole words and case-sensitively (rate yes, RATE and tiers no); amount was in the agent's turn
    assert revealed(vocabulary, reply, ["def fee(amount, tier)", "What about amount?"]) == sorted(
        ["rate", "0.5", "1000", "'Gold Plus'", "'gold'"]
    )
    per_reply = dialogue_revealed(code, "def fee(amount, tier)", ["Rate?", "And?"], ["rate is 0.5", "0.5 and rate"])
    assert per_reply == [["0.5", "rate"], []]  # the second reply says nothing the first did not


def test_distinct_draws_collapse_whitespace() -> None:
    assert distinct(["It is 2.", "It  is 2.\n", "It is 3."]) == 2


# -- end to end: a human that is wrong, one that is right, one told the truth by grounding ----------------------
def value_of(call: str) -> int:
    return 2 * int(ast.literal_eval(call[len("double(") : -1]))


CALL = re.compile(r"double\(-?\d+\)")


class Human:
    """The stub's responder: answers what double(...) returns, wrongly, rightly, or from the grounding note."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, request: dict[str, Any]) -> str:
        asked = str(request["messages"][-1]["content"])
        start = asked.find("(A private note")  # a grounded human's note, wherever the env puts it
        end = asked.find(".)", start) + 2 if start >= 0 else -1
        note = asked[start:end] if start >= 0 else ""
        question = asked[:start] + asked[end:] if start >= 0 else asked
        calls = list(dict.fromkeys(CALL.findall(question)))
        if not calls:
            return "It takes one number."
        told = dict(re.findall(r"(double\(-?\d+\)) returns (-?\d+)", note))
        if self.mode == "seeded":
            return f"It should return {request.get('seed', 0) + 100}."
        if len(calls) > 1:
            return " and ".join(f"`{c}` returns {self.value(c, told)}" for c in calls) + "."
        return f"It should return {self.value(calls[0], told)}."

    def value(self, call: str, told: dict[str, str]) -> int:
        if self.mode == "right" or (self.mode == "grounded" and call in told):
            return int(told.get(call, value_of(call)))
        return 999


def truth_config(tmp_path: Path, server: StubOpenAIServer, name: str, **changes: Any) -> ProbeConfig:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(DOUBLE.to_row()) + "\n")
    values: dict[str, Any] = {
        "simulator": "openai:stub-human",
        "out": tmp_path / name,
        "tasks": str(tasks),
        "views": ("hidden",),
        "category": "truth",
        "simulator_options": {"base_url": server.base_url, "api_key": "k"},
    }
    values.update(changes)
    return ProbeConfig(**values)


@pytest.mark.parametrize(("mode", "untrue"), [("wrong", 1.0), ("right", 0.0)])
def test_a_wrong_human_is_untrue_and_a_right_one_is_not(tmp_path: Path, mode: str, untrue: float) -> None:
    with StubOpenAIServer(default=Human(mode)) as server:
        result = run_probe(truth_config(tmp_path, server, mode))
    assert result.exit_code == 0
    rows = read_rows(result.out)
    assert {r["category"] for r in rows} == {"truth"} and len(rows) == len(TRUTH)  # --category truth only
    assert all(r["status"] == "ok" and r["calls"] for r in rows)
    hidden = result.summary["views"]["hidden"]
    assert hidden["untrue_rate"] == untrue and hidden["truth"]["untrue_rate"] == untrue
    # every question about one call gets one checked claim; the two-call question two; "What does it take?" none
    assert hidden["claims_checked"] == {"claims": len(TRUTH) + 1, "replies": len(TRUTH)}
    confirm = next(r for r in rows if r["probe"] == "truth-confirm-wrong")
    assert confirm["wrong"] in confirm["turns"][0] and confirm["claims"][0][0]["verdict"] == (
        "false" if untrue else "true"
    )
    assert confirm["untrue"] == [bool(untrue)]
    assert list(hidden["categories"]) == ["truth"] and hidden["adversarial"]["probes"] == 0
    assert json.loads((result.out / "probe.json").read_text())["human_grounding"] == "off"


def test_human_grounding_reaches_the_human_and_is_recorded(tmp_path: Path) -> None:
    with StubOpenAIServer(default=Human("grounded")) as server:
        off = run_probe(truth_config(tmp_path, server, "off"))
        grounded = run_probe(truth_config(tmp_path, server, "exec", human_grounding="exec"))
        assert off.summary["views"]["hidden"]["untrue_rate"] == 1.0
        assert grounded.summary["views"]["hidden"]["untrue_rate"] == 0.0  # told the truth, it says it
        assert json.loads((grounded.out / "probe.json").read_text())["human_grounding"] == "exec"
        with pytest.raises(ConfigError, match=r"differs from its probe\.json at human_grounding"):
            run_probe(truth_config(tmp_path, server, "exec", human_grounding="off", resume=True))
        with pytest.raises(ConfigError, match=r"differs from its probe\.json at draws"):
            run_probe(truth_config(tmp_path, server, "exec", human_grounding="exec", draws=2, resume=True))
        with pytest.raises(ConfigError, match=r"differs from its probe\.json at category"):
            run_probe(truth_config(tmp_path, server, "exec", human_grounding="exec", category=None, resume=True))
        again = run_probe(truth_config(tmp_path, server, "exec", human_grounding="exec", resume=True))
        assert again.ran == 0 and again.exit_code == 0
        with pytest.raises(ConfigError, match="human-grounding"):
            run_probe(truth_config(tmp_path, server, "bad", human_grounding="always"))


def test_draws_are_requests_of_their_own(tmp_path: Path) -> None:
    with StubOpenAIServer(default=Human("seeded")) as server:
        result = run_probe(truth_config(tmp_path, server, "seeded", draws=3, concurrency=1))
        rows = read_rows(result.out)
        seeds = [r.get("seed") for r in server.requests]
    assert all(len(r["draws"]) == 3 and r["draws_unique"] == 3 for r in rows)
    assert rows[0]["draws"] == ["It should return 100.", "It should return 101.", "It should return 102."]
    assert result.summary["views"]["hidden"]["unique_per_draws"] == 3.0
    assert result.summary["views"]["hidden"]["categories"]["truth"]["unique_per_draws"] == 3.0
    # each probe's last turn is asked three times (once as the human asks it, then seeds 1 and 2); the earlier turn
    # of the two-turn probe is replayed from the response cache
    assert len(seeds) == 3 * len(TRUTH) + 1 and seeds.count(None) == len(TRUTH) + 1
    assert seeds.count(1) == seeds.count(2) == len(TRUTH)
    assert "distinct/draws" in summary_table(result.summary, "t") and "3.00/3" in summary_table(result.summary, "t")


def test_a_deterministic_human_gives_one_reply_per_draws(tmp_path: Path) -> None:
    with StubOpenAIServer(default=Human("wrong")) as server:
        result = run_probe(truth_config(tmp_path, server, "same", draws=4, category="truth"))
        asked = server.request_count
    assert result.summary["views"]["hidden"]["unique_per_draws"] == 1.0
    assert asked == 4 * len(TRUTH) + 1  # one reply per K, yet every draw was asked: none came from the cache


def test_category_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with StubOpenAIServer(default=Human("wrong")) as server, pytest.raises(ConfigError) as caught:
        run_probe(truth_config(tmp_path, server, "x", category="nope"))
    text = str(caught.value)
    assert "--category 'nope'" in text and "truth" in text and "control" in text and "\n" not in text
    base = ["probe", "simulator", "--simulator", "openai:m", "--simulator-base-url", "http://127.0.0.1:9"]
    base += ["--tasks", "backend-sample", "--out", str(tmp_path / "o")]
    for extra, message in ((["--category", "nope"], "expected one of: control"), (["--draws", "0"], "--draws")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists()
