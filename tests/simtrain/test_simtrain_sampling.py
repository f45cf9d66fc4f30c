"""Candidates (colbench.simtrain.sampling): the request is the one the env's human sends for the same dialogue,
compared on the wire (a local OpenAI stub records both), in both views; K draws carry distinct seeds, reproducibly;
a candidate is the reply as the env would show it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from openai_stub import StubOpenAIServer

from colbench.env.domain import get_domain
from colbench.env.simulators import make_simulator
from colbench.errors import ConfigError
from colbench.humans.spec import WrittenSpec, hidden_sha256, write_specs
from colbench.simtrain.prefixes import Prefix
from colbench.simtrain.sampling import human_chat, human_request, sample_candidates
from colbench.tasks import Task, load_split
from colbench.types.dialogue import Turn

ENV = "ColBench-Backend-v1"
LONG = "The signal is a list of numbers and the coefficients are floats. " * 10  # past the 400-character cap


@pytest.fixture(scope="module")
def task() -> Task:
    return load_split("backend-sample")[0]


def _options(stub: StubOpenAIServer, view: str, specs: Path) -> dict[str, Any]:
    options: dict[str, Any] = {"base_url": stub.base_url, "api_key": "k", "temperature": 0.7, "max_tokens": 64}
    return {**options, "view": "spec", "specs": str(specs)} if view == "spec" else options


def _specs(task: Task, tmp_path: Path) -> Path:
    path = tmp_path / "specs.jsonl"
    spec = "A function that filters a list of samples with fixed-point coefficients; it returns the filtered list."
    write_specs(path, [WrittenSpec(task.task_id, hidden_sha256(task), spec, "pinned", "")])
    return path


@pytest.mark.parametrize("view", ["hidden", "spec"])
def test_candidates_are_asked_as_the_env_asks_its_human(view: str, task: Task, tmp_path: Path) -> None:
    specs = _specs(task, tmp_path)
    with StubOpenAIServer(default=lambda body: LONG) as stub:
        options = _options(stub, view, specs)
        env = gym.make(
            gym.spec(ENV), tasks=[task], simulator="openai:human-model", simulator_options=options, truth_policy="off"
        )
        env.reset(options={"task_id": task.task_id})
        env.step("What does the function take?")
        shown, *_ = env.step("And what should it return for an empty signal?")
        env.close()
        sent_by_env = stub.requests[-1]
        prefix = Prefix(task, tuple(env.unwrapped.dialogue[:3]), "test")
        assert prefix.dialogue[-1] == Turn("agent", "And what should it return for an empty signal?")

        human = make_simulator(get_domain("backend"), "openai:human-model", **options)
        assert human_request(prefix, human) == sent_by_env
        assert sent_by_env["messages"] == human_chat(prefix, human)
        if view == "spec":  # the spec human is shown the spec, never the reference
            assert "fixed-point coefficients" in sent_by_env["messages"][0]["content"]
            assert task.ground_truth.strip() not in sent_by_env["messages"][0]["content"]

        stub.requests.clear()
        candidates = asyncio.run(
            sample_candidates(
                [prefix], env_id=ENV, simulator="openai:human-model", simulator_options=options, k=3, seed=7
            )
        )
        drawn = list(stub.requests)
    assert [c.draw for c in candidates] == [0, 1, 2] and {c.prefix for c in candidates} == {prefix.key()}
    assert sorted(body["seed"] for body in drawn) == [7, 8, 9] == [c.seed for c in candidates]
    for body in drawn:
        assert {k: v for k, v in body.items() if k != "seed"} == sent_by_env  # same prompt, view and decoding
    assert [c.text for c in candidates] == [shown] * 3  # cut to the reply cap as the env cuts it
    assert len(shown) <= get_domain("backend").max_reply_chars < len(LONG)


def test_draws_differ_by_seed_and_come_again_alike(task: Task) -> None:
    prefixes = [Prefix(task, (Turn("agent", q),), "test") for q in ("What inputs?", "What output?")]

    def by_seed(body: dict[str, Any]) -> str:
        return f"reply for seed {body.get('seed')} to {body['messages'][-1]['content']}"

    with StubOpenAIServer(default=by_seed) as stub:
        options = {"base_url": stub.base_url, "api_key": "k"}

        def draw() -> list[tuple[str, int, str]]:
            got = asyncio.run(
                sample_candidates(
                    prefixes, env_id=ENV, simulator="openai:m", simulator_options=options, k=4, seed=100, concurrency=3
                )
            )
            return [(c.prefix, c.draw, c.text) for c in got]

        first, again = draw(), draw()
        assert stub.request_count == 2 * 2 * 4  # no response cache: every draw is a request
    assert first == again
    assert [text for _, _, text in first[:4]] == [f"reply for seed {100 + d} to What inputs?" for d in range(4)]
    assert [key for key, _, _ in first] == [prefixes[0].key()] * 4 + [prefixes[1].key()] * 4


def test_a_scripted_human_sends_no_request_and_bad_arguments_are_refused(task: Task) -> None:
    prefix = Prefix(task, (Turn("agent", "Hi?"),), "test")
    scripted = make_simulator(get_domain("backend"), "scripted")
    with pytest.raises(ConfigError, match="calls no chat model"):
        human_chat(prefix, scripted)
    got = asyncio.run(sample_candidates([prefix], env_id=ENV, simulator=scripted, simulator_options={}, k=2, seed=0))
    assert [c.text for c in got] == ["I don't know."] * 2  # a scripted human is its own draw
    for bad, says in (({"k": 0}, "k must be"), ({"env_id": "ColBench-Frontend-v0"}, "takes frontend tasks")):
        kwargs: dict[str, Any] = {"env_id": ENV, "simulator": "scripted", "simulator_options": {}, "k": 1, "seed": 0}
        with pytest.raises(ConfigError, match=says):
            asyncio.run(sample_candidates([prefix], **{**kwargs, **bad}))
    with pytest.raises(ConfigError, match="simulator_options are for a simulator spec"):
        asyncio.run(
            sample_candidates([prefix], env_id=ENV, simulator=scripted, simulator_options={"x": 1}, k=1, seed=0)
        )
