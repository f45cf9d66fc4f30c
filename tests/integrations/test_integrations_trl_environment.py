"""TRL ``environment_factory``: ``ColbenchToolEnv``'s contract on its own (ask, submit, the turn cap, refusals, a
human endpoint that fails), then the real GRPOTrainer training 2 CPU steps through its tools.

In the trainer run everything is real (TRL 1.16's GRPOTrainer, its prompt rendering with the tool schemas, its
tool-call parsing and tool loop, its masks and loss; the exported SmolLM2; a local HTTP human; bwrap scoring) except
what the 135M model writes: a logits processor forces each of its turns to a scripted tool call, because SmolLM2
never emits one on its own. The model still samples every token through ``generate``; the test records those ids
and checks that TRL trains on exactly them.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import StubOpenAIServer

from colbench.env.dataset import prompt_rows
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.integrations.trl_environment import ColbenchToolEnv, environment_rewards
from colbench.types.task import Task

pytest.importorskip("trl")

HUMAN = "Keep it short and return an int."
REWARDS = ("reward", "success", "leak_penalty")


def rewards(env: ColbenchToolEnv) -> list[float | None]:
    return [f(environments=[env])[0] for f in environment_rewards(*REWARDS)]


def tool_env(tasks: list[Task], scorer: Any, max_turns: int = 3, **kwargs: Any) -> ColbenchToolEnv:
    kwargs.setdefault("simulator", ScriptedSimulator([HUMAN]))
    return ColbenchToolEnv.factory("ColBench-Backend-v1", tasks=tasks, max_turns=max_turns, scorer=scorer, **kwargs)()


def test_a_rollout_asks_submits_and_is_scored_as_the_env_scores(bundled_tasks: list[Task], scorer: Any) -> None:
    task = bundled_tasks[0]
    env = tool_env(bundled_tasks, scorer)
    note = env.reset(**prompt_rows(bundled_tasks, max_turns=3)[0])
    assert "ask_human" in note and "submit_answer" in note
    assert env.ask_human("Int or float?") == HUMAN
    assert env.submit_answer(task.ground_truth) == "Answer received; the session is over."
    assert rewards(env) == [1.0, 1.0, 0.0]
    assert (env.outcome.termination, env.outcome.turns) == ("answered", 2)
    # Over: a second answer (even a wrong one) and a late question are refused and nothing is scored again.
    assert env.submit_answer("def nope(): pass").startswith("Refused: the session is over")
    assert env.ask_human("Still there?").startswith("Refused: the session is over")
    assert rewards(env) == [1.0, 1.0, 0.0] and env.outcome.turns == 2
    # The pooled instance starts clean on the next row.
    env.reset(**prompt_rows(bundled_tasks, max_turns=3)[1])
    assert env.outcome.termination is None and rewards(env) == [0.0, 0.0, 0.0]


def test_the_last_turn_is_scored_as_the_answer_at_the_cap(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer, max_turns=2)
    env.reset(**prompt_rows(bundled_tasks, max_turns=2)[0])
    assert env.ask_human("Int or float?") == HUMAN
    assert env.ask_human("And negatives?").startswith("That was your last turn")
    assert env.outcome.termination == "turn_limit" and rewards(env) == [0.0, 0.0, 0.0]
    assert env.submit_answer(bundled_tasks[0].ground_truth).startswith("Refused")
    assert rewards(env) == [0.0, 0.0, 0.0]


def test_a_rollout_that_never_answers_scores_zero(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer)
    env.reset(**prompt_rows(bundled_tasks, max_turns=3)[0])
    env.ask_human("Int or float?")
    assert env.outcome.termination is None and rewards(env) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("failing_turn", [1, 2])
def test_a_human_endpoint_down_loses_the_episode_never_scores_it(
    bundled_tasks: list[Task], scorer: Any, failing_turn: int
) -> None:
    with StubOpenAIServer() as server:
        server.script([("text", HUMAN)] * (failing_turn - 1) + [("status", 503)] * 5)
        env = tool_env(
            bundled_tasks,
            scorer,
            simulator="openai:human",
            simulator_options={"base_url": server.base_url, "api_key": "k", "max_retries": 0},
        )
        env.reset(**prompt_rows(bundled_tasks, max_turns=3)[0])
        for _ in range(failing_turn - 1):
            assert env.ask_human("Int or float?") == HUMAN
        assert "not scored" in env.ask_human("And negatives?")  # no exception out of the tool
        assert env.submit_answer(bundled_tasks[0].ground_truth).startswith("Refused: the session was lost")
        assert server.request_count == failing_turn  # nothing called after the failure
    assert rewards(env) == [None, None, None]
    assert env.outcome.error is not None and "LLMError" in env.outcome.error


def test_bad_rows_and_names_fail_with_one_line(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer)
    with pytest.raises(ConfigError, match="no task_id column"):
        env.reset(prompt=[{"role": "user", "content": "Solve this."}])
    with pytest.raises(ConfigError, match="max_turns=3"):  # a dataset made for another turn cap
        env.reset(**prompt_rows(bundled_tasks, max_turns=5)[0])
    with pytest.raises(ConfigError, match="reset"):
        env.ask_human("Hello?")
    with pytest.raises(ConfigError, match="expected some of"):
        environment_rewards("accuracy")


def test_its_tools_are_the_two_methods_trl_will_expose() -> None:
    """TRL exposes every public function of the class but ``reset`` as a tool, with a schema from its docstring."""
    from transformers.utils import get_json_schema

    public = [n for n, _ in inspect.getmembers(ColbenchToolEnv, predicate=inspect.isfunction) if n[0] != "_"]
    assert public == ["ask_human", "reset", "submit_answer"]
    schema = get_json_schema(ColbenchToolEnv.submit_answer)["function"]
    assert schema["parameters"]["required"] == ["answer"]
    assert "complete Python code" in schema["parameters"]["properties"]["answer"]["description"]
