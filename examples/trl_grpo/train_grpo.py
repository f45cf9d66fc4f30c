"""GRPO with TRL on ColBench: whole multi-turn episodes as rollouts, the simulated human on its own endpoint, no loss
on the human's tokens. The counterpart of examples/sweet_rl/ for an online, critic-free method.

    # CPU smoke (the embedded SmolLM2-135M, a scripted human, 2 steps; a minute or two on 2 cores):
    python examples/trl_grpo/train_grpo.py --max_steps 2 --cpu
    # GPU (a real policy and a real human on its own OpenAI-compatible server):
    python examples/trl_grpo/train_grpo.py --model Qwen/Qwen2.5-7B-Instruct --tasks backend-test --max_turns 10 \\
        --turn_tokens 512 --simulator openai:Qwen/Qwen2.5-72B-Instruct --simulator_base_url http://human:8000/v1 \\
        --num_generations 8 --batch_size 8 --max_steps 500 --bf16

Writes OUT/metrics.json (the trainer's log per step: loss, reward, and the ColBench diagnostics: reward and success
without lost episodes, leak rate, turns, answer length, the policy's entropy per turn; docs/rl.md says why to watch
them) and the trained model to OUT/model. The flags and steps it shares with train_grpo_tools.py are in grpo_lib.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_lib import GRPOFlags, env_options, grpo_trainer, load_policy, train_and_save, training_tasks
from transformers import HfArgumentParser

from colbench import prompt_dataset
from colbench.integrations.diagnostics import PREFIX
from colbench.integrations.trl import ColbenchRollout, DiagnosticsCallback, reward_functions


@dataclass
class Config(GRPOFlags):
    """GRPO on ColBench (every field, and every one of grpo_lib.GRPOFlags, is a command-line flag)."""

    turn_tokens: int = 32  # new tokens per agent turn


def main(config: Config) -> dict[str, list[float]]:
    model, tokenizer = load_policy(config)
    tasks = training_tasks(config)
    rollout = ColbenchRollout(
        config.env_id,
        tasks=config.tasks,
        max_turns=config.max_turns,
        turn_tokens=config.turn_tokens,
        **env_options(config),
    )
    reward_funcs = reward_functions("reward", "leak_penalty")
    trainer = grpo_trainer(
        config,
        model,
        tokenizer,
        prompt_dataset(tasks, max_turns=config.max_turns),
        reward_funcs,
        [1.0, config.leak_weight],
        rollout_func=rollout,
        callbacks=[DiagnosticsCallback(rollout)],
    )
    return train_and_save(trainer, config, {"loss": "loss", "reward": "reward"}, prefix=PREFIX)


if __name__ == "__main__":
    (parsed,) = HfArgumentParser(Config).parse_args_into_dataclasses()
    main(parsed)
