"""The ColBench vector env (``gym.make_vec``): concurrency, Gymnasium 1.x autoreset semantics, seeds and options,
infrastructure errors, shared parts; Gymnasium's own sync and async modes; ``astep`` through ``gym.make``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from openai_stub import InFlight, StubOpenAIServer
from paths import REPO

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.registration import env_ids
from colbench.env.vector import ColbenchVectorEnv
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.humans.simulator import ScriptedSimulator, SimReply
from colbench.tasks import Task
from colbench.types.dialogue import Turn

ASK = "What should happen with an empty input?"


def answer(task: Task) -> str:
    return f"I WANT TO ANSWER:\n{task.ground_truth}"


class SlowHuman:
    """An async simulated human that takes ``seconds`` per reply and records how many replies it held at once."""

    def __init__(self, seconds: float = 0.05, fail_on: str | None = None) -> None:
        self.seconds, self.fail_on = seconds, fail_on
        self.now = self.most = self.calls = 0

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        raise AssertionError("the vector env must use areply")

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        self.calls += 1
        if task.task_id == self.fail_on:
            raise InfraError("simulator endpoint down")
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(self.seconds)
        self.now -= 1
        return SimReply("Return 0 for an empty input.")

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


@pytest.fixture
def vec_kwargs(bundled_tasks: list[Task], scorer: BackendScorer) -> dict[str, Any]:
    return {"tasks": bundled_tasks, "scorer": scorer, "simulator": ScriptedSimulator(["Return 0."])}


def make(num_envs: int, **kwargs: Any) -> VectorEnv:
    return gym.make_vec("ColBench-Backend-v1", num_envs=num_envs, **kwargs)


def by_id(tasks: list[Task]) -> dict[str, Task]:
    return {t.task_id: t for t in tasks}


def test_every_id_has_a_colbench_vector_env() -> None:
    for env_id in env_ids():
        spec = gym.spec(env_id)
        assert spec.vector_entry_point, env_id
        module, _, name = spec.vector_entry_point.partition(":")
        cls = getattr(__import__(module, fromlist=[name]), name)
        assert issubclass(cls, ColbenchVectorEnv) and cls.env_class.__module__ == spec.entry_point.split(":")[0]


def test_make_vec_steps_all_episodes_at_once(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    human = SlowHuman(0.2)
    vec = make(8, tasks=bundled_tasks, scorer=scorer, simulator=human)
    assert isinstance(vec, ColbenchVectorEnv) and vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, infos = vec.reset(seed=0)
    assert len(obs) == 8 and all("Python function" in o for o in obs) and infos["_task_id"].all()
    obs, rewards, terms, truncs, infos = vec.step([ASK] * 8)
    assert human.most == 8 and human.calls == 8, "the 8 human replies were not in flight together"
    assert obs == ("Return 0 for an empty input.",) * 8 and not terms.any() and not truncs.any()
    assert list(infos["turn"]) == [1] * 8 and list(infos["termination"]) == [None] * 8
    tasks = by_id(bundled_tasks)
    obs, rewards, terms, truncs, infos = vec.step([answer(tasks[t]) for t in infos["task_id"]])
    assert terms.all() and rewards.dtype == np.float64 and (rewards == 1.0).all()
    assert list(infos["termination"]) == ["answered"] * 8 and infos["success"].all()
    assert (infos["pass_rate"] == 1.0).all() and (infos["tests_passed"] == infos["tests_total"]).all()
    vec.close()


def test_seeds_match_single_envs_and_options_choose_tasks(vec_kwargs: dict[str, Any]) -> None:
    vec = make(4, **vec_kwargs)
    _, infos = vec.reset(seed=7)
    singles = []
    for i in range(4):
        env = gym.make("ColBench-Backend-v1", **vec_kwargs)
        singles.append(env.reset(seed=7 + i)[1]["task_id"])
    assert list(infos["task_id"]) == singles
    _, again = vec.reset(seed=[7, 8, 9, 10])
    assert list(again["task_id"]) == singles
    one = vec_kwargs["tasks"][3].task_id
    _, group = vec.reset(options={"task_id": one})  # a GRPO group: N rollouts of one task
    assert set(group["task_id"]) == {one}
    chosen = [t.task_id for t in vec_kwargs["tasks"][:4]]
    _, each = vec.reset(options=[{"task_id": t} for t in chosen])
    assert list(each["task_id"]) == chosen
    with pytest.raises(ConfigError, match="expected 4 seeds"):
        vec.reset(seed=[1, 2])
    with pytest.raises(ConfigError, match="expected 4 dicts"):
        vec.reset(options=[{}, {}])
    vec.close()


def test_next_step_autoreset(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, **vec_kwargs)
    tasks = by_id(vec_kwargs["tasks"])
    _, infos = vec.reset(seed=0)
    first = list(infos["task_id"])
    obs, rewards, terms, _, infos = vec.step([answer(tasks[first[0]]), ASK])
    assert list(terms) == [True, False] and rewards[0] == 1.0 and obs[0] == ""
    ended = vec.finished(0)
    assert ended is not None and ended.done and ended.messages[-1]["content"] == answer(tasks[first[0]])
    assert vec.finished(1) is None
    # The next step resets env 0 (its action is ignored) and steps env 1.
    obs, rewards, terms, truncs, infos = vec.step([None, answer(tasks[first[1]])])
    assert "Python function" in obs[0] and rewards[0] == 0.0 and not terms[0] and not truncs[0]
    assert infos["turn"][0] == 0 and terms[1] and rewards[1] == 1.0
    vec.close()


def test_same_step_autoreset(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, autoreset_mode="same_step", **vec_kwargs)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    tasks = by_id(vec_kwargs["tasks"])
    _, infos = vec.reset(seed=0)
    obs, rewards, terms, _, infos = vec.step([answer(tasks[infos["task_id"][0]]), ASK])
    assert terms[0] and rewards[0] == 1.0 and "Python function" in obs[0]  # already the next episode's prompt
    assert infos["_final_obs"][0] and not infos["_final_obs"][1] and infos["final_obs"][0] == ""
    assert infos["final_info"]["termination"][0] == "answered" and infos["turn"][0] == 0
    vec.close()


def test_disabled_autoreset_needs_reset_mask(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, autoreset_mode="disabled", **vec_kwargs)
    tasks = by_id(vec_kwargs["tasks"])
    _, infos = vec.reset(seed=0)
    ids = list(infos["task_id"])
    vec.step([answer(tasks[ids[0]]), ASK])
    with pytest.raises(ColbenchError, match="autoreset is disabled"):
        vec.step([ASK, ASK])
    obs, _, terms, _, infos = vec.step([None, ASK])  # a finished sub-env sits the step out
    assert obs[0] == "" and not terms[0] and list(infos["_turn"]) == [False, True] and infos["turn"][1] == 2
    obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
    assert list(infos["_task_id"]) == [True, False] and "Python function" in obs[0]
    assert obs[1] == "Return 0."  # env 1 kept its episode
    _, _, terms, _, infos = vec.step([ASK, answer(tasks[ids[1]])])
    assert list(terms) == [False, True]
    with pytest.raises(ConfigError, match="reset_mask"):
        vec.reset(options={"reset_mask": [1, 0]})
    vec.close()


def test_an_infra_error_truncates_one_episode_only(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    broken = bundled_tasks[0].task_id
    human = SlowHuman(0.01, fail_on=broken)
    vec = make(3, tasks=bundled_tasks, scorer=scorer, simulator=human)
    # every sub-env on a named task: one left to chance drew the broken task 1 time in 20 and was truncated too
    _, infos = vec.reset(
        options=[{"task_id": broken}, {"task_id": bundled_tasks[1].task_id}, {"task_id": bundled_tasks[2].task_id}]
    )
    obs, rewards, terms, truncs, infos = vec.step([ASK] * 3)
    assert list(truncs) == [True, False, False] and not terms.any() and rewards[0] == 0.0
    assert "simulator endpoint down" in infos["error"][0] and list(infos["_error"]) == [True, False, False]
    assert obs[1] == obs[2] == "Return 0 for an empty input."
    assert vec.finished(0) is not None and not vec.finished(0).done
    obs, *_ = vec.step([None, ASK, ASK])  # the truncated env starts over
    assert "Python function" in obs[0]
    vec.close()


def test_bad_actions_are_refused_before_any_step(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, **vec_kwargs)
    vec.reset(seed=0)
    with pytest.raises(ConfigError, match="expected 2 actions"):
        vec.step([ASK])
    with pytest.raises(ConfigError, match=r"actions\[1\] must be a str"):
        vec.step([ASK, 3])
    with pytest.raises(ConfigError, match="one string"):
        vec.step(ASK)
    _, _, _, _, infos = vec.step([ASK, ASK])
    assert list(infos["turn"]) == [1, 1]  # the refused calls changed nothing
    with pytest.raises(ConfigError, match="autoreset_mode"):
        make(2, autoreset_mode="sometimes", **vec_kwargs)
    with pytest.raises(ConfigError, match="num_envs"):
        ColbenchVectorEnv.__init__(vec, 0)
    vec.close()


def test_sub_envs_share_one_simulator_client_and_the_scorer(bundled_tasks: list[Task]) -> None:
    with StubOpenAIServer(default=InFlight("Use a dict.", 0.2)) as server:
        vec = make(
            6,
            tasks=bundled_tasks,
            sandbox="bwrap",
            simulator="openai:human",
            simulator_options={"base_url": server.base_url, "api_key": "k"},
        )
        simulators = {id(env.simulator) for env in vec.envs}
        scorers = {id(env.scorer) for env in vec.envs}
        assert len(simulators) == 1 and len(scorers) == 1
        # its HTTP pool keeps a connection per sub-env: no request of a step waits for one or opens one anew
        assert vec.envs[0].simulator.client.endpoint.max_connections == 6
        single = gym.make("ColBench-Backend-v1", tasks=bundled_tasks, sandbox="bwrap")
        assert single.scorer is vec.envs[0].scorer  # the process's shared scorer, by default
        vec.reset(seed=0)
        obs, *_ = vec.step([ASK] * 6)
        assert obs == ("Use a dict.",) * 6 and server.default.most == 6 and server.request_count == 6
        vec.close()


def test_the_callers_pool_size_stays_and_the_human_envs_agent_is_pooled(bundled_tasks: list[Task]) -> None:
    own = make(
        3,
        tasks=bundled_tasks,
        simulator="openai:h",
        simulator_options={"base_url": "http://127.0.0.1:9/v1", "max_connections": 1},
    )
    assert own.envs[2].simulator.client.endpoint.max_connections == 1
    own.close()
    humans = gym.make_vec(
        "ColBench-Human-v0",
        num_envs=3,
        tasks=bundled_tasks,
        agent="openai:a",
        agent_options={"base_url": "http://127.0.0.1:9/v1"},
    )
    assert {id(env.agent) for env in humans.envs} == {id(humans.envs[0].agent)}
    assert humans.envs[0].agent.client.endpoint.max_connections == 3
    humans.close()


def test_bad_reset_arguments_are_refused(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, **vec_kwargs)
    with pytest.raises(ConfigError, match=r"reset\(seed=1.5\)"):
        vec.reset(seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown: taks_id"):
        vec.reset(options={"taks_id": "x"})
    with pytest.raises(ConfigError, match=r"reset\(seed\)='a'"):
        vec.reset(seed=["a", "b"])  # type: ignore[list-item]
    vec.close()


def test_async_api_on_the_callers_loop(vec_kwargs: dict[str, Any]) -> None:
    vec = make(3, **vec_kwargs)
    tasks = by_id(vec_kwargs["tasks"])

    async def rollout() -> np.ndarray:
        _, infos = await vec.areset(seed=3)
        await vec.astep([ASK] * 3)
        _, rewards, terms, _, _ = await vec.astep([answer(tasks[t]) for t in infos["task_id"]])
        assert terms.all()
        return rewards

    assert list(asyncio.run(rollout())) == [1.0, 1.0, 1.0]
    vec.close()


def test_step_works_inside_a_running_loop(vec_kwargs: dict[str, Any]) -> None:
    vec = make(2, **vec_kwargs)

    async def notebook_cell() -> tuple[str, ...]:
        vec.reset(seed=0)  # sync calls from inside a running loop (a notebook) run on the env's own loop
        return vec.step([ASK, ASK])[0]

    assert asyncio.run(notebook_cell()) == ("Return 0.", "Return 0.")
    vec.close()


def test_gym_make_returns_the_env_with_its_async_api(vec_kwargs: dict[str, Any]) -> None:
    env = gym.make("ColBench-Backend-v1", **vec_kwargs)
    assert env is env.unwrapped  # no wrapper hides astep / areset

    async def episode() -> float:
        _, info = await env.areset(seed=0)
        await env.astep(ASK)
        task = by_id(vec_kwargs["tasks"])[info["task_id"]]
        return (await env.astep(answer(task)))[1]

    assert asyncio.run(episode()) == 1.0
    with pytest.raises(ColbenchError, match="reset"):
        gym.make("ColBench-Backend-v1", **vec_kwargs).step(ASK)  # order is still enforced, by the env


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vector_modes_with_their_defaults(mode: str, bundled_tasks: list[Task]) -> None:
    vec = gym.make_vec(
        "ColBench-Backend-v1", num_envs=2, vectorization_mode=mode, tasks="backend-sample", sandbox="bwrap"
    )
    obs, infos = vec.reset(seed=0)
    assert len(obs) == 2 and all("Python function" in o for o in obs)
    obs, *_ = vec.step((ASK, "Any preferences? ünïcødé 漢字 🙂"))
    assert all(isinstance(o, str) and o for o in obs)
    tasks = by_id(bundled_tasks)
    _, rewards, terms, _, _ = vec.step(tuple(answer(tasks[t]) for t in infos["task_id"]))
    assert terms.all() and list(rewards) == [1.0, 1.0]
    vec.close()


def test_human_env_vectorizes(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    vec = gym.make_vec("ColBench-Human-v0", num_envs=2, tasks=bundled_tasks, agent="scripted:copycat", scorer=scorer)
    obs, infos = vec.reset(seed=0)
    assert all("The assistant says:" in o for o in obs)
    tasks = by_id(bundled_tasks)
    # The copycat agent delivers what the human pasted: a human that dictates the reference is penalised.
    _, rewards, terms, _, infos = vec.step([f"```python\n{tasks[t].ground_truth}\n```" for t in infos["task_id"]])
    if not terms.all():
        _, rewards, terms, _, infos = vec.step(["Looks right."] * 2)
    assert terms.all() and (infos["leaks"] >= 1).all() and (rewards <= 0.0).all()
    assert vec.finished(0) is not None and vec.finished(0).messages[1]["role"] == "assistant"
    vec.close()


def test_reference_is_computed_once_for_a_group(bundled_tasks: list[Task], bwrap_sandbox: Any) -> None:
    counted = BackendScorer(bwrap_sandbox)
    calls = []
    judge = counted._judge_reference

    def once(task: Task) -> Any:
        calls.append(task.task_id)
        return judge(task)

    counted._judge_reference = once  # type: ignore[method-assign]
    task = bundled_tasks[5]
    threads = [threading.Thread(target=counted.score, args=(task, answer(task))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [task.task_id]


@pytest.mark.browser
def test_frontend_vector_env(tmp_path: Any) -> None:
    from colbench.tasks import load

    tasks = load("frontend-sample")
    vec = gym.make_vec("ColBench-Frontend-v0", num_envs=2, tasks=tasks, embedder="test", simulator="scripted")
    _, infos = vec.reset(options={"task_id": tasks[0].task_id})
    page = tasks[0].ground_truth
    obs, rewards, terms, _, infos = vec.step([f"I WANT TO ANSWER:\n{page}", "<html><body><p>draft</p></body></html>"])
    assert list(terms) == [True, False] and rewards[0] > 0.99 and infos["similarity"][0] > 0.99
    assert infos["has_page"][1] and isinstance(obs[1], str)
    vec.close()


def test_the_rollout_example_runs(exported_model: Any) -> None:
    import subprocess
    import sys

    script = REPO / "examples" / "rollouts" / "rollout_loop.py"
    done = subprocess.run(
        [sys.executable, str(script), "--tokenizer", str(exported_model), "--num-envs", "4", "--episodes", "8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "scored episodes (0 dropped)" in done.stdout and "the loss sees only those" in done.stdout
    assert "What should the function return for an empty input?" in done.stdout.splitlines()[-1]
