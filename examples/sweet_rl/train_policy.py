"""Stage 4: the policy step. The critic ranks sampled actions turn by turn; the policy learns the ranking with DPO.

1. Turns: a seeded ``data_fraction`` of the collected trajectories (the original used 10%: DPO on turn-wise
   advantages overfits with more gradient steps); every agent turn of those is a prompt (the conversation so far).
2. Candidates: N actions sampled from the policy at each prompt (temperature 1.0, N=16 in the original).
3. Scores: ``mean log-prob of the action under the critic, with "In light that the final answer is: {gt}." in
   front`` minus ``mean log-prob under the initial policy without it`` (the original's ``rank_best_of_n.py``: the
   second term is the log-prob the sampler gave the action).
4. Pairs: per turn, ``num_pairs`` (4) random pairs of a top-half candidate (chosen) and a bottom-half one.
5. DPO with TRL's ``DPOTrainer`` (lr 2e-7, beta 0.1, 1 epoch, max length 16384, NLL coefficient 0.01 as an added
   ``sft`` loss), optionally on LoRA adapters (peft), merged into the saved model.

Sampling here uses ``transformers.generate``; at the 8B scale sample with vLLM instead (see the README).

    python examples/sweet_rl/train_policy.py --trajectories DIR/trajectories.jsonl --critic DIR/critic --out DIR/policy
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweet_lib import (
    encode_dialogue,
    freeze_lower_layers,
    gt_prefix,
    load_model,
    log,
    open_stage,
    pad_batch,
    read_trajectories,
    resolve_model,
    save_stage,
    token_logps,
    top_bottom_pairs,
    write_jsonl,
)

from colbench._util.config_cli import parse_config


@dataclass
class PolicyConfig:
    """Sample candidate actions per turn, rank them with the critic, train the policy with turn-level DPO."""

    trajectories: str = "runs/sweet_rl/trajectories.jsonl"
    critic: str = "runs/sweet_rl/critic"
    model: str = "meta-llama/Llama-3.1-8B-Instruct"  # the policy to improve (and the reference of the scores)
    out: str = "runs/sweet_rl/policy"
    # -- candidates ----------------------------------------------------------------------------------------------
    data_fraction: float = 0.1
    max_prompts: int | None = None  # cap on turns after data_fraction (smoke runs)
    num_candidates: int = 16
    temperature: float = 1.0
    max_new_tokens: int = 1024
    num_pairs: int = 4
    score_batch_size: int = 4  # candidates per scoring forward pass
    # -- DPO -----------------------------------------------------------------------------------------------------
    lr: float = 2e-7
    beta: float = 0.1
    epochs: int = 1
    batch_size: int = 8
    micro_batch_size: int = 1
    max_length: int = 16384
    nll_coef: float = 0.01
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.03
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    train_last_layers: int = 0  # CPU smoke runs: only the top N blocks are trained (0: all)
    gradient_checkpointing: bool = True
    device: str = "auto"
    threads: int = 0  # CPU threads (0: torch's default)
    dtype: str = "auto"
    seed: int = 0


def main(config: PolicyConfig) -> dict[str, Any]:
    import torch

    device, dtype, tokenizer, policy = open_stage(config)
    policy.eval()
    started = time.monotonic()
    pad_id = int(tokenizer.pad_token_id)

    # -- 1. the turns to improve ---------------------------------------------------------------------------------
    trajectories = read_trajectories(config.trajectories)
    random.Random(config.seed).shuffle(trajectories)
    trajectories = trajectories[: max(1, math.ceil(len(trajectories) * config.data_fraction))]
    prompts: list[dict[str, Any]] = []
    for t in trajectories:
        for i, message in enumerate(t.messages):
            if message["role"] == "assistant":
                prompts.append({"task_id": t.task_id, "prompt": t.messages[:i], "gt": t.hidden_information})
    prompts = prompts[: config.max_prompts] if config.max_prompts else prompts
    log("policy", f"{len(prompts)} turns from {len(trajectories)} trajectories")

    # -- 2. candidates from the policy -----------------------------------------------------------------------------
    @torch.no_grad()
    def sample(prompt: list[dict[str, str]]) -> list[str]:
        encoded: Any = tokenizer.apply_chat_template(
            prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = {k: v.to(device) for k, v in encoded.items()}
        out = policy.generate(
            **ids,
            do_sample=True,
            temperature=config.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=config.max_new_tokens,
            num_return_sequences=config.num_candidates,
            pad_token_id=pad_id,
        )
        width = ids["input_ids"].shape[1]
        return [tokenizer.decode(row[width:], skip_special_tokens=True).strip() for row in out]

    for item in prompts:
        item["candidates"] = sample(item["prompt"])

    # -- 3. scores: critic (with the ground truth) minus the initial policy (without it) ----------------------------
    @torch.no_grad()
    def mean_logp_of_last_turn(model: Any, item: dict[str, Any], with_gt: bool) -> list[float]:
        prefix = gt_prefix(item["gt"]) if with_gt else ""
        out: list[float] = []
        cands = item["candidates"]
        for start in range(0, len(cands), config.score_batch_size):
            encoded = [
                encode_dialogue(tokenizer, [*item["prompt"], {"role": "assistant", "content": c}], prefix)
                for c in cands[start : start + config.score_batch_size]
            ]
            ids, mask, turns = pad_batch(encoded, pad_id)
            logp = token_logps(model, ids.to(device), mask.to(device)).cpu()
            last = torch.tensor([e.n_turns - 1 for e in encoded])[:, None]
            in_turn = (turns == last).float()
            out += ((logp * in_turn).sum(1) / in_turn.sum(1).clamp(min=1)).tolist()
        return out

    for item in prompts:
        item["reference_logp"] = mean_logp_of_last_turn(policy, item, with_gt=False)
    critic = load_model(resolve_model(config.critic), device, dtype, trainable=False)
    for item in prompts:
        critic_logp = mean_logp_of_last_turn(critic, item, with_gt=True)
        item["scores"] = [c - r for c, r in zip(critic_logp, item["reference_logp"], strict=True)]
    del critic

    # -- 4. turn-level pairs -------------------------------------------------------------------------------------
    rng = random.Random(config.seed)
    rows = []
    for item in prompts:
        for i, j in top_bottom_pairs(item["scores"], config.num_pairs, rng):
            rows.append(
                {
                    "prompt": item["prompt"],
                    "chosen": [{"role": "assistant", "content": item["candidates"][i]}],
                    "rejected": [{"role": "assistant", "content": item["candidates"][j]}],
                    "score_gap": item["scores"][i] - item["scores"][j],
                }
            )
    out = Path(config.out)
    write_jsonl(out / "candidates.jsonl", ({k: v for k, v in p.items() if k != "gt"} for p in prompts))
    write_jsonl(out / "turn_pairs.jsonl", rows)
    if not rows:
        raise SystemExit("train_policy: no turn pairs (all candidates scored alike?)")
    log("policy", f"{len(rows)} turn pairs from {len(prompts)} turns ({time.monotonic() - started:.0f}s)")

    # -- 5. DPO (TRL) --------------------------------------------------------------------------------------------
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    peft_config = None
    if config.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear")
    else:
        freeze_lower_layers(policy, config.train_last_layers)
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in rows])
    args = DPOConfig(
        output_dir=str(out / "trainer"),
        learning_rate=config.lr,
        beta=config.beta,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.micro_batch_size,
        per_device_eval_batch_size=config.micro_batch_size,
        gradient_accumulation_steps=max(1, config.batch_size // config.micro_batch_size),
        max_length=config.max_length,
        loss_type=["sigmoid", "sft"],
        loss_weights=[1.0, config.nll_coef],
        lr_scheduler_type=config.lr_scheduler,
        warmup_steps=config.warmup_ratio,  # a float below 1: a share of the training steps
        bf16=dtype == torch.bfloat16,
        gradient_checkpointing=config.gradient_checkpointing,
        use_cpu=device.type == "cpu",
        logging_steps=1,
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        seed=config.seed,
        disable_tqdm=True,
    )
    trainer = DPOTrainer(
        model=policy,
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    step_losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    log("policy", f"DPO loss on the pairs: {before['eval_loss']:.4f} -> {after['eval_loss']:.4f}")

    metrics: dict[str, Any] = {
        "turns": len(prompts),
        "pairs": len(rows),
        "mean_score_gap": sum(r["score_gap"] for r in rows) / len(rows),
        "loss_before": before["eval_loss"],
        "loss_after": after["eval_loss"],
        "eval_before": before,
        "eval_after": after,
        "step_losses": step_losses,
    }
    return save_stage(config, trainer.model, tokenizer, started, metrics)  # LoRA adapters merged there


if __name__ == "__main__":
    main(parse_config(PolicyConfig))
