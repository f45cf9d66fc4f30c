"""The human's claims in the env: checked on every reply (info, dialogue), the truth policy, grounding."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import gymnasium as gym
import pytest
from hand_tasks import make_task

from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.sandbox.contract import Limits
from colbench.types.claims import TruthPolicy
from colbench.types.dialogue import Turn
from colbench.types.task import Task

DOUBLE = make_task("def double(x):\n    return 2 * x\n", ["double(1)", "double(5)"], "double")


def _env(scorer: BackendScorer, simulator: object, **kwargs: object) -> gym.Env:  # type: ignore[type-arg]
    env = gym.make("ColBench-Backend-v1", tasks=[DOUBLE], simulator=simulator, scorer=scorer, **kwargs)
    env.reset(seed=0)
    return env


def _listening(reply: str | Callable[[str], str] = "Sure.") -> tuple[ScriptedSimulator, list[str]]:
    """A scripted human that keeps every message it is shown (the agent's turn, after a grounded human's note, or a
    resample's note) and answers ``reply`` (or ``reply(message)``); the list it keeps them in."""
    seen: list[str] = []

    def human(task: Task, dialogue: Sequence[Turn]) -> str:
        seen.append(dialogue[-1].text)
        return reply(dialogue[-1].text) if callable(reply) else reply

    return ScriptedSimulator(human), seen


def test_every_reply_gets_its_claims_in_info_and_the_dialogue(scorer: BackendScorer) -> None:
    env = _env(scorer, ScriptedSimulator(["double(3) should return 7.", "double(4) gives 8", "No idea."]))
    _, _, _, _, info = env.step("What does double(3) give?")
    assert info["untrue"] is True and info["untrue_replies"] == 1 and info["truth_action"] == "shown"
    (claim,) = info["claims"]
    assert (claim["call"], claim["stated"], claim["actual"], claim["verdict"]) == ("double(3)", "7", "6", "false")
    _, _, _, _, info = env.step("And double(4)?")
    assert info["untrue"] is False and info["claims"][0]["verdict"] == "true" and info["untrue_replies"] == 1
    _, _, _, _, info = env.step("Anything else?")
    assert info["claims"] == [] and info["untrue"] is False
    human = [t for t in env.unwrapped.dialogue if t.role == "human"]
    assert [t.truth.untrue for t in human] == [True, False, False]
    record = human[0].truth.as_dict()
    assert record["untrue"] and record["claims"][0]["verdict"] == "false" and "truth_draws" not in record


def test_a_reply_without_a_claim_never_touches_the_sandbox(bwrap_sandbox: object) -> None:
    class Exploding:
        name = "exploding"
        environment = bwrap_sandbox.environment  # type: ignore[attr-defined]

        def run_tests(self, *args: object, **kwargs: object) -> list[object]:
            raise AssertionError("the sandbox ran for a reply without a claim")

        run_calls = run_tests

        def run_program(self, *args: object, **kwargs: object) -> object:
            raise AssertionError("unused")

        def close(self) -> None:
            pass

    env = _env(BackendScorer(Exploding()), ScriptedSimulator(["Keep it simple; the input is an integer."]))
    _, _, _, _, info = env.step("What should double do with 3?")
    assert info["claims"] == [] and info["untrue"] is False


def test_resample_draws_again_while_a_reply_says_something_false(scorer: BackendScorer) -> None:
    human, seen = _listening(
        lambda said: "double(3) returns 6." if "not what it returns" in said else "double(3) returns 9."
    )
    env = _env(scorer, human, truth_policy="resample:2")
    observation, _, _, _, info = env.step("What is double(3)?")
    assert observation == "double(3) returns 6." and info["truth_action"] == "resampled"
    assert info["untrue"] is True and info["claims"][0]["verdict"] == "true"
    truth = env.unwrapped.dialogue[-1].truth
    assert [text for text, _ in truth.draws] == ["double(3) returns 9.", "double(3) returns 6."]
    assert truth.as_dict()["truth_draws"][0]["claims"][0]["verdict"] == "false"
    assert "you said double(3) gives 9" in seen[1]  # the human is told which claim was false, never the truth
    assert "6" not in seen[1].split("What is double(3)?")[1]


def test_resample_stops_at_its_limit_and_records_every_draw(scorer: BackendScorer) -> None:
    env = _env(scorer, ScriptedSimulator(lambda task, dialogue: "double(3) returns 9."), truth_policy="resample:3")
    observation, _, _, _, info = env.step("What is double(3)?")
    assert observation == "double(3) returns 9." and info["untrue"]
    assert len(env.unwrapped.dialogue[-1].truth.draws) == 4


def test_policy_off_checks_nothing_and_bad_policies_are_one_line_errors(scorer: BackendScorer) -> None:
    env = _env(scorer, ScriptedSimulator(["double(3) returns 9."]), truth_policy="off")
    _, _, _, _, info = env.step("What is double(3)?")
    assert "claims" not in info and env.unwrapped.dialogue[-1].truth is None
    for bad in ("sometimes", "resample:0", "resample:11"):
        with pytest.raises(ConfigError, match="truth policy"):
            TruthPolicy.parse(bad)
    with pytest.raises(ConfigError, match="human_grounding"):
        gym.make("ColBench-Backend-v1", tasks=[DOUBLE], scorer=scorer, human_grounding="always")


def test_grounding_tells_the_human_and_never_the_agent(scorer: BackendScorer) -> None:
    human, seen = _listening()
    env = _env(scorer, human, human_grounding="exec")
    question = "What do double(21), double(-4), double('ab') and double(7) give? And double(x)?"
    observation, _, _, _, info = env.step(question)
    assert "double(21) returns 42" in seen[0] and "double(-4) returns -8" in seen[0]
    assert "double('ab') returns 'abab'" in seen[0]
    note, asked = seen[0].split(question)
    assert "double(7)" not in note and asked == ""  # at most three calls a turn; the note comes first
    grounding = env.unwrapped.dialogue[-1].truth.grounding
    assert [g.call for g in grounding] == ["double(21)", "double(-4)", "double('ab')"]
    # the agent's side: its observation, its own turn as kept, and info hold none of it
    assert observation == "Sure." and env.unwrapped.dialogue[0].text == question
    assert "42" not in repr(info) and "grounding" not in info
    transcript = env.unwrapped.transcript()
    assert all("42" not in m["content"] for m in transcript.messages)


def test_grounding_off_by_default_and_a_turn_without_calls_is_unchanged(scorer: BackendScorer) -> None:
    human, seen = _listening()
    _env(scorer, human).step("What does double(2) give?")
    _env(scorer, human, human_grounding="exec").step("Should it handle floats?")
    assert seen == ["What does double(2) give?", "Should it handle floats?"]


def test_astep_checks_claims_as_step_does(scorer: BackendScorer) -> None:
    env = _env(scorer, ScriptedSimulator(["double(3) should return 7."]), human_grounding="exec")

    async def play() -> dict[str, object]:
        _, _, _, _, info = await env.unwrapped.astep("What does double(3) give?")
        return info

    info = asyncio.run(play())
    assert info["untrue"] is True and info["claims"][0]["actual"] == "6"
    assert env.unwrapped.dialogue[-1].truth.grounding[0].result == "returns 6"


def test_a_grounded_call_that_raises_or_loops_is_told_so(bwrap_sandbox: object) -> None:
    task = make_task(
        "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    while x == 7:\n        pass\n    return x\n",
        ["f(1)"],
        "f",
    )
    scorer = BackendScorer(bwrap_sandbox, limits=Limits(timeout_s=1.0))  # type: ignore[arg-type]
    human, seen = _listening("f(-1) returns 0 and f(7) returns 7.")
    env = gym.make("ColBench-Backend-v1", tasks=[task], simulator=human, scorer=scorer)
    env.unwrapped.human_grounding = "exec"
    env.reset(seed=0)
    _, _, _, _, info = env.step("What about f(-1) and f(7)?")
    assert "f(-1) raises an error: ValueError" in seen[0] and "f(7) does not finish in time" in seen[0]
    assert [c["verdict"] for c in info["claims"]] == ["unchecked", "unchecked"] and not info["untrue"]


def test_grounding_says_whether_the_agents_own_value_is_right(scorer: BackendScorer) -> None:
    human, seen = _listening()
    env = _env(scorer, human, human_grounding="exec")
    env.step("I believe `double(4)` should return `9`. Is that right?")
    env.step("And double(5) gives 10, correct?")
    assert "double(4) returns 8 (the assistant's value 9 is WRONG)" in seen[0]
    assert "double(5) returns 10 (the assistant's value 10 is right)" in seen[1]
    first = env.unwrapped.dialogue[1].truth.grounding[0].as_dict()
    assert first == {"call": "double(4)", "result": "returns 8", "said": "9", "right": False}
