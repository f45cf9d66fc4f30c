"""The backend env through Gymnasium: registration, check_env, episodes with a real HTTP simulator."""

from __future__ import annotations

import gymnasium as gym
import pytest
from openai_stub import InFlight, StubOpenAIServer

import colbench
from colbench.domains.backend.env import BackendEnv
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.spaces import UnicodeText
from colbench.errors import ColbenchError, ConfigError, LLMError
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task


@pytest.fixture
def env_kwargs(bundled_tasks: list[Task], scorer: BackendScorer) -> dict[str, object]:
    return {"tasks": bundled_tasks, "simulator": ScriptedSimulator(["Return an empty list then."]), "scorer": scorer}


def test_namespaced_id_without_import(env_kwargs: dict[str, object]) -> None:
    env = gym.make("colbench:ColBench-Backend-v1", **env_kwargs)
    assert isinstance(env.unwrapped, BackendEnv)
    assert colbench.__version__


def test_full_episode_through_a_real_http_simulator(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    replies = iter(["An empty list should give an empty list.", "Yes, keep the order."])
    with StubOpenAIServer(default=lambda request: next(replies)) as server:
        env = gym.make(
            "ColBench-Backend-v1",
            tasks=bundled_tasks,
            simulator="openai:stub-human",
            simulator_options={"base_url": server.base_url, "api_key": "test-key"},
            scorer=scorer,
        )
        obs, info = env.reset(seed=3)
        task = env.unwrapped.task
        assert task.problem_description in obs
        assert task.ground_truth not in obs and "hidden_information" not in info
        assert info["turn"] == 0 and info["task_id"] == task.task_id

        obs, reward, terminated, truncated, info = env.step("What should happen with an empty list?")
        assert (obs, reward, terminated, truncated) == ("An empty list should give an empty list.", 0.0, False, False)
        assert info["turn"] == 1 and info["usage"]["simulator"]["calls"] == 1

        obs, reward, terminated, truncated, info = env.step("Should I keep the input order?")
        assert obs == "Yes, keep the order." and not terminated

        final = "I WANT TO ANSWER:\n```python\n" + task.ground_truth + "\n```"
        obs, reward, terminated, truncated, info = env.step(final)
        assert terminated and not truncated and reward == 1.0
        assert info["termination"] == "answered" and info["success"] and info["tests_total"] == 10
        assert len(info["score"]["tests"]) == 10

        # The simulator saw the hidden information in its system prompt and the dialogue as chat turns.
        assert len(server.requests) == 2
        messages = server.requests[-1]["messages"]
        assert messages[0]["role"] == "system" and task.hidden_information in messages[0]["content"]
        assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
        assert messages[-1]["content"] == "Should I keep the input order?"

        with pytest.raises(ColbenchError, match="reset"):
            env.step("one more")


def test_turn_cap_scores_the_last_text(env_kwargs: dict[str, object], bundled_tasks: list[Task]) -> None:
    env = BackendEnv(max_turns=3, **env_kwargs)  # type: ignore[arg-type]
    env.reset(options={"task_id": bundled_tasks[1].task_id})
    for _ in range(2):
        _, reward, terminated, _, info = env.step("Tell me more?")
        assert not terminated and reward == 0.0
    _, reward, terminated, truncated, info = env.step(bundled_tasks[1].ground_truth)  # no marker: the cap ends it
    assert terminated and not truncated
    assert info["termination"] == "turn_limit" and reward == 1.0 and info["turn"] == 3


def test_wrong_answer_gets_zero_reward(env_kwargs: dict[str, object]) -> None:
    env = BackendEnv(**env_kwargs)  # type: ignore[arg-type]
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("I WANT TO ANSWER:\ndef nope():\n    return 0\n")
    assert terminated and reward == 0.0 and not info["success"] and info["tests_passed"] == 0


def test_reset_is_seeded_and_never_calls_the_simulator(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    calls: list[int] = []

    def replies(task: Task, dialogue: object) -> str:
        calls.append(1)
        return "ok"

    env = BackendEnv(tasks=bundled_tasks, simulator=ScriptedSimulator(replies), scorer=scorer)
    first = [env.reset(seed=s)[1]["task_id"] for s in range(8)]
    again = [env.reset(seed=s)[1]["task_id"] for s in range(8)]
    assert first == again and len(set(first)) > 1
    assert calls == []


def test_hidden_information_only_when_asked(env_kwargs: dict[str, object]) -> None:
    env = BackendEnv(expose_hidden=True, **env_kwargs)  # type: ignore[arg-type]
    _, info = env.reset(seed=1)
    assert info["hidden_information"] == env.task.hidden_information
    assert info["ground_truth"] == env.task.ground_truth


def test_bad_arguments_are_clear(env_kwargs: dict[str, object], bundled_tasks: list[Task]) -> None:
    env = BackendEnv(**env_kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no such task"):
        env.reset(options={"task_id": "missing"})
    with pytest.raises(ColbenchError, match="reset"):
        BackendEnv(**env_kwargs).step("hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="simulator spec"):
        BackendEnv(tasks=bundled_tasks, simulator="gpt-4o")
    frontend = Task("f", "frontend", "page", "<html></html>", "<html></html>")
    with pytest.raises(ConfigError, match="frontend"):
        BackendEnv(tasks=[frontend])


def test_simulator_outage_is_an_infrastructure_error(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    with StubOpenAIServer() as server:
        server.script([("status", 503)] * 10)
        env = BackendEnv(
            tasks=bundled_tasks,
            simulator="openai:stub",
            simulator_options={"base_url": server.base_url, "max_retries": 2, "backoff_s": 0.01},
            scorer=scorer,
        )
        env.reset(seed=0)
        with pytest.raises(LLMError):
            env.step("A question?")
        # The failed step left no trace: once the endpoint recovers, the same step goes through.
        assert env.dialogue == ()
        server.script([("text", "Sure.")])
        obs, _, terminated, _, info = env.step("A question?")
        assert obs == "Sure." and not terminated and info["turn"] == 1


def test_text_space() -> None:
    space = UnicodeText(seed=0)
    samples = [space.sample() for _ in range(20)]
    assert all(space.contains(s) for s in samples)
    assert any(not s.isascii() for s in samples)
    assert space.contains("I WANT TO ANSWER:\ndef f(): return '漢字'") and not space.contains(b"bytes")
    assert not UnicodeText(max_length=3).contains("four")


def test_astep_runs_many_episodes_concurrently_through_a_real_http_simulator(
    bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    import asyncio

    human = InFlight("Keep the order.", 0.3)

    with StubOpenAIServer(default=human) as server:
        envs = [
            BackendEnv(
                tasks=bundled_tasks,
                simulator="openai:stub-human",
                simulator_options={"base_url": server.base_url, "api_key": "k"},
                scorer=scorer,
            )
            for _ in range(8)
        ]

        async def episode(env: BackendEnv, i: int) -> tuple[float, dict[str, object]]:
            env.reset(options={"task_id": bundled_tasks[i].task_id})
            obs, reward, terminated, _, _ = await env.astep("Should I keep the order?")
            assert obs == "Keep the order." and not terminated and reward == 0.0
            _, reward, terminated, _, info = await env.astep("I WANT TO ANSWER:\n" + bundled_tasks[i].ground_truth)
            assert terminated
            return reward, info

        async def main() -> list[tuple[float, dict[str, object]]]:
            return await asyncio.gather(*(episode(env, i) for i, env in enumerate(envs)))

        results = asyncio.run(main())
    assert [reward for reward, _ in results] == [1.0] * 8
    assert [info["task_id"] for _, info in results] == [t.task_id for t in bundled_tasks[:8]]
    assert len(server.requests) == 8
    # The simulator calls overlapped: the human was asked by several episodes at once.
    assert human.most > 1, human.most
