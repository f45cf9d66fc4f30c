"""Baseline: multi-turn DPO. DPO on whole trajectories, with the trajectory preferences the critic trains on.

Same pairs as ``train_critic.py`` (``preferences.py``), but no critic and no hidden information: the policy itself
is trained, with the conversation as the policy sees it. A trajectory's log-probability is the sum over all of its
assistant tokens (every agent turn; the human's replies are context), and the loss is DPO's

    -log sigmoid(beta * [(log pi(chosen) - log pi_ref(chosen)) - (log pi(rejected) - log pi_ref(rejected))])

plus ``nll_coef`` times the chosen trajectory's mean token NLL (the original ran OpenRLHF's DPO with
``--nll_loss_coef 0.01``). The reference is the initial policy (its log-probs computed once, before training).
The paper gives no separate hyper-parameters for this baseline; the defaults are those of the SWEET-RL policy step.

    python examples/sweet_rl/train_mtdpo.py --pairs DIR/pairs.jsonl --out DIR/mtdpo
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sweet_lib import (
    Cached,
    CachedSequences,
    StageConfig,
    encode_pairs,
    fit,
    freeze_lower_layers,
    log,
    open_stage,
    save_stage,
)

from colbench._util.config_cli import parse_config


@dataclass
class MTDPOConfig(StageConfig):
    """Trajectory-level DPO on the preference pairs (no critic, no ground-truth prefix)."""

    pairs: str = "runs/sweet_rl/pairs.jsonl"
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    out: str = "runs/sweet_rl/mtdpo"
    beta: float = 0.1
    nll_coef: float = 0.01
    lr: float = 2e-7
    epochs: int = 1
    batch_size: int = 8  # pairs per optimizer step
    max_len: int = 16384  # longer pairs are skipped (counted)


def main(config: MTDPOConfig) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    device, _dtype, tokenizer, model = open_stage(config)
    started = time.monotonic()

    # -- data: both trajectories of each pair, as the policy sees them -------------------------------------------------
    pairs, too_long = encode_pairs(tokenizer, config.pairs, config.max_len)
    if not pairs:
        raise SystemExit(f"train_mtdpo: no usable pairs in {config.pairs}")
    log("mtdpo", f"{len(pairs)} trajectory pairs ({too_long} too long)")
    freeze_lower_layers(model, config.train_last_layers)
    sequences = CachedSequences(model, int(tokenizer.pad_token_id), device, top_layers=config.train_last_layers)
    data = sequences.prepare_pairs(pairs)

    def dpo_loss(batch: list[tuple[Cached, Cached]]) -> tuple[torch.Tensor, torch.Tensor]:
        """DPO on summed assistant-token log-ratios (+ the chosen NLL term); also the reward margins."""
        n = len(batch)
        logp, ref, turns = sequences.logps([c for c, _ in batch] + [r for _, r in batch])
        mask = (turns >= 0).float()
        ratio = ((logp - ref) * mask).sum(dim=1)
        margin = config.beta * (ratio[:n] - ratio[n:])
        nll = -(logp[:n] * mask[:n]).sum(dim=1) / mask[:n].sum(dim=1).clamp(min=1)
        return (-F.logsigmoid(margin) + config.nll_coef * nll).mean(), margin.detach()

    @torch.no_grad()
    def evaluate() -> dict[str, float]:
        model.eval()
        losses, margins = [], []
        for pair in data:
            loss, margin = dpo_loss([pair])
            losses.append(loss.item())
            margins.append(margin.item())
        return {"loss": sum(losses) / len(losses), "accuracy": sum(m > 0 for m in margins) / len(margins)}

    before = evaluate()

    # -- training (sweet_lib.fit: AdamW, shuffled micro-batches, gradient accumulation and clipping) -----------------
    step_losses: list[float] = []
    for epoch, steps in enumerate(fit(model, config, len(data), lambda batch: dpo_loss([data[i] for i in batch])[0])):
        step_losses += [loss for loss, _ in steps]
        log("mtdpo", f"epoch {epoch + 1}/{config.epochs}: last step loss {step_losses[-1]:.4f}")
    after = evaluate()
    log("mtdpo", f"DPO loss on the pairs: {before['loss']:.4f} -> {after['loss']:.4f}")

    metrics: dict[str, Any] = {
        "pairs": len(data),
        "skipped_too_long": too_long,
        "loss_before": before["loss"],
        "loss_after": after["loss"],
        "before": before,
        "after": after,
        "step_losses": step_losses,
    }
    return save_stage(config, model, tokenizer, started, metrics)


if __name__ == "__main__":
    main(parse_config(MTDPOConfig))
