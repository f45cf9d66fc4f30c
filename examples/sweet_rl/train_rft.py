"""Baseline: rejection fine-tuning. Supervised fine-tuning of the policy on its own successful trajectories.

Same data as SWEET-RL (``collect.py``'s trajectories): keep those with ``reward >= min_reward`` (backend: 1.0, every
test passed), train on the cross-entropy of the assistant tokens only (every agent turn of the conversation, its
end-of-turn marker included; the task prompt and the human's replies are context, not targets). No critic and no
hidden information.

The paper gives no hyper-parameters for this baseline; the defaults follow the DPO stages (small lr, bf16 on GPU).

    python examples/sweet_rl/train_rft.py --trajectories DIR/trajectories.jsonl --out DIR/rft
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sweet_lib import (
    Cached,
    CachedSequences,
    StageConfig,
    encode_dialogue,
    fit,
    freeze_lower_layers,
    log,
    open_stage,
    read_trajectories,
    save_stage,
)

from colbench._util.config_cli import parse_config


@dataclass
class RFTConfig(StageConfig):
    """Supervised fine-tuning on successful trajectories (assistant tokens only)."""

    trajectories: str = "runs/sweet_rl/trajectories.jsonl"
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    out: str = "runs/sweet_rl/rft"
    min_reward: float = 1.0  # backend: all tests passed; frontend: pick a similarity threshold
    lr: float = 1e-6
    epochs: int = 2
    batch_size: int = 8  # trajectories per optimizer step
    max_len: int = 8192  # longer trajectories are skipped (counted)


def main(config: RFTConfig) -> dict[str, Any]:
    import torch

    device, _dtype, tokenizer, model = open_stage(config)
    started = time.monotonic()

    # -- data: successful trajectories, assistant tokens marked ----------------------------------------------------
    kept = [t for t in read_trajectories(config.trajectories) if t.reward >= config.min_reward]
    encoded = [encode_dialogue(tokenizer, t.messages) for t in kept]
    too_long = sum(len(e) > config.max_len for e in encoded)
    encoded = [e for e in encoded if len(e) <= config.max_len]
    if not encoded:
        raise SystemExit(f"train_rft: no trajectory with reward >= {config.min_reward} (and within {config.max_len})")
    log("rft", f"{len(encoded)} successful trajectories ({too_long} too long)")
    freeze_lower_layers(model, config.train_last_layers)
    sequences = CachedSequences(model, int(tokenizer.pad_token_id), device, top_layers=config.train_last_layers)
    data = sequences.prepare(encoded)

    def nll(items: list[Cached]) -> torch.Tensor:
        """Mean negative log-likelihood over all assistant tokens of the batch."""
        logp, _, turns = sequences.logps(items)
        mask = (turns >= 0).float()
        return -(logp * mask).sum() / mask.sum().clamp(min=1)

    @torch.no_grad()
    def evaluate() -> float:
        model.eval()
        return sum(nll([c]).item() for c in data) / len(data)

    loss_before = evaluate()

    # -- training (sweet_lib.fit: AdamW, shuffled micro-batches, gradient accumulation and clipping) -----------------
    step_losses: list[float] = []
    for epoch, steps in enumerate(fit(model, config, len(data), lambda batch: nll([data[i] for i in batch]))):
        step_losses += [loss for loss, _ in steps]
        log("rft", f"epoch {epoch + 1}/{config.epochs}: last step NLL {step_losses[-1]:.4f}")
    loss_after = evaluate()
    log("rft", f"NLL on the successful trajectories: {loss_before:.4f} -> {loss_after:.4f}")

    metrics: dict[str, Any] = {
        "trajectories": len(data),
        "skipped_too_long": too_long,
        "loss_before": loss_before,
        "loss_after": loss_after,
        "step_losses": step_losses,
    }
    return save_stage(config, model, tokenizer, started, metrics)


if __name__ == "__main__":
    main(parse_config(RFTConfig))
