"""SkyRL-Gym: ColBench made through the real skyrl_gym registry, as SkyRL's generator makes it (env_config, extras
from a dataset row, init, step until done)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from failing_human import FAILING_TURNS, human_failing_at

pytest.importorskip("skyrl_gym")

import skyrl_gym

from colbench.errors import ConfigError
from colbench.integrations.skyrl import ColbenchSkyRLEnv, register, skyrl_rows
from colbench.tasks import Task, load

CONFIG = {"env_id": "ColBench-Backend-v1", "tasks": "backend-sample", "sandbox": "bwrap", "simulator": "scripted"}


def make(row: dict, max_turns: int = 3, **config: Any) -> ColbenchSkyRLEnv:
    register()
    register()  # registering again is a no-op, not SkyRL's duplicate-id error
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": max_turns}
    env = skyrl_gym.make(row["env_class"], env_config=CONFIG | config, extras=extras)
    assert isinstance(env, ColbenchSkyRLEnv)
    return env


def test_an_episode_as_skyrls_generator_plays_it(bundled_tasks: list[Task]) -> None:
    rows = skyrl_rows("backend-sample", max_turns=3)
    assert len(rows) == len(bundled_tasks) and rows[0]["env_class"] == "colbench"
    row = rows[4]
    task = next(t for t in load("backend-sample") if t.task_id == row["extra_info"]["task_id"])
    env = make(row)
    history, info = env.init(row["prompt"])
    assert history == row["prompt"] and info["task_id"] == task.task_id  # the row's prompt is the env's first turn
    out = env.step("What should happen with an empty input?")
    assert not out["done"] and out["reward"] == 0.0 and out["observations"][0]["role"] == "user"
    out = env.step(f"I WANT TO ANSWER:\n{task.ground_truth}")
    assert out["done"] and out["reward"] == 1.0 and out["observations"] == []
    assert out["metadata"]["success"] is True and out["metadata"]["termination"] == "answered"
    metrics = ColbenchSkyRLEnv.aggregate_metrics([env.get_metrics(), {"colbench/success": 0.0}])
    assert metrics["colbench/success"] == 0.5
    env.close()


def test_turn_cap_comes_from_skyrls_max_turns() -> None:
    row = skyrl_rows("backend-sample", max_turns=2)[0]
    env = make(row, max_turns=2)
    env.init(row["prompt"])
    assert not env.step("Question one?")["done"]
    out = env.step("def f(): pass")  # the 2nd turn is the last: its text is the answer
    assert out["done"] and out["metadata"]["termination"] == "turn_limit"


def test_a_row_without_a_task_is_refused() -> None:
    register()
    with pytest.raises(ConfigError, match=r"extra_info\.task_id"):
        skyrl_gym.make("colbench", env_config=dict(CONFIG), extras={"max_turns": 3})


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_a_lost_episode_ends_flagged_without_raising(turn: int) -> None:
    row = skyrl_rows("backend-sample", max_turns=3)[0]
    with human_failing_at(turn) as human:
        env = make(row, **human)
        env.init(row["prompt"])
        outs = [env.step("What should happen with an empty input?") for _ in range(turn)]
    assert [out["done"] for out in outs] == [False] * (turn - 1) + [True]  # the failing turn ends it, no raise
    lost = outs[-1]
    assert lost["metadata"]["colbench_lost"] is True and "HTTP 400" in lost["metadata"]["error"]
    assert lost["reward"] == 0.0 and lost["observations"] == []
    assert env.get_metrics()["colbench/lost"] == 1.0
    env.close()


def test_step_metadata_keeps_the_per_test_details_out() -> None:
    """SkyRL keeps every step's metadata in its batches: scalar facts only, not the per-test details (about 4 KB a
    step before) nor the answer's text (the policy's own last turn)."""
    row = skyrl_rows("backend-sample", max_turns=3)[4]
    task = next(t for t in load("backend-sample") if t.task_id == row["extra_info"]["task_id"])
    env = make(row)
    env.init(row["prompt"])
    outs = [env.step("What should happen with an empty input?"), env.step(f"I WANT TO ANSWER:\n{task.ground_truth}")]
    for out in outs:
        metadata = out["metadata"]
        assert all(isinstance(v, str | int | float | bool | type(None)) for v in metadata.values()), metadata
        assert len(json.dumps(metadata)) < 1024
    final = outs[-1]["metadata"]
    assert "score" not in final and "answer" not in final
    assert final["success"] is True and final["tests_passed"] == final["tests_total"] > 0 and final["pass_rate"] == 1.0
    env.close()
