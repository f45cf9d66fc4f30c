"""A record's dialogue read once as typed turns (``EpisodeRecord.dialogue_turns``): lenient with what older or
hand-written runs hold, strict only about whose turn it is, and never changing what a record writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from colbench.env.domain import get_domain
from colbench.errors import DataError
from colbench.runs import EpisodeRecord, parse_record
from colbench.runs.turns import Draw, Told
from colbench.types.claims import Claim

METRICS = get_domain("backend").metrics
FALSE = {"span": [0, 4], "call": "f(1)", "stated": "2", "actual": "3", "verdict": "false", "why": "runs"}


def record(*dialogue: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": "t1", "trial": 0, "status": "ok", "reward": 0.0, "success": False, "dialogue": list(dialogue)}


MALFORMED = record(
    {"role": "agent", "text": 42, "screenshot": ["not", "a", "path"]},
    {
        "role": "human",
        "text": "f(1) is 2, surely",
        "leak_score": "0.9",  # a string: not a score
        "leak": 1,  # not true
        "leak_action": None,
        "withheld": ["kept", 7, None],
        "leak_spans": [[0, 4], [1], "x", [5, 3], [True, 2], [-1, 2], [2, 9]],
        "claims": [FALSE, "not a claim", {"verdict": "maybe"}, {**FALSE, "span": [1, 2, 3], "verdict": "true"}],
        "truth_action": 3,
        "truth_draws": [{"reply": "first", "claims": [FALSE]}, "lost", {"reply": None, "claims": "none"}],
        "truth_shown": 1,  # the draw that is not an object
        "grounding": [{"call": "f(1)", "result": 3}, {"result": "no call"}, "text"],
    },
)


def test_a_malformed_old_style_record_is_read_with_the_bad_parts_dropped() -> None:
    agent, human = parse_record(MALFORMED, "episodes.jsonl:1", METRICS).dialogue_turns
    assert (agent.role, agent.text, agent.screenshot) == ("agent", "42", None)
    assert not agent.checked and agent.claims is None
    assert human.leak_score is None and human.leak is False and human.leak_action is None
    assert human.withheld == ("kept",)
    assert human.leak_spans == ((0, 4), (2, 9))  # out of the text's range is for whoever cuts it to decide
    false = Claim((0, 4), "f(1)", "2", "3", "false", "runs")
    assert human.claims == (false, Claim((0, 0), "f(1)", "2", "3", "true", "runs"))  # a bad span: kept, unplaced
    assert human.checked and human.untrue and human.truth_action is None
    assert human.truth_draws == (Draw(number=1, reply="first", claims=(false,)), Draw(number=3, reply="", claims=()))
    assert human.truth_shown is None  # it named the draw that was dropped
    assert human.grounding == (Told(call="f(1)", result="3"),)


def test_a_record_without_claims_was_not_checked_and_untrue_falls_back_to_the_first_draw() -> None:
    old = record({"role": "agent", "text": "q?"}, {"role": "human", "text": "a", "leak_score": 0.1, "leak": False})
    (_, reply) = parse_record(old, "x:1", METRICS).dialogue_turns
    assert not reply.checked and not reply.untrue and reply.leak_spans is None and reply.leak_score == 0.1
    shown = {"role": "human", "text": "ok", "claims": [], "truth_draws": [{"reply": "no", "claims": [FALSE]}, {}]}
    (turn,) = parse_record(record(shown), "x:2", METRICS).dialogue_turns
    assert turn.checked and turn.untrue  # no ``untrue`` key: the first draw's claims decide
    (turn,) = parse_record(record({**shown, "untrue": False}), "x:3", METRICS).dialogue_turns
    assert not turn.untrue  # the record's own flag wins


def test_a_turn_of_no_one_is_a_one_line_error_naming_the_record() -> None:
    read = parse_record(record({"role": "agent", "text": "hi"}, {"role": "robot", "text": "x"}), "e.jsonl:7", METRICS)
    with pytest.raises(DataError, match=r"^e\.jsonl:7: field 'dialogue\.1\.role': 'robot' \(input should be"):
        read.dialogue_turns  # noqa: B018 (read on first use)


def test_reading_the_turns_never_changes_what_a_record_writes() -> None:
    line = EpisodeRecord.model_validate(MALFORMED).line()
    read = parse_record(json.loads(line), "episodes.jsonl:1", METRICS)
    assert read.dialogue_turns and read.dialogue_turns is read.dialogue_turns  # typed once, on first use
    assert read.line() == line and read.at("elsewhere:2", 3).line() == line
    assert json.loads(line)["dialogue"] == MALFORMED["dialogue"]  # every dropped part is still in the file
