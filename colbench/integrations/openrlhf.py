"""OpenRLHF: ColBench episodes as an OpenRLHF multi-turn agent (``--train.agent_func_path``).

OpenRLHF loads the agent file it is given and makes the ``AgentExecutor`` class it finds there; the executor makes
one agent instance per sample (with no arguments), calls ``reset`` with the prompt and the dataset's label, then
``step`` with each generated turn, and appends the text each step returns to the context (the tokens the policy did
not generate are out of the loss). Here the label is the task id, each instance plays one ColBench episode, and the
text appended after a turn is the simulated human's reply in the chat template's own markup. ``reset`` refuses a
prompt that is not the env's first observation (a dataset written for another turn cap, or other tasks).

A lost episode (an infrastructure failure: the human's endpoint or the sandbox) never raises out of the executor,
which would fail OpenRLHF's whole generation step. OpenRLHF cannot drop one sample, and its rewards are numbers, so
the episode ends with reward 0, its ``action_ranges`` emptied (no token of it is trained: OpenRLHF's loss leaves fully
masked samples out) and ``colbench_lost`` 1 in ``extra_logs``, which OpenRLHF logs.

Every episode's ``extra_logs`` has the same keys (``LOGS``), however it ended (answered, at the turn cap, cut by
OpenRLHF's ``--data.max_len``, lost): OpenRLHF batches them per key, and a key that only some samples of a batch have
fails its experience split. An episode cut by the length budget is OpenRLHF's: it keeps the reward so far (0) and is
trained as played; its env is closed all the same.

    # colbench_agent.py, the file for --train.agent_func_path:
    from colbench.integrations.openrlhf import AgentExecutor  # noqa: F401
    # and in the trainer's environment (the instances take no arguments):
    COLBENCH_OPENRLHF='{"tasks": "backend-test", "max_turns": 10, "tokenizer": "/path/to/policy",
                       "simulator": "openai:MODEL", "simulator_options": {"base_url": "http://human:8000/v1"}}'
    # the dataset: colbench.prompt_rows(tasks, max_turns=...) as JSONL (the same tasks and turn cap), given as
    #   --data.prompt_dataset FILE --data.input_key prompt --data.label_key task_id --data.apply_chat_template
    # (docs/integrations.md shows the whole train_ppo_ray launch; a test feeds it to OpenRLHF's own parser)

Tested with openrlhf 0.11.2 installed with ``--no-deps`` (its own dependencies include a flash-attn build that
needs a GPU machine); the executor runs against a fake engine in the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import ContextVar
from functools import cache
from typing import Any

import gymnasium as gym
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.env.tokens import feedback_text
from colbench.errors import ConfigError, InfraError
from colbench.integrations.env_config import default_env_id, env_options
from colbench.types.chat import Message

CONFIG_ENV = "COLBENCH_OPENRLHF"
LOST = "colbench_lost"
SUCCESS = "colbench_success"
LEAKS = "colbench_leaks"
LOGS = (SUCCESS, LEAKS, LOST)  # the extra_logs of every episode, whatever ended it

log = logging.getLogger(__name__)


@cache
def _tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


# The agent instances the running AgentExecutor.execute made (OpenRLHF makes them inside it, out of the executor's
# reach), so that an episode OpenRLHF cuts before it ends still has its env closed.
_MADE: ContextVar[list[ColbenchAgentInstance] | None] = ContextVar("colbench_openrlhf_instances", default=None)


class ColbenchAgentInstance(AgentInstanceBase):  # type: ignore[misc]
    """One ColBench episode (see the module docstring); ``config`` defaults to ``$COLBENCH_OPENRLHF``."""

    def __init__(self, *args: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        options = dict(config) if config is not None else env_options(CONFIG_ENV, required=("tokenizer",))
        self.tokenizer = _tokenizer(options.pop("tokenizer"))
        env = gym.make(options.pop("env_id", None) or default_env_id(), **options)
        assert isinstance(env, TextEnv)
        self.env = env
        self.messages: list[Message] = []
        self._closed = False
        made = _MADE.get()
        if made is not None:
            made.append(self)

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        observation, _ = await self.env.areset(options={"task_id": str(states["label"])})
        if observation.strip() not in str(states["observation"]):  # the row was written for other tasks or turns
            cap = getattr(self.env, "max_turns", "(the env's)")
            raise ConfigError(
                f"OpenRLHF's prompt for task {states['label']} is not the env's first observation: write the dataset "
                f"with colbench.prompt_rows of the env's tasks and max_turns={cap}"
            )
        self.messages = [{"role": "user", "content": observation}]
        return {"observation": states["observation"]}  # the prompt as OpenRLHF templated it: the same first turn

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        action = str(states["action_text"])
        try:
            observation, reward, terminated, truncated, info = await self.env.astep(action)
        except InfraError as exc:  # lost: AgentExecutor masks it out (module docstring)
            log.warning("colbench episode lost (task %s): %s: %s", states["label"], type(exc).__name__, exc)
            await self.aclose()
            return _result(0.0, "", True, _logs(lost=1.0))
        done = bool(terminated or truncated)
        feedback = "" if done else feedback_text(self.tokenizer, self.messages, action, observation)
        self.messages.append({"role": "assistant", "content": action})
        if not done:
            self.messages.append({"role": "user", "content": observation})
        success = float(bool(info.get("success"))) if done else 0.0
        if done:
            await self.aclose()
        return _result(float(reward), feedback, done, _logs(success=success, leaks=float(info.get("leaks") or 0)))

    async def aclose(self) -> None:
        """Close the env and its model clients' HTTP pools on OpenRLHF's loop (once)."""
        if not self._closed:
            self._closed = True
            await self.env.aclose()


def _logs(*, success: float = 0.0, leaks: float = 0.0, lost: float = 0.0) -> dict[str, float]:
    """An episode's ``extra_logs``: every key of ``LOGS``, always."""
    return {SUCCESS: success, LEAKS: leaks, LOST: lost}


def _result(reward: float, feedback: str, done: bool, logs: dict[str, float]) -> dict[str, Any]:
    return {
        "rewards": torch.tensor(reward),  # the trainer calls .item() on it and sums over the steps
        "scores": torch.tensor(reward),
        "environment_feedback": feedback,
        "done": done,
        "extra_logs": {key: torch.tensor(value) for key, value in logs.items()},
    }


class AgentExecutor(MultiTurnAgentExecutor):  # type: ignore[misc]
    """What OpenRLHF looks up in the agent file."""

    def __init__(self) -> None:
        super().__init__(ColbenchAgentInstance)

    async def execute(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """OpenRLHF's episode, with a lost one's tokens taken out of the loss (its action mask comes from
        ``action_ranges`` alone), the same log keys for every episode (one cut before its first step has none), and
        the env closed however the episode ended."""
        made: list[ColbenchAgentInstance] = []
        token = _MADE.set(made)
        try:
            response: dict[str, Any] = await super().execute(*args, **kwargs)
        finally:
            _MADE.reset(token)
            for instance in made:
                await instance.aclose()
        logs = response["extra_logs"]
        response["extra_logs"] = {key: logs.get(key, torch.tensor(0.0)) for key in LOGS}
        if float(response["extra_logs"][LOST]):
            response["action_ranges"] = []
        return response
