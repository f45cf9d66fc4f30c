"""Gymnasium registration: versioned ids, string entry points (nothing heavy is imported at registration)."""

from __future__ import annotations

import gymnasium as gym

# The turn cap is part of the task and ends the episode with terminated=True (the final answer is scored), so the
# envs get no TimeLimit wrapper: max_episode_steps would report it as truncation.
ENV_IDS = {
    "ColBench-Backend-v0": "colbench.envs.backend.env:BackendEnv",
    "ColBench-Frontend-v0": "colbench.envs.frontend.env:FrontendEnv",
}


def register_envs() -> None:
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)
