"""verifiers: ColBench as a ``MultiTurnEnv``, with a ``load_environment()`` entry for verifiers' tooling.

verifiers' ``vf.load_environment(env_id, **args)`` imports the module named by the env id and calls its
``load_environment(**args)``; this module is that module, so ``vf.load_environment("colbench.integrations.verifiers",
tasks="backend-sample")`` and ``vf-eval colbench.integrations.verifiers -a '{"tasks": "backend-sample"}'`` work once
colbench is installed with the ``verifiers`` extra.

Each rollout plays one ColBench episode: the dataset row's ``info.task_id`` picks the task, the policy (the model
verifiers evaluates or trains) writes the agent's turns, ``env_response`` sends each to the env (the simulated
human, on its own endpoint, answers; the final answer is scored) and ends the rollout when the episode ends. The
rubric reads the episode's reward from the rollout's state; a rollout lost to an infrastructure error (the human's
endpoint or the sandbox, at any turn) raises ``vf.InfraError``, which verifiers records as the rollout's ``error``
(stop condition ``has_error``): its trainers (prime-rl) mask such rollouts out and log their rate. Tested with
verifiers 0.3.1 (0.4.0 removed ``MultiTurnEnv``: docs/integrations.md, pins).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import verifiers as vf
from datasets import Dataset

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.env.dataset import prompt_rows
from colbench.errors import InfraError
from colbench.tasks.sources import load_shared
from colbench.types.dialogue import MAX_TURNS


class ColbenchEnv(vf.MultiTurnEnv):  # type: ignore[misc]
    """One ColBench episode per rollout (see the module docstring). ``env_kwargs`` make the colbench env
    (``simulator``, ``simulator_options``, ``sandbox``, ``leak_policy``, ...)."""

    def __init__(
        self,
        env_id: str = "ColBench-Backend-v1",
        tasks: str = "backend-test",
        max_turns: int = MAX_TURNS,
        env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        rows = [
            {"prompt": row["prompt"], "answer": "", "info": {"task_id": row["task_id"]}}
            for row in prompt_rows(load_shared(tasks), max_turns=max_turns)
        ]
        rubric = vf.Rubric(funcs=[colbench_reward, colbench_leaks], weights=[1.0, 0.0])
        # verifiers checks its turn cap before each env_response; one more than ColBench's lets the last agent turn
        # reach the env and be scored (the env ends the rollout itself).
        super().__init__(dataset=Dataset.from_list(rows), rubric=rubric, max_turns=max_turns + 1, **kwargs)
        self.colbench_env_id, self.colbench_tasks, self.colbench_max_turns = env_id, tasks, max_turns
        self.colbench_env_kwargs = dict(env_kwargs or {})

    async def setup_state(self, state: vf.State) -> vf.State:
        env = gym.make(
            self.colbench_env_id,
            tasks=self.colbench_tasks,
            max_turns=self.colbench_max_turns,
            **self.colbench_env_kwargs,
        )
        assert isinstance(env, TextEnv)  # gym.make returns colbench's env itself, with its async API
        await env.areset(options={"task_id": state["info"]["task_id"]})
        state["colbench_env"] = env
        state["colbench_reward"] = None
        state["colbench_leaks"] = 0
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        env = state["colbench_env"]
        try:
            observation, reward, terminated, truncated, info = await env.astep(str(messages[-1]["content"]))
        except InfraError as exc:  # verifiers' own infrastructure error: the rollout's error, never a score
            env.close()
            raise vf.InfraError(f"{type(exc).__name__}: {exc}") from exc
        state["colbench_leaks"] = int(info.get("leaks") or 0)
        if terminated or truncated:
            state["colbench_reward"] = float(reward)
            state["colbench_info"] = {k: info[k] for k in ("success", "termination", "turn") if k in info}
            await env.aclose()
            done = [{"role": "user", "content": f"(episode over: reward {reward:.3f})"}]
            state["final_env_response"] = done
            return done
        return [{"role": "user", "content": observation}]


def colbench_reward(state: vf.State, **_: Any) -> float:
    """The env's reward: fraction of tests passed (backend), CLIP cosine (frontend)."""
    return float(state.get("colbench_reward") or 0.0)


def colbench_leaks(state: vf.State, **_: Any) -> float:
    """Replies of the simulated human flagged as leaks (a metric, weight 0; docs/leaks.md)."""
    return float(state.get("colbench_leaks") or 0)


def load_environment(
    env_id: str = "ColBench-Backend-v1",
    tasks: str = "backend-test",
    max_turns: int = MAX_TURNS,
    **env_kwargs: Any,
) -> ColbenchEnv:
    """verifiers' entry point: ``env_kwargs`` go to the colbench env (``simulator``, ``simulator_options``,
    ``sandbox``, ``leak_policy``...)."""
    return ColbenchEnv(env_id=env_id, tasks=tasks, max_turns=max_turns, env_kwargs=env_kwargs)
