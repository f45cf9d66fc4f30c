"""TRL: the real GRPOTrainer trains 2 steps on CPU with ColBench episodes as rollouts (the embedded model exported
to transformers, a scripted human); the loss is finite and the simulated human's tokens are out of the loss."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from colbench.errors import ConfigError

HUMAN = "Keep it short and return an int."
pytest.importorskip("trl")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_trainer_trains_on_colbench_episodes(exported_model: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from colbench import prompt_dataset
    from colbench.humans.simulator import ScriptedSimulator
    from colbench.integrations.trl import ColbenchRollout, reward_functions

    rollout = ColbenchRollout(
        "ColBench-Backend-v1",
        tasks="backend-sample",
        max_turns=2,
        turn_tokens=8,
        simulator=ScriptedSimulator([HUMAN]),
        sandbox="bwrap",
    )
    seen: list[dict[str, Any]] = []

    def recording(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = rollout(prompts, trainer)
        seen.append(out)
        return out

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    tokenizer.padding_side = "left"
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(exported_model),
        processing_class=tokenizer,
        reward_funcs=reward_functions("reward", "leak_penalty"),
        train_dataset=prompt_dataset("backend-sample", max_turns=2).select(range(4)),
        rollout_func=recording,
        args=GRPOConfig(
            output_dir=str(tmp_path / "grpo"),
            max_steps=2,
            per_device_train_batch_size=2,
            num_generations=2,
            learning_rate=1e-6,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            seed=0,
        ),
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert len(seen) == 2
    for out in seen:
        assert len(out["completion_ids"]) == 2 and out["logprobs"] is None
        assert all(r is not None and 0.0 <= r <= 1.0 for r in out["colbench_reward"])
        for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
            assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)
            trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
            masked_out = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
            assert HUMAN in masked_out and HUMAN not in trained  # the human's reply is in the context, not the loss
        for ids in out["prompt_ids"]:  # the task prompt is the prompt, never part of the completion
            assert "You are working with a person who needs a Python function" in tokenizer.decode(ids)


def test_rollout_refuses_prompts_of_other_tasks() -> None:
    from colbench.integrations.trl import ColbenchRollout, reward_functions

    rollout = ColbenchRollout(tasks="backend-sample", max_turns=3)
    with pytest.raises(ConfigError, match="prompt_dataset"):
        rollout([[{"role": "user", "content": "Solve this."}]], trainer=None)
    with pytest.raises(ConfigError, match="expected some of"):
        reward_functions("accuracy")
    with pytest.raises(ConfigError, match="turn_tokens"):
        ColbenchRollout(turn_tokens=0)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_grpo_example_runs_two_steps(exported_model: Path, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    script = REPO / "examples" / "trl_grpo" / "train_grpo.py"
    args = ["--model", str(exported_model), "--max_steps", "2", "--cpu", "--sandbox", "bwrap", "--limit", "2"]
    done = subprocess.run(
        [sys.executable, str(script), *args, "--turn_tokens", "8", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=850,
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(metrics["loss"]) == 2 and all(math.isfinite(x) for x in metrics["loss"])
    assert (tmp_path / "run" / "model" / "config.json").is_file()
