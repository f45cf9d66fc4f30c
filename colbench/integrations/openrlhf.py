"""OpenRLHF: ColBench episodes as an OpenRLHF multi-turn agent (``--train.agent_func_path``).

OpenRLHF loads the agent file it is given and makes the ``AgentExecutor`` class it finds there; the executor makes
one agent instance per sample (with no arguments), calls ``reset`` with the prompt and the dataset's label, then
``step`` with each generated turn, and appends the text each step returns to the context (the tokens the policy did
not generate are out of the loss). Here the label is the task id, each instance plays one ColBench episode, and the
text appended after a turn is the simulated human's reply in the chat template's own markup.

A lost episode (an infrastructure failure: the human's endpoint or the sandbox) never raises out of the executor,
which would fail OpenRLHF's whole generation step. OpenRLHF cannot drop one sample, and its rewards are numbers, so
the episode ends with reward 0, its ``action_ranges`` emptied (no token of it is trained: OpenRLHF's loss leaves fully
masked samples out) and ``colbench_lost`` 1 in ``extra_logs``, which OpenRLHF logs.

    # colbench_agent.py, the file for --train.agent_func_path:
    from colbench.integrations.openrlhf import AgentExecutor  # noqa: F401
    # and in the trainer's environment (the instances take no arguments):
    COLBENCH_OPENRLHF='{"tasks": "backend-test", "max_turns": 10, "tokenizer": "/path/to/policy",
                       "simulator": "openai:MODEL", "simulator_options": {"base_url": "http://human:8000/v1"}}'
    # the dataset: colbench.prompt_rows(...) with --input_key prompt --label_key task_id --apply_chat_template

Tested with openrlhf 0.11.2 installed with ``--no-deps`` (its own dependencies include a flash-attn build that
needs a GPU machine); the executor runs against a fake engine in the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cache
from typing import Any

import gymnasium as gym
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.env.tokens import feedback_text
from colbench.errors import InfraError
from colbench.integrations.env_config import env_options
from colbench.types.chat import Message

CONFIG_ENV = "COLBENCH_OPENRLHF"
LOST = "colbench_lost"

log = logging.getLogger(__name__)


@cache
def _tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


class ColbenchAgentInstance(AgentInstanceBase):  # type: ignore[misc]
    """One ColBench episode (see the module docstring); ``config`` defaults to ``$COLBENCH_OPENRLHF``."""

    def __init__(self, *args: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        options = dict(config) if config is not None else env_options(CONFIG_ENV, required=("tokenizer",))
        self.tokenizer = _tokenizer(options.pop("tokenizer"))
        env = gym.make(options.pop("env_id", "ColBench-Backend-v1"), **options)
        assert isinstance(env, TextEnv)
        self.env = env
        self.messages: list[Message] = []

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        observation, _ = await self.env.areset(options={"task_id": str(states["label"])})
        self.messages = [{"role": "user", "content": observation}]
        return {"observation": states["observation"]}  # the prompt as OpenRLHF templated it: the same first turn

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        action = str(states["action_text"])
        try:
            observation, reward, terminated, truncated, info = await self.env.astep(action)
        except InfraError as exc:  # lost: AgentExecutor masks it out (module docstring)
            log.warning("colbench episode lost (task %s): %s: %s", states["label"], type(exc).__name__, exc)
            self.env.close()
            return _result(0.0, "", True, {LOST: 1.0})
        done = bool(terminated or truncated)
        feedback = "" if done else feedback_text(self.tokenizer, self.messages, action, observation)
        self.messages.append({"role": "assistant", "content": action})
        if not done:
            self.messages.append({"role": "user", "content": observation})
        logs = {"colbench_leaks": float(info.get("leaks") or 0), LOST: 0.0}
        if done:
            logs["colbench_success"] = float(bool(info.get("success")))
            self.env.close()
        return _result(float(reward), feedback, done, logs)


def _result(reward: float, feedback: str, done: bool, logs: dict[str, Any]) -> dict[str, Any]:
    numbers = {k: torch.tensor(v) for k, v in logs.items() if isinstance(v, float)}
    return {
        "rewards": torch.tensor(reward),  # the trainer calls .item() on it and sums over the steps
        "scores": torch.tensor(reward),
        "environment_feedback": feedback,
        "done": done,
        "extra_logs": numbers,
    }


class AgentExecutor(MultiTurnAgentExecutor):  # type: ignore[misc]
    """What OpenRLHF looks up in the agent file."""

    def __init__(self) -> None:
        super().__init__(ColbenchAgentInstance)

    async def execute(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """OpenRLHF's episode, with a lost one's tokens taken out of the loss: its action mask comes from
        ``action_ranges`` alone."""
        response: dict[str, Any] = await super().execute(*args, **kwargs)
        if float(response["extra_logs"].get(LOST, 0.0)):
            response["action_ranges"] = []
        return response
