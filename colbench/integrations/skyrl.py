"""SkyRL-Gym: ColBench as a ``BaseTextEnv`` for the SkyRL trainer.

SkyRL's generator makes one env per sample with ``skyrl_gym.make(env_class, env_config=..., extras=row)``, calls
``init(prompt)``, then ``step(policy_text)`` until ``done``; it templates the observations as user turns and masks
their tokens out of the loss itself. Here each instance plays one ColBench episode: ``env_config`` (SkyRL's
``environment.skyrl_gym.colbench`` section) says which env and its options (``env_id``, ``tasks``, ``simulator``,
``simulator_options``, ``sandbox``, ``leak_policy``...), the dataset row says which task
(``extra_info.task_id``, written by ``skyrl_rows``), and SkyRL's ``generator.max_turns`` is the turn cap. SkyRL's
typed config refuses keys it does not know, so that section exists only in colbench's config subclass: launch with
``python -m colbench.integrations.skyrl_train`` (:mod:`colbench.integrations.skyrl_train`), which registers the env
and hands the section to each instance as a ``ColbenchEnvConfig`` dataclass.

    from colbench.integrations.skyrl import skyrl_rows
    rows = skyrl_rows("backend-test", max_turns=10)   # -> parquet for SkyRL's data.train_data

Step metadata holds the step's scalar facts only (``success``, ``pass_rate``, ``termination``, leak counts...): the
final answer is already the policy's last turn and the per-test details stay in colbench's own records, so neither
travels with every step into SkyRL's batches and logs.

A lost episode (an infrastructure failure: the human's endpoint or the sandbox) never raises out of ``step``: a raise
would abort SkyRL's whole generation batch. SkyRL-Gym's env protocol has no way to drop an episode or mask its tokens
(the generator owns the loss mask), so the episode ends with reward 0 and ``metadata["colbench_lost"]`` (with
``metadata["error"]``), and ``get_metrics`` reports ``colbench/lost`` for the trainer to log and filter on. Tested with
skyrl-gym 0.4.0 (the ``skyrl`` extra).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

import colbench  # noqa: F401 (registers the ids)
from colbench.env.dataset import prompt_rows
from colbench.errors import ConfigError, InfraError
from colbench.integrations.env_config import default_env_id
from colbench.tasks.sources import load_shared
from colbench.types.dialogue import MAX_TURNS
from colbench.types.task import Task

ENV_CLASS = "colbench"


def register(env_class: str = ENV_CLASS) -> None:
    """Register ``ColbenchSkyRLEnv`` with SkyRL-Gym under ``env_class`` (once; again is a no-op)."""
    if env_class not in skyrl_gym.registry:
        skyrl_gym.register(id=env_class, entry_point=f"{__name__}:ColbenchSkyRLEnv")


def skyrl_rows(
    tasks: str | Sequence[Task], *, max_turns: int = MAX_TURNS, env_class: str = ENV_CLASS
) -> list[dict[str, Any]]:
    """Dataset rows in SkyRL's format: ``prompt`` (the agent's first observation), ``env_class`` and
    ``extra_info.task_id`` (every column but ``prompt`` and ``env_class`` reaches the env as ``extras``)."""
    chosen = load_shared(tasks) if isinstance(tasks, str) else list(tasks)
    return [
        {"prompt": row["prompt"], "env_class": env_class, "extra_info": {"task_id": row["task_id"]}}
        for row in prompt_rows(chosen, max_turns=max_turns)
    ]


class ColbenchSkyRLEnv(BaseTextEnv):  # type: ignore[misc]
    """One ColBench episode in SkyRL's text-env protocol (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = _plain(env_config)
        extras = dict(extras or {})
        task_id = (extras.get("extra_info") or {}).get("task_id")
        if not task_id:
            raise ConfigError("a SkyRL row for ColBench needs extra_info.task_id (build rows with skyrl_rows)")
        self.task_id = str(task_id)
        self.max_turns = int(extras.get("max_turns") or config.pop("max_turns", MAX_TURNS))
        self.env = gym.make(config.pop("env_id", None) or default_env_id(), max_turns=self.max_turns, **config)
        self._last: dict[str, Any] = {}

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The episode's first observation replaces the row's prompt (they are the same text when the rows come
        from ``skyrl_rows`` with the same turn cap)."""
        observation, info = self.env.reset(options={"task_id": self.task_id})
        return [{"role": "user", "content": observation}], _jsonable(info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
        except InfraError as exc:  # a number is all SkyRL takes: end the episode, flagged (module docstring)
            self._last = {"colbench_lost": True, "error": f"{type(exc).__name__}: {exc}"}
            return BaseTextEnvStepOutput(observations=[], reward=0.0, done=True, metadata=self._last)
        done = bool(terminated or truncated)
        self._last = _jsonable(info)
        messages = [] if done else [{"role": "user", "content": observation}]
        return BaseTextEnvStepOutput(observations=messages, reward=float(reward), done=done, metadata=self._last)

    def get_metrics(self) -> dict[str, Any]:
        return {
            "colbench/success": float(bool(self._last.get("success"))),
            "colbench/leaks": float(self._last.get("leaks") or 0),
            "colbench/lost": float(bool(self._last.get("colbench_lost"))),
        }

    @staticmethod
    def aggregate_metrics(metrics: list[dict[str, Any]]) -> dict[str, Any]:
        keys = {k for m in metrics for k in m}
        return {k: sum(float(m.get(k, 0.0)) for m in metrics) / max(len(metrics), 1) for k in sorted(keys)}

    def close(self) -> None:
        self.env.close()


def _plain(config: Any) -> dict[str, Any]:
    """The env's options as keywords: SkyRL's trainer passes its typed section (a ``ColbenchEnvConfig`` dataclass,
    whose unset fields are left to the env's defaults), older SkyRL an OmegaConf section, a direct caller a dict."""
    if config is None:
        return {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        fields = dataclasses.asdict(config)
        extra = fields.pop("options", None) or {}
        return {k: v for k, v in fields.items() if v is not None} | dict(extra)
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(config):
            return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - omegaconf comes with skyrl-gym
        pass
    return dict(config)


_NOT_IN_METADATA = frozenset({"answer"})  # the policy's own last turn, already in SkyRL's trajectory


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    """``info``'s scalar facts: what SkyRL keeps per step in its batches and logs. The per-test details
    (``info["score"]``), claim lists and the answer's text stay in colbench's own records (module docstring)."""
    return {
        k: v
        for k, v in info.items()
        if k not in _NOT_IN_METADATA and isinstance(v, str | int | float | bool | type(None))
    }
