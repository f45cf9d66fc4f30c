"""verifiers: ColBench as a verifiers environment, on its current API (``verifiers.v1``: a ``Taskset`` and an ``Env``).

verifiers 0.4.0 keeps only this API (0.3.x ships it beside the older ``MultiTurnEnv``, so one adapter serves both).
verifiers finds an environment by its taskset id: a top-level module exporting one ``Taskset`` and one ``Env``
subclass in ``__all__`` (a dotted id fails its plugin lookup). The wheel ships that module, ``colbench_verifiers``
(it re-exports this module's classes), so the id ``colbench_verifiers`` loads in verifiers' CLI, prime-rl and
``colbench_env(...)`` alike with nothing for the user to write.

Each episode plays one ColBench task: the policy (the ``agent`` seat, verifiers' tool-less ``null`` chat harness by
default, in a local subprocess: it runs no code) answers the task's prompt, ``run`` hands each reply to the colbench
env and each of the simulated human's replies back as the next user turn, until the episode ends. The human is not a
verifiers agent: it is colbench's simulator on its own endpoint (``env_options``), so only the policy's tokens are
ever on a trainable trace. The env's reward is recorded on the policy's trace (``colbench_reward``, weight 1), with
``colbench_leaks`` and ``colbench_success`` as metrics.

A lost episode (an infrastructure failure: the human's endpoint or the sandbox, at any turn) raises out of ``run``,
which verifiers records as the episode's error (``episode.errors``, ``episode.ok`` False) and never as a reward;
verifiers' trainer (prime-rl) masks such episodes out and logs their rate.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import verifiers.v1 as vf
from pydantic import Field

import colbench  # noqa: F401 (registers the ids)
from colbench._util.version import RESOLVED_AT
from colbench.env.core import TextEnv
from colbench.env.dataset import prompt_rows
from colbench.integrations.env_config import default_env_id
from colbench.tasks.sources import load_shared
from colbench.types.dialogue import MAX_TURNS

__all__ = ["ColbenchEnv", "ColbenchTaskset", "colbench_env"]

TASKSET_ID = "colbench_verifiers"  # the top-level module verifiers' loader imports (colbench_verifiers/__init__.py)


class ColbenchTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """Which ColBench tasks, under which turn cap (the prompt states the cap)."""

    tasks: str = "backend-test"
    max_turns: int = MAX_TURNS


class ColbenchTask(vf.Task):  # type: ignore[misc]
    """A ColBench task as verifiers runs it. The policy's harness is a uv script that resolves its own dependencies
    when first run; its processes get ``UV_EXCLUDE_NEWER``, the date colbench's own dependencies were resolved at
    (``constraints.txt``), so the harness gets the releases colbench was tested with, not whatever came out since
    (an httpx2 release once broke it). A ``UV_EXCLUDE_NEWER`` of the user's own wins."""

    def runtime_env(self) -> dict[str, str]:
        return {} if "UV_EXCLUDE_NEWER" in os.environ else {"UV_EXCLUDE_NEWER": RESOLVED_AT}


class ColbenchTaskset(vf.Taskset[vf.Task, ColbenchTasksetConfig]):  # type: ignore[misc]
    """One verifiers task per ColBench task: its id as the name, the agent's first observation as the prompt."""

    def load(self) -> Iterator[vf.Task]:
        for row in prompt_rows(load_shared(self.config.tasks), max_turns=self.config.max_turns):
            data = vf.TaskData(name=row["task_id"], prompt=row["prompt"][0]["content"])  # 0.3.x has no id field
            yield ColbenchTask(data, self.config.task)


class ColbenchEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    """The policy's seat and the colbench env's options (``env_id``, ``simulator``, ``simulator_options``,
    ``sandbox``, ``leak_policy``...)."""

    agent: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime={"type": "subprocess"})
    env_options: dict[str, Any] = Field(default_factory=dict)


class ColbenchEnv(vf.Env[ColbenchEnvConfig]):  # type: ignore[misc]
    """One ColBench episode per verifiers episode (see the module docstring)."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        options = dict(self.config.env_options)
        taskset = self.config.taskset
        env_id = options.pop("env_id", None) or default_env_id()
        env = gym.make(env_id, tasks=taskset.tasks, max_turns=taskset.max_turns, **options)
        assert isinstance(env, TextEnv)  # gym.make returns colbench's env itself, with its async API
        try:
            await env.areset(options={"task_id": task.data.name})
            async with agents.agent.interaction(task) as policy:
                reply = await policy.turn()  # the task's prompt is the env's first observation
                while not reply.terminated:
                    observation, reward, terminated, truncated, info = await env.astep(reply.last_reply)
                    if terminated or truncated:
                        policy.trace.record_reward("colbench_reward", float(reward))
                        policy.trace.record_metric("colbench_success", float(bool(info.get("success"))))
                        policy.trace.record_metric("colbench_leaks", float(info.get("leaks") or 0))
                        return
                    reply = await policy.turn(observation)
        finally:
            await env.aclose()


def colbench_env(
    tasks: str = "backend-test", max_turns: int = MAX_TURNS, agent: vf.AgentConfig | None = None, **env_options: Any
) -> ColbenchEnv:
    """The env as verifiers' loader makes it from a run config; ``env_options`` go to the colbench env, ``agent``
    overrides the policy's seat (its harness, runtime, turn limit)."""
    taskset = ColbenchTasksetConfig(id=TASKSET_ID, tasks=tasks, max_turns=max_turns)
    seat = {} if agent is None else {"agent": agent}
    env = vf.load_environment(ColbenchEnvConfig(taskset=taskset, env_options=env_options, **seat))
    assert isinstance(env, ColbenchEnv)
    return env
