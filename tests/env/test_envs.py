"""Every registered env id passes Gymnasium's checker with offline parts (scripted human, local sandbox, test embedder)."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.registration import env_ids
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task, load
from colbench.types.task import PlusTests


def offline_kwargs(env_id: str, request: pytest.FixtureRequest) -> dict[str, object]:
    human = ScriptedSimulator(["Make it simpler."])
    if env_id in ("ColBench-Backend-v0", "ColBench-Backend-v1", "ColBench-Backend-v2"):
        tasks: list[Task] = request.getfixturevalue("bundled_tasks")
        kwargs = gym.spec(env_id).kwargs
        plus = bool(kwargs.get("plus_tests"))
        if plus:  # v2 judges plus tests: each task's first call again, under a name of its own
            tasks = [replace(t, plus=PlusTests((("plus1", t.test_cases[0][1]),), "hand/0")) for t in tasks]
        scorer = BackendScorer(request.getfixturevalue("bwrap_sandbox"), rules=kwargs["rules"], plus=plus)
        return {"tasks": tasks, "simulator": human, "scorer": scorer}
    if env_id == "ColBench-Human-v0":
        tasks = request.getfixturevalue("bundled_tasks")
        return {"tasks": tasks, "agent": "scripted:copycat", "scorer": request.getfixturevalue("scorer")}
    if env_id == "ColBench-Frontend-v0":
        request.applymarker(pytest.mark.browser)
        return {
            "tasks": load("frontend-sample"),
            "simulator": human,
            "embedder": "test",  # the process's shared renderer: gym deep-copies kwargs, a browser cannot be copied
        }
    raise AssertionError(f"{env_id} is registered but has no offline configuration in this test: add one")


@pytest.mark.parametrize("env_id", env_ids())
def test_check_env_on_every_registered_id(env_id: str, request: pytest.FixtureRequest) -> None:
    env = gym.make(env_id, **offline_kwargs(env_id, request))
    check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset(seed=1)
    assert isinstance(obs, str) and info["turn"] == 0
    if env_id != "ColBench-Human-v0":  # the human's env scores the agent's answer, under the backend's current id
        assert info["env_id"] == env_id
    env.close()
