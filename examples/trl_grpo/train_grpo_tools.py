"""GRPO with TRL's ``environment_factory`` on ColBench: the policy talks to the simulated human and delivers its answer
through tool calls (``ask_human``, ``submit_answer``); one ColBench env per rollout scores it. TRL trains on the
tokens the policy sampled and masks the tool responses (the human's replies) out of the loss.

    # CPU smoke (the embedded SmolLM2-135M, a scripted human, 2 steps): shows the plumbing; a 135M model rarely
    # writes a tool call, so most rollouts end without an answer and score 0
    python examples/trl_grpo/train_grpo_tools.py --max_steps 2 --cpu
    # GPU: a tool-calling policy (its own chat template), a real human on its own OpenAI-compatible server
    python examples/trl_grpo/train_grpo_tools.py --model Qwen/Qwen3-8B --no_chatml_tools --tasks backend-test \\
        --max_turns 10 --max_completion_length 4096 --simulator openai:Qwen/Qwen2.5-72B-Instruct \\
        --simulator_base_url http://human:8000/v1 --num_generations 8 --batch_size 8 --max_steps 500 --bf16

Writes OUT/metrics.json (loss, reward, tool calls per rollout and the ColBench diagnostics, per step) and the trained
model to OUT/model. The
flags and steps it shares with train_grpo.py are in grpo_lib.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_lib import GRPOFlags, env_options, grpo_trainer, load_policy, train_and_save, training_tasks
from transformers import HfArgumentParser

from colbench.integrations.chatml_tools import with_tool_calling
from colbench.integrations.diagnostics import PREFIX
from colbench.integrations.trl import DiagnosticsCallback
from colbench.integrations.trl_environment import ColbenchToolEnv, environment_rewards, tool_dataset


@dataclass
class Config(GRPOFlags):
    """GRPO on ColBench through tools (every field, and every one of grpo_lib.GRPOFlags, is a command-line flag).
    ``--max_turns``: tool calls that reach the env, the questions and the answer."""

    chatml_tools: bool = True  # give the model colbench's ChatML tool template (for ChatML models without one)
    max_completion_length: int = 256  # the whole rollout's tokens: the policy's turns and the tool responses
    out: str = "runs/trl_grpo_tools"


def tool_settings(config: Config) -> dict[str, Any]:
    """This script's own ``GRPOConfig`` settings (beside grpo_lib's shared ones)."""
    return {
        "max_completion_length": config.max_completion_length,
        "max_tool_calling_iterations": config.max_turns + 1,  # one more than the env allows: it refuses it
        "gradient_checkpointing": not config.cpu,  # on CPU it makes generation recompute the context per token
    }


def main(config: Config) -> dict[str, list[float]]:
    model, tokenizer = load_policy(config)
    if config.chatml_tools:
        tokenizer = with_tool_calling(tokenizer)
    tasks = training_tasks(config)
    environment = ColbenchToolEnv.factory(config.env_id, tasks=tasks, max_turns=config.max_turns, **env_options(config))
    settings = tool_settings(config)
    # The env's reward comes from ColbenchToolEnv.get_reward, which TRL adds itself (weight 1): only the penalty here.
    reward_funcs = environment_rewards("leak_penalty")
    dataset = tool_dataset(tasks, max_turns=config.max_turns)
    trainer = grpo_trainer(
        config, model, tokenizer, dataset, reward_funcs, [config.leak_weight], settings, environment_factory=environment
    )
    DiagnosticsCallback.attach(trainer, environment)
    fields = {"loss": "loss", "reward": "reward", "tool_calls": "tools/call_frequency"}
    return train_and_save(trainer, config, fields, prefix=PREFIX)


if __name__ == "__main__":
    (parsed,) = HfArgumentParser(Config).parse_args_into_dataclasses()
    main(parsed)
