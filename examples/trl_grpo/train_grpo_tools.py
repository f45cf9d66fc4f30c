"""GRPO with TRL's ``environment_factory`` on ColBench: the policy talks to the simulated human and delivers its answer
through tool calls (``ask_human``, ``submit_answer``); one ColBench env per rollout scores it. TRL trains on the
tokens the policy sampled and masks the tool responses (the human's replies) out of the loss.

    # CPU smoke (the embedded SmolLM2-135M, a scripted human, 2 steps): shows the plumbing; a 135M model rarely
    # writes a tool call, so most rollouts end without an answer and score 0
    python examples/trl_grpo/train_grpo_tools.py --max_steps 2 --cpu
    # GPU: a tool-calling policy (its own chat template), a real human on its own OpenAI-compatible server
    python examples/trl_grpo/train_grpo_tools.py --model Qwen/Qwen3-8B --tasks backend-test --max_turns 10 \\
        --max_completion_length 4096 --simulator openai:Qwen/Qwen2.5-72B-Instruct \\
        --simulator_base_url http://human:8000/v1 --num_generations 8 --batch_size 8 --max_steps 500 --bf16

Writes OUT/metrics.json (loss, reward, tool calls per rollout, per step) and the trained model to OUT/model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
from trl import GRPOConfig, GRPOTrainer

from colbench import prompt_dataset
from colbench.integrations.chatml_tools import with_tool_calling
from colbench.integrations.trl_environment import ColbenchToolEnv, environment_rewards
from colbench.llm.export import export_hf
from colbench.tasks import load_shared


@dataclass
class Config:
    """GRPO on ColBench through tools (every field is a command-line flag)."""

    model: str = "smollm2"  # smollm2: the embedded model (colbench model export-hf); or a directory / hub id
    chatml_tools: bool = True  # give the model colbench's ChatML tool template (for ChatML models without one)
    env_id: str = "ColBench-Backend-v1"
    tasks: str = "backend-sample"
    limit: int = 0  # train on the first N tasks (0: all)
    max_turns: int = 3  # tool calls that reach the env: questions and the answer
    max_completion_length: int = 256  # the whole rollout's tokens: the policy's turns and the tool responses
    simulator: str = "scripted"  # openai:MODEL for a real human (with --simulator_base_url)
    simulator_base_url: str | None = None
    sandbox: str = "auto"
    num_generations: int = 2  # rollouts per task in a group
    batch_size: int = 2  # rollouts per device per step
    max_steps: int = 2
    learning_rate: float = 1e-6
    leak_weight: float = 1.0  # weight of the leak penalty (minus one per leaked human reply)
    seed: int = 0
    out: str = "runs/trl_grpo_tools"
    cpu: bool = False
    bf16: bool = False


def main(config: Config) -> dict[str, list[float]]:
    model_path = str(export_hf()) if config.model == "smollm2" else config.model
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if config.chatml_tools:
        tokenizer = with_tool_calling(tokenizer)
    tokenizer.padding_side = "left"
    tasks = load_shared(config.tasks)
    if config.limit:
        tasks = tasks[: config.limit]
    human = {"base_url": config.simulator_base_url} if config.simulator_base_url else None
    environment = ColbenchToolEnv.factory(
        config.env_id,
        tasks=tasks,
        max_turns=config.max_turns,
        simulator=config.simulator,
        simulator_options=human,
        sandbox=config.sandbox,
    )
    out = Path(config.out)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path),
        processing_class=tokenizer,
        reward_funcs=environment_rewards("reward", "leak_penalty"),
        train_dataset=prompt_dataset(tasks, max_turns=config.max_turns),
        environment_factory=environment,
        args=GRPOConfig(
            output_dir=str(out / "checkpoints"),
            max_steps=config.max_steps,
            per_device_train_batch_size=config.batch_size,
            num_generations=config.num_generations,
            max_completion_length=config.max_completion_length,
            max_tool_calling_iterations=config.max_turns + 1,  # one more than the env allows: it refuses it
            learning_rate=config.learning_rate,
            reward_weights=[1.0, config.leak_weight],
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=config.cpu,
            bf16=config.bf16,
            seed=config.seed,
            gradient_checkpointing=not config.cpu,  # on CPU it makes generation recompute the context per token
        ),
    )
    trainer.train()
    trainer.save_model(str(out / "model"))
    log = [e for e in trainer.state.log_history if "loss" in e]
    metrics = {
        key: [float(e.get(field, math.nan)) for e in log]
        for key, field in (("loss", "loss"), ("reward", "reward"), ("tool_calls", "tools/call_frequency"))
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1), encoding="utf-8")
    print(f"{len(log)} steps: loss {metrics['loss']}, reward {metrics['reward']} -> {out}")
    return metrics


if __name__ == "__main__":
    (parsed,) = HfArgumentParser(Config).parse_args_into_dataclasses()
    main(parsed)
