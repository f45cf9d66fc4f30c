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
them) and the trained model to OUT/model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
from trl import GRPOConfig, GRPOTrainer

from colbench import prompt_dataset
from colbench.integrations.diagnostics import PREFIX
from colbench.integrations.trl import ColbenchRollout, DiagnosticsCallback, reward_functions
from colbench.llm.export import export_hf
from colbench.tasks import load_shared


@dataclass
class Config:
    """GRPO on ColBench (every field is a command-line flag)."""

    model: str = "smollm2"  # smollm2: the embedded model (colbench model export-hf); or a directory / hub id
    env_id: str = "ColBench-Backend-v1"
    tasks: str = "backend-sample"
    limit: int = 0  # train on the first N tasks (0: all)
    max_turns: int = 3
    turn_tokens: int = 32  # new tokens per agent turn
    simulator: str = "scripted"  # openai:MODEL for a real human (with --simulator_base_url)
    simulator_base_url: str | None = None
    sandbox: str = "auto"
    num_generations: int = 2  # episodes per task in a group
    batch_size: int = 2  # episodes per device per step
    max_steps: int = 2
    learning_rate: float = 1e-6
    leak_weight: float = 1.0  # weight of the leak penalty (minus one per leaked human reply)
    seed: int = 0
    out: str = "runs/trl_grpo"
    cpu: bool = False
    bf16: bool = False


def main(config: Config) -> dict[str, list[float]]:
    model_path = str(export_hf()) if config.model == "smollm2" else config.model
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    tasks = load_shared(config.tasks)
    if config.limit:
        tasks = tasks[: config.limit]
    human = {"base_url": config.simulator_base_url} if config.simulator_base_url else None
    rollout = ColbenchRollout(
        config.env_id,
        tasks=config.tasks,
        max_turns=config.max_turns,
        turn_tokens=config.turn_tokens,
        simulator=config.simulator,
        simulator_options=human,
        sandbox=config.sandbox,
    )
    out = Path(config.out)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path),
        processing_class=tokenizer,
        reward_funcs=reward_functions("reward", "leak_penalty"),
        train_dataset=prompt_dataset(tasks, max_turns=config.max_turns),
        rollout_func=rollout,
        callbacks=[DiagnosticsCallback(rollout)],
        args=GRPOConfig(
            output_dir=str(out / "checkpoints"),
            max_steps=config.max_steps,
            per_device_train_batch_size=config.batch_size,
            num_generations=config.num_generations,
            learning_rate=config.learning_rate,
            reward_weights=[1.0, config.leak_weight],
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=config.cpu,
            bf16=config.bf16,
            seed=config.seed,
        ),
    )
    trainer.train()
    trainer.save_model(str(out / "model"))
    log = [e for e in trainer.state.log_history if "loss" in e]
    metrics = {"loss": [float(e["loss"]) for e in log], "reward": [float(e.get("reward", math.nan)) for e in log]}
    for key in sorted({k for e in log for k in e if k.startswith(PREFIX)}):
        metrics[key] = [float(e.get(key, math.nan)) for e in log]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1), encoding="utf-8")
    print(f"{len(log)} steps: loss {metrics['loss']}, reward {metrics['reward']} -> {out}")
    return metrics


if __name__ == "__main__":
    (parsed,) = HfArgumentParser(Config).parse_args_into_dataclasses()
    main(parsed)
