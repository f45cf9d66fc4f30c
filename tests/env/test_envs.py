"""Every registered env id passes Gymnasium's checker with offline parts (scripted human, local sandbox, test embedder)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.registration import env_ids
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task, load


def offline_kwargs(env_id: str, request: pytest.FixtureRequest) -> dict[str, object]:
    human = ScriptedSimulator(["Make it simpler."])
    if env_id in ("ColBench-Backend-v0", "ColBench-Backend-v1"):
        tasks: list[Task] = request.getfixturevalue("bundled_tasks")
        rules = gym.spec(env_id).kwargs["rules"]
        scorer = BackendScorer(request.getfixturevalue("bwrap_sandbox"), rules=rules)
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
    env.close()
