"""What the two GRPO examples share (``train_grpo.py``: episodes through ``rollout_func``; ``train_grpo_tools.py``:
tool calls through ``environment_factory``): their common flags, the policy and its tokenizer, the training tasks,
the env options, the trainer and its ``GRPOConfig``, and the run's end (the model saved, the per-step metrics
written). Each script keeps what makes it what it is: its rollouts, its reward functions, its own settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from colbench.llm.export import export_hf
from colbench.tasks import Task, load_shared


@dataclass
class GRPOFlags:
    """The flags both examples take (each script's ``Config`` adds its own; every field is a command-line flag)."""

    model: str = "smollm2"  # smollm2: the embedded model (colbench model export-hf); or a directory / hub id
    env_id: str = "ColBench-Backend-v2"
    tasks: str = "backend-sample"
    limit: int = 0  # train on the first N tasks (0: all)
    max_turns: int = 3
    simulator: str = "scripted"  # openai:MODEL for a real human (with --simulator_base_url)
    simulator_base_url: str | None = None
    sandbox: str = "auto"
    num_generations: int = 2  # episodes (rollouts) per task in a group
    batch_size: int = 2  # episodes (rollouts) per device per step
    max_steps: int = 2
    learning_rate: float = 1e-6
    leak_weight: float = 1.0  # weight of the leak penalty (minus one per leaked human reply)
    seed: int = 0
    out: str = "runs/trl_grpo"
    cpu: bool = False
    bf16: bool = False


def load_policy(config: GRPOFlags) -> tuple[Any, Any]:
    """The policy and its tokenizer (left padding, as GRPO generates): the embedded model exported once
    (``smollm2``), or the given directory / hub id."""
    path = str(export_hf()) if config.model == "smollm2" else config.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(path), tokenizer


def training_tasks(config: GRPOFlags) -> list[Task]:
    """The tasks of ``--tasks``, the first ``--limit`` of them when given."""
    tasks = load_shared(config.tasks)
    return tasks[: config.limit] if config.limit else tasks


def env_options(config: GRPOFlags) -> dict[str, Any]:
    """The options of the env each rollout plays: the simulated human (its spec, and its endpoint when
    ``--simulator_base_url`` is given) and the sandbox."""
    human = {"base_url": config.simulator_base_url} if config.simulator_base_url else None
    return {"simulator": config.simulator, "simulator_options": human, "sandbox": config.sandbox}


def grpo_config(config: GRPOFlags, reward_weights: list[float], settings: dict[str, Any] | None = None) -> GRPOConfig:
    """The run's ``GRPOConfig``: from the shared flags (a log line per step, no checkpoints), the reward functions'
    weights and the script's own ``settings`` (the launch test builds it from the documented command line)."""
    return GRPOConfig(
        output_dir=str(Path(config.out) / "checkpoints"),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        num_generations=config.num_generations,
        learning_rate=config.learning_rate,
        reward_weights=reward_weights,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=config.cpu,
        bf16=config.bf16,
        seed=config.seed,
        **(settings or {}),
    )


def grpo_trainer(
    config: GRPOFlags,
    model: Any,
    tokenizer: Any,
    train_dataset: Any,
    reward_funcs: list[Any],
    reward_weights: list[float],
    settings: dict[str, Any] | None = None,
    **rollouts: Any,
) -> GRPOTrainer:
    """TRL's ``GRPOTrainer`` of the policy on ``train_dataset`` (the script's prompts of the tasks), with
    ``grpo_config``: ``rollouts`` say how the script plays them (``rollout_func`` and ``callbacks``, or
    ``environment_factory``)."""
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward_funcs,
        train_dataset=train_dataset,
        args=grpo_config(config, reward_weights, settings),
        **rollouts,
    )


def train_and_save(
    trainer: GRPOTrainer, config: GRPOFlags, fields: dict[str, str], prefix: str | None = None
) -> dict[str, list[float]]:
    """Train; save the model to OUT/model and, per logged step, each of ``fields`` (name in metrics.json: key in
    the trainer's log; NaN where a step lacks it) and every logged key that starts with ``prefix`` to
    OUT/metrics.json. Returns the metrics."""
    out = Path(config.out)
    trainer.train()
    trainer.save_model(str(out / "model"))
    log = [e for e in trainer.state.log_history if "loss" in e]
    if prefix is not None:
        fields = {**fields, **{key: key for key in sorted({k for e in log for k in e if k.startswith(prefix)})}}
    metrics = {name: [float(e.get(field, math.nan)) for e in log] for name, field in fields.items()}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1), encoding="utf-8")
    print(f"{len(log)} steps: loss {metrics['loss']}, reward {metrics['reward']} -> {out}")
    return metrics
