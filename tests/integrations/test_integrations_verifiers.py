"""verifiers: ColBench loaded through the real ``vf.load_environment`` and evaluated with ``env.evaluate`` against a
local OpenAI-compatible stub playing the policy (a scripted human), as ``vf-eval`` would run it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from failing_human import FAILING_TURNS, human_failing_at
from openai_stub import StubOpenAIServer

vf = pytest.importorskip("verifiers")

from openai import AsyncOpenAI  # noqa: E402

from colbench.tasks import Task  # noqa: E402

ENV_ID = "colbench.integrations.verifiers"


def answers_with_the_reference(tasks: list[Task]) -> Any:
    """A policy that asks once, then answers with the reference of the task named in its prompt."""

    def respond(request: dict[str, Any]) -> str:
        messages = request["messages"]
        first = next(m["content"] for m in messages if m["role"] == "user")
        task = next(t for t in tasks if t.problem_description.strip() in first)
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return "What should happen with an empty input?"
        return f"I WANT TO ANSWER:\n{task.ground_truth}"

    return respond


def evaluate(env: Any, server: StubOpenAIServer, n: int) -> dict[str, Any]:
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.base_url, api_key="k"))
    return asyncio.run(
        env.evaluate(client=client, model="policy", num_examples=n, rollouts_per_example=1, on_progress=lambda *a: None)
    )


def test_vf_evaluate_plays_colbench_episodes(bundled_tasks: list[Task]) -> None:
    env = vf.load_environment(ENV_ID, tasks="backend-sample", max_turns=3, sandbox="bwrap", simulator="scripted")
    with StubOpenAIServer(default=answers_with_the_reference(bundled_tasks)) as server:
        result = evaluate(env, server, 3)
    outputs = result["outputs"]
    assert len(outputs) == 3 and result["metadata"]["avg_reward"] == 1.0
    for out in outputs:
        assert out["error"] is None and out["stop_condition"] == "has_final_env_response"
        roles = [m["role"] for m in out["completion"]]
        assert roles == ["assistant", "user", "assistant", "user"]  # question, human reply, answer, episode over
        assert out["colbench_leaks"] == 0.0


def test_the_turn_cap_scores_the_last_turn(bundled_tasks: list[Task]) -> None:
    env = vf.load_environment(ENV_ID, tasks="backend-sample", max_turns=2, sandbox="bwrap", simulator="scripted")
    with StubOpenAIServer(default=lambda request: "Tell me more?") as server:
        out = evaluate(env, server, 1)["outputs"][0]
    assert out["stop_condition"] == "has_final_env_response" and out["reward"] == 0.0
    assert sum(m["role"] == "assistant" for m in out["completion"]) == 2


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_an_infrastructure_error_is_the_rollouts_error_not_a_score(turn: int) -> None:
    with (
        human_failing_at(turn) as human,
        StubOpenAIServer(default=lambda request: "Tell me more?") as policy,
    ):
        env = vf.load_environment(ENV_ID, tasks="backend-sample", max_turns=3, sandbox="bwrap", **human)
        out = evaluate(env, policy, 1)["outputs"][0]
    assert out["stop_condition"] == "has_error" and out["error"]["error"] == "InfraError"  # what trainers mask out
    assert "HTTP 400" in out["error"]["message"]
    assert [m["role"] for m in out["completion"]] == ["assistant", "user"] * (turn - 1) + ["assistant"]
