"""Stage 3: the step-level critic, trained with training-time information (SWEET-RL's asymmetric critic).

The critic is a causal LM initialised from the policy and reads each trajectory with the hidden information in
front of it: ``"In light that the final answer is: {ground truth}." + <chat-templated conversation>``. Its
advantage for agent turn k is

    A_k = beta * mean over turn k's assistant tokens of (log pi_critic - log pi_ref)

against a frozen copy of the initial model (its log-probs are computed once, before training, so no second model is
kept in memory). A trajectory's score is the sum of its turn advantages, and the loss on a (chosen, rejected) pair of
the same task is Bradley-Terry: ``-log sigmoid(sum_k A_k(chosen) - sum_k A_k(rejected))``.

``--advantage all`` is what the original code computes instead: one mean over all agent tokens of the conversation
(OpenRLHF's ``--mean_log_prob``), which weights turns by their length rather than equally.

Defaults are the paper's 8B recipe (lr 2e-7, beta 0.1, 4 epochs, max length 8192, batch 8); the CPU smoke run
overrides lr and sizes. ``--eval-pairs`` measures, before and after training, how often the critic ranks the chosen
trajectory of a held-out pair above the rejected one (ties count half: an untrained critic scores 0.5).

    python examples/sweet_rl/train_critic.py --pairs DIR/pairs.jsonl --model meta-llama/Llama-3.1-8B-Instruct \
        --out DIR/critic
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sweet_lib import (
    Cached,
    CachedSequences,
    StageConfig,
    all_token_advantage,
    bt_loss,
    encode_pairs,
    fit,
    freeze_lower_layers,
    log,
    open_stage,
    pairwise_accuracy,
    save_stage,
    turn_advantages,
)

from colbench._util.config_cli import parse_config


@dataclass
class CriticConfig(StageConfig):
    """Train the step-level critic on trajectory preferences with a Bradley-Terry loss on summed turn advantages."""

    pairs: str = "runs/sweet_rl/pairs.jsonl"
    eval_pairs: str | None = None  # held-out pairs: ranking accuracy before/after training
    model: str = "meta-llama/Llama-3.1-8B-Instruct"  # the policy the critic starts from; smoke runs: smollm2
    out: str = "runs/sweet_rl/critic"
    advantage: str = "turn"  # turn: the paper's per-turn means; all: the original code's one mean over agent tokens
    beta: float = 0.1
    lr: float = 2e-7
    epochs: int = 4
    batch_size: int = 8  # pairs per optimizer step
    max_len: int = 8192  # longer pairs are skipped (counted)
    lora: bool = False  # train LoRA adapters (peft) instead of all weights; merged into the saved model
    lora_r: int = 16
    lora_alpha: int = 32


def main(config: CriticConfig) -> dict[str, object]:
    import torch

    device, _dtype, tokenizer, model = open_stage(config)
    model.eval()
    started = time.monotonic()

    # -- data: each pair tokenised with the ground-truth prefix, assistant tokens of each turn marked ---------------
    train_pairs, skipped = encode_pairs(tokenizer, config.pairs, config.max_len, ground_truth=True)
    eval_pairs, eval_skipped = (
        encode_pairs(tokenizer, config.eval_pairs, config.max_len, ground_truth=True) if config.eval_pairs else ([], 0)
    )
    if not train_pairs:
        raise SystemExit(f"train_critic: no usable pairs in {config.pairs} ({skipped} longer than {config.max_len})")
    log("critic", f"{len(train_pairs)} pairs ({skipped} too long), {len(eval_pairs)} held-out pairs, device {device}")

    # -- the frozen reference: the initial model's token log-probs, computed once -------------------------------------
    if config.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model, LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear")
        )
    else:
        freeze_lower_layers(model, config.train_last_layers)
    top_layers = 0 if config.lora else config.train_last_layers
    sequences = CachedSequences(model, int(tokenizer.pad_token_id), device, top_layers=top_layers)

    # LoRA adapters start at zero, so the model is still its own reference here.
    train_set = sequences.prepare_pairs(train_pairs)
    eval_set = sequences.prepare_pairs(eval_pairs)

    def scores(items: list[Cached]) -> torch.Tensor:
        """The critic's score of each trajectory: the sum of its turn advantages (or the all-token variant)."""
        logp, ref_logp, turns = sequences.logps(items)
        if config.advantage == "all":
            return all_token_advantage(logp, ref_logp, turns, config.beta)
        n_turns = max(c.encoded.n_turns for c in items)
        return turn_advantages(logp, ref_logp, turns, n_turns, config.beta).sum(dim=1)

    @torch.no_grad()
    def evaluate(pairs: list[tuple[Cached, Cached]]) -> dict[str, float]:
        if not pairs:
            return {}
        model.eval()
        chosen, rejected = [], []
        for pair in pairs:
            s = scores(list(pair)).tolist()
            chosen.append(s[0])
            rejected.append(s[1])
        margins = [c - r for c, r in zip(chosen, rejected, strict=True)]
        return {
            "accuracy": pairwise_accuracy(chosen, rejected),
            "mean_margin": sum(margins) / len(margins),
            "bt_loss": float(bt_loss(torch.tensor(chosen), torch.tensor(rejected))),
        }

    train_before = evaluate(train_set)
    eval_before = evaluate(eval_set)
    log("critic", f"before training: train {train_before}; held-out {eval_before}")

    # -- training (sweet_lib.fit: AdamW, shuffled micro-batches, gradient accumulation and clipping) -----------------
    def pair_loss(batch: list[int]) -> torch.Tensor:
        """Bradley-Terry on the critic's scores of the chosen and the rejected trajectories of the batch's pairs."""
        s = scores([train_set[i][0] for i in batch] + [train_set[i][1] for i in batch])
        return bt_loss(s[: len(batch)], s[len(batch) :])

    step_losses: list[float] = []
    epoch_losses: list[float] = []
    for epoch, steps in enumerate(fit(model, config, len(train_set), pair_loss)):
        step_losses += [loss for loss, _ in steps]
        epoch_losses.append(sum(loss * n for loss, n in steps) / sum(n for _, n in steps))
        log("critic", f"epoch {epoch + 1}/{config.epochs}: mean BT loss {epoch_losses[-1]:.4f}")

    train_after = evaluate(train_set)
    eval_after = evaluate(eval_set)
    log("critic", f"train after: {train_after}; held-out after: {eval_after}")

    # -- save ---------------------------------------------------------------------------------------------------------
    metrics: dict[str, object] = {
        "pairs": len(train_pairs),
        "skipped_too_long": skipped + eval_skipped,
        "train_before": train_before,  # the critic starts equal to its reference: every advantage is 0, loss log 2
        "epoch_losses": epoch_losses,
        "step_losses": step_losses,
        "train_after": train_after,
        "heldout_before": eval_before,
        "heldout_after": eval_after,
    }
    return save_stage(config, model, tokenizer, started, metrics)  # LoRA adapters merged there


if __name__ == "__main__":
    main(parse_config(CriticConfig))
