"""Selection (colbench.simtrain.selection): a real bundled task judged by the backend's leak detector and its claims
checker (the reference run in the bwrap sandbox), over-release and the empty/off-topic checks; select's order, its
ties and its reasons; the SFT rows."""

from __future__ import annotations

import shutil

import pytest

from colbench.env.domain import get_domain
from colbench.env.simulators import make_simulator
from colbench.errors import ConfigError
from colbench.simtrain.prefixes import Prefix
from colbench.simtrain.sampling import Candidate, human_chat
from colbench.simtrain.selection import (
    EMPTY,
    FALSE_CLAIM,
    LEAK,
    MORE_OVER_RELEASE,
    NO_TRUE_CLAIM,
    OFF_TOPIC,
    Judge,
    Judged,
    is_off_topic,
    select,
    sft_rows,
)
from colbench.tasks import Task, load_split
from colbench.types.dialogue import Turn

ENV = "ColBench-Backend-v1"


@pytest.fixture(scope="module")
def task() -> Task:
    return load_split("backend-sample")[0]  # apply_fixed_point_fir_filter


@pytest.fixture(scope="module")
def judge() -> Judge:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (the README's set-up command installs it)")
    return Judge(ENV, sandbox="bwrap")


def _prefix(task: Task, question: str) -> Prefix:
    return Prefix(task, (Turn("agent", question),), "test")


def test_each_check_vetoes_in_order_and_a_checked_true_claim_is_preferred(judge: Judge, task: Task) -> None:
    call = task.test_cases[0][1]  # apply_fixed_point_fir_filter([1, 2, 3, 4, 5], [0.5, 0.3], 16, 10)
    prefix = _prefix(task, f"What should {call} return?")
    texts = {
        "false": f"{call} should return 12345.",
        "true": f"{call} should return [0, 1, 2, 2, 3].",
        "plain": "Keep the output the same length as the input signal, please.",
        "leak": task.ground_truth,
        "empty": "  ...  ",
        "off": "Bananas grow tall under tropical sunlight.",
    }
    judged = {name: j for name, j in zip(texts, judge.judge(prefix, list(texts.values())), strict=True)}
    assert all(not j.kept for j in judged.values())  # judging scores only
    assert judged["false"].false_claims == 1 and judged["false"].claims[0].actual == "[0, 1, 2, 2, 3]"
    assert judged["true"].true_claims == 1 and judged["true"].false_claims == 0
    assert judged["leak"].leaked and judged["leak"].leak_score >= get_domain("backend").leak_threshold
    assert judged["empty"].empty and judged["empty"].empty_or_off_topic
    assert judged["off"].off_topic and judged["off"].empty_or_off_topic and not judged["off"].empty
    assert not judged["plain"].empty_or_off_topic and not judged["plain"].leaked

    decided = dict(zip(texts, select(list(judged.values())), strict=True))
    assert {name: j.dropped for name, j in decided.items()} == {
        "false": FALSE_CLAIM,
        "true": "",
        "plain": NO_TRUE_CLAIM,
        "leak": LEAK,
        "empty": EMPTY,
        "off": OFF_TOPIC,
    }
    assert [name for name, j in decided.items() if j.kept] == ["true"]


def test_lower_over_release_wins_and_every_tie_is_kept(judge: Judge, task: Task) -> None:
    prefix = _prefix(task, "How should the filter work inside?")
    texts = [
        "Use an accumulator for each sample and collect the output_signal as you go.",  # two reference names
        "Multiply and add for each sample, then give back the filtered samples.",
        "Add up the weighted samples one by one and give back the filtered samples.",
        "Keep an accumulator for each sample.",  # one
    ]
    judged = judge.judge(prefix, texts)
    assert [j.over_release for j in judged] == [2, 0, 0, 1]
    assert judged[0].revealed == ("accumulator", "output_signal")
    decided = select(judged)
    assert [j.kept for j in decided] == [False, True, True, False]
    assert [j.dropped for j in decided] == [MORE_OVER_RELEASE, "", "", MORE_OVER_RELEASE]


def test_prefixes_are_decided_apart_and_all_vetoed_keeps_none(task: Task) -> None:
    def judged(prefix: str, draw: int, over: int, *, leaked: bool = False) -> Judged:
        return Judged(Candidate(prefix, draw, f"reply {draw}"), leaked, 0, 0, over, False)

    decided = select([judged("a", 0, 3), judged("b", 0, 1), judged("a", 1, 5), judged("b", 1, 2, leaked=True)])
    assert [(j.candidate.prefix, j.kept, j.dropped) for j in decided] == [
        ("a", True, ""),  # the best of a, though b has a lower over-release
        ("b", True, ""),
        ("a", False, MORE_OVER_RELEASE),
        ("b", False, LEAK),
    ]
    assert not any(j.kept for j in select([judged("c", 0, 0, leaked=True)]))


def test_off_topic_is_conservative(task: Task) -> None:
    prefix = _prefix(task, "Do you want the output rounded?")
    for reply in ("Yes.", "No, thanks.", "I'm not sure.", "Maybe 3?", "Hmm, whatever works.", "42"):
        assert not is_off_topic(reply, prefix), reply
    assert not is_off_topic("Rounded is fine.", prefix)  # a word of the dialogue, not of the task
    assert is_off_topic("Bananas grow tall under tropical sunlight.", prefix)


def test_sft_rows_are_the_human_request_and_the_kept_replies(task: Task) -> None:
    prefix = _prefix(task, "What inputs?")
    human = make_simulator(get_domain("backend"), "openai:m", base_url="http://127.0.0.1:9/v1", api_key="k")
    kept = select(
        [
            Judged(Candidate(prefix.key(), 0, "A signal and coefficients."), False, 0, 0, 0, False),
            Judged(Candidate(prefix.key(), 1, "A list."), False, 0, 0, 0, False),
            Judged(Candidate(prefix.key(), 2, "def f(): pass"), True, 0, 0, 0, False),
        ]
    )
    rows = sft_rows(prefix, kept, human)
    chat = human_chat(prefix, human)
    assert rows == [
        {"messages": [*chat, {"role": "assistant", "content": "A signal and coefficients."}]},
        {"messages": [*chat, {"role": "assistant", "content": "A list."}]},
    ]
    assert chat[0]["role"] == "system" and chat[-1] == {"role": "user", "content": "What inputs?"}
    with pytest.raises(ConfigError, match="given for prefix"):
        sft_rows(_prefix(task, "Other?"), kept, human)
