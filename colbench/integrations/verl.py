"""verl: ColBench episodes as a verl agent loop (``AgentLoopBase``), for verl's multi-turn PPO/GRPO.

verl's rollout worker makes an agent loop per sample and awaits ``run(sampling_params, **row)``, which must return
the prompt's token ids, the response's token ids and a ``response_mask`` (1 on the policy's tokens, 0 on what the
environment added). ``ColbenchAgentLoop`` plays one ColBench episode: the row's ``task_id`` (``extra_info.task_id``
where set) picks the task, each turn is generated through verl's ``server_manager`` (its inference servers), the
simulated human's reply is appended in the chat template's own markup (``colbench.env.tokens.feedback_text``) with
mask 0, and the env's reward becomes ``reward_score`` (so verl's reward manager is skipped).

A lost episode (an infrastructure failure: the human's endpoint or the sandbox) never raises out of ``run``, which
would fail verl's whole generation step. verl cannot drop one sample of a batch, and ``reward_score`` must be a number
(``None`` hands the sample to the reward manager), so the episode ends with its ``response_mask`` all 0 (verl's loss
aggregation leaves fully masked samples out), ``reward_score`` 0 and ``extra_fields["colbench_lost"]`` True (the
error in ``extra_fields["colbench_error"]``) for the trainer to log.

    # verl config: actor_rollout_ref.rollout.agent.agent_loop_config_path=colbench_loops.yaml, containing
    #   - name: colbench
    #     _target_: colbench.integrations.verl.ColbenchAgentLoop
    # and actor_rollout_ref.rollout.agent.default_agent_loop=colbench (or an agent_name column "colbench")
    # the dataset: colbench.prompt_rows(tasks, max_turns=...) as parquet (its task_id column picks the task; a row's
    #   extra_info.task_id, where set, is used first)
    # the env's options: $COLBENCH_VERL, a JSON object (tasks, max_turns, simulator, simulator_options, ...)
    # (docs/integrations.md shows the whole main_ppo launch; a test composes it with verl's own Hydra config)

Tested with verl 0.9.1 installed with ``--no-deps`` next to its pure-Python needs (ray, tensordict, hydra-core,
codetiming) in a venv of its own: its own dependencies pull the CUDA build of torch, and its hydra needs an antlr4
runtime that clashes with verifiers'. The tests run the loop against a fake server manager standing in for the
inference servers.
"""

from __future__ import annotations

import uuid
from typing import Any

import gymnasium as gym
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.env.tokens import feedback_text
from colbench.errors import ConfigError, InfraError
from colbench.integrations.env_config import default_env_id, env_options
from colbench.types.chat import Message

CONFIG_ENV = "COLBENCH_VERL"


@register("colbench")
class ColbenchAgentLoop(AgentLoopBase):  # type: ignore[misc]
    """One ColBench episode per sample (see the module docstring)."""

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        options = env_options(CONFIG_ENV)
        task_id = (row.get("extra_info") or {}).get("task_id") or row.get("task_id")
        if not task_id:
            raise ConfigError(
                "a verl row for ColBench needs a task_id column (write the rows with colbench.prompt_rows)"
            )
        env = gym.make(options.pop("env_id", None) or default_env_id(), **options)
        assert isinstance(env, TextEnv)
        try:
            return await self._episode(env, str(task_id), sampling_params)
        finally:
            await env.aclose()

    async def _episode(self, env: TextEnv, task_id: str, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        observation, _ = await env.areset(options={"task_id": task_id})
        messages: list[Message] = [{"role": "user", "content": observation}]
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids: list[int] = list(self.tokenizer.encode(prompt, add_special_tokens=False))
        response_ids: list[int] = []
        mask: list[int] = []
        budget = int(self.rollout_config.get("response_length", 1 << 30))
        request_id = uuid.uuid4().hex  # one id for the episode: verl keeps its turns on one server
        reward, turns, error = 0.0, 0, None
        while len(response_ids) < budget:
            out = await self.server_manager.generate(
                request_id, prompt_ids=prompt_ids + response_ids, sampling_params=sampling_params
            )
            generated = list(out.token_ids)[: budget - len(response_ids)]
            response_ids += generated
            mask += [1] * len(generated)
            turns += 1
            action = self.tokenizer.decode(generated, skip_special_tokens=True)
            try:
                reply, reward, terminated, truncated, _ = await env.astep(action)
            except InfraError as exc:  # lost: nothing of it is trained on (module docstring)
                error, reward, mask = f"{type(exc).__name__}: {exc}", 0.0, [0] * len(mask)
                break
            if terminated or truncated:
                break
            feedback = feedback_text(self.tokenizer, messages, action, reply)
            added = self.tokenizer.encode(feedback, add_special_tokens=False)[: budget - len(response_ids)]
            messages += [{"role": "assistant", "content": action}, {"role": "user", "content": reply}]
            response_ids += added
            mask += [0] * len(added)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            reward_score=float(reward),
            num_turns=2 * turns,
            metrics=AgentLoopMetrics(),
            extra_fields={"colbench_task_id": task_id, "colbench_lost": error is not None, "colbench_error": error},
        )
