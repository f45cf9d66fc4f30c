"""Stage 4: one epoch of supervised fine-tuning of the human on its kept replies (TRL's SFTTrainer).

The rows are conversational prompt-completion pairs (select_replies.py): the prompt is the human's own request, the
completion its kept reply, so TRL computes the loss on the reply's tokens alone (``completion_only_loss``: the
human's side of the dialogue, nothing of the agent's turns or the system prompt). Training starts from the human
model's own weights: ``--model smollm2`` is the embedded model (``colbench model export-hf`` of its GGUF),
``--model FILE.gguf`` any GGUF (converted the same way), else a transformers directory or hub id (the 8B human).

Written to ``--workdir``: ``human/`` (the trained transformers model, serve it behind any OpenAI-compatible server)
with ``manifest.json`` (the base model and its file digest, the data file and its digest, the config, the losses);
for a GGUF base also ``human.gguf`` (``colbench model export-gguf``: ``--simulator llamacpp:WORKDIR/human.gguf``)
and ``base.gguf``, the untrained start point written the same way, so base and trained are compared at one
precision.

    python examples/simulator_sft/train_sft.py --workdir runs/simsft --model smollm2
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sft_lib import BASE_GGUF, HUMAN_DIR, METRICS, SFT_ROWS, SMOLLM2, Timer, file_digest, log, read_jsonl, save_json

from colbench._util.config_cli import parse_config


@dataclass
class TrainConfig:
    """Fine-tune the human on the selected replies (one epoch, loss on the human's reply only)."""

    workdir: str = "runs/simulator_sft"
    model: str = SMOLLM2  # smollm2 | FILE.gguf | a transformers directory or hub id
    lr: float = 1e-5
    epochs: float = 1.0
    batch_size: int = 8  # rows per optimizer step (per_device_train_batch_size x gradient_accumulation_steps)
    micro_batch_size: int = 2
    max_length: int = 4096  # longer rows are skipped (counted), never cut
    warmup_steps: float = 0.0  # a number of steps, or below 1 a share of them (transformers 5)
    gradient_checkpointing: bool = False
    train_last_layers: int = 0  # CPU runs only: train just the top N blocks and the final norm (0: all)
    bf16: bool | None = None  # None: on a GPU that supports it
    threads: int = 0  # CPU threads for torch (0: its default)
    export_gguf: bool | None = None  # None: when the base is a GGUF
    gguf_dtype: str = "f32"
    seed: int = 0


def resolve(spec: str) -> tuple[str, Path | None]:
    """The directory (or hub id) to load, and the GGUF it came from (None: not a GGUF)."""
    from colbench.llm.export import export_hf
    from colbench.llm.llamacpp import resolve_gguf

    if spec == SMOLLM2:
        gguf = resolve_gguf(None)
        return str(export_hf(gguf)), gguf
    if spec.endswith(".gguf"):
        gguf = resolve_gguf(spec)
        return str(export_hf(gguf)), gguf
    return spec, None


def main(config: TrainConfig) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    timer = Timer()
    work = Path(config.workdir)
    out = work / HUMAN_DIR
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    path, gguf = resolve(config.model)
    log("train", f"base {config.model} -> {path}")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    gpu = torch.cuda.is_available()
    bf16 = (gpu and torch.cuda.is_bf16_supported()) if config.bf16 is None else config.bf16
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if bf16 else torch.float32)

    # -- data: the kept replies as prompt-completion rows ---------------------------------------------------------
    data_file = work / SFT_ROWS
    rows = [{"prompt": r["prompt"], "completion": r["completion"]} for r in read_jsonl(data_file)]
    if not rows:
        raise SystemExit(f"train_sft: {data_file} holds no rows (no candidate survived the selection)")
    lengths = [
        len(tokenizer.apply_chat_template(r["prompt"] + r["completion"], return_dict=True)["input_ids"]) for r in rows
    ]
    fits = [r for r, n in zip(rows, lengths, strict=True) if n <= config.max_length]
    log("train", f"{len(fits)} rows ({len(rows) - len(fits)} longer than {config.max_length} skipped)")

    if config.train_last_layers > 0:  # the backward pass stops at the lowest trained block: ~3x faster on a CPU
        model.requires_grad_(False)
        for block in model.model.layers[-config.train_last_layers :]:
            block.requires_grad_(True)
        model.model.norm.requires_grad_(True)

    # -- one epoch of TRL SFT, loss on the completion (the human's reply) only -------------------------------------
    accumulate = max(1, config.batch_size // config.micro_batch_size)
    args = SFTConfig(
        output_dir=str(work / "sft_trainer"),
        num_train_epochs=config.epochs,
        learning_rate=config.lr,
        per_device_train_batch_size=config.micro_batch_size,
        gradient_accumulation_steps=accumulate,
        warmup_steps=config.warmup_steps,
        lr_scheduler_type="constant" if config.warmup_steps == 0 else "linear",
        max_length=config.max_length,
        completion_only_loss=True,
        gradient_checkpointing=config.gradient_checkpointing,
        bf16=bf16,
        use_cpu=not gpu,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=config.seed,
        dataset_num_proc=None,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(fits), processing_class=tokenizer)
    result = trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    log("train", f"{result.global_step} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else "no steps")

    # -- served where colbench can use it: a GGUF for the embedded server ------------------------------------------
    exported: dict[str, str] = {}
    if config.export_gguf or (config.export_gguf is None and gguf is not None):
        from colbench.llm.export import export_gguf

        exported["human"] = str(export_gguf(out, gguf, work / f"{HUMAN_DIR}.gguf", dtype=config.gguf_dtype))  # type: ignore[arg-type]
        exported["base"] = str(export_gguf(path, gguf, work / BASE_GGUF, dtype=config.gguf_dtype))  # type: ignore[arg-type]
        log("train", f"served as llamacpp:{exported['human']} (start point: llamacpp:{exported['base']})")

    manifest = {
        "base_model": {"spec": config.model, "path": path, "gguf": str(gguf) if gguf else None},
        "base_gguf_sha256": file_digest(gguf) if gguf else None,
        "data": {"file": str(data_file.resolve()), "sha256": file_digest(data_file), "rows": len(rows)},
        "rows_trained": len(fits),
        "tokens_trained_on": sum(n for n in lengths if n <= config.max_length),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "steps": result.global_step,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "losses": losses,
        "gguf": exported,
        "config": asdict(config),
        "trl": __import__("trl").__version__,
        "transformers": __import__("transformers").__version__,
        "seconds": timer(),
        "cpu_threads": torch.get_num_threads() if not gpu else None,
        "host_cpus": os.cpu_count(),
    }
    save_json(out / "manifest.json", manifest)
    save_json(work / METRICS["train"], manifest)
    return manifest


if __name__ == "__main__":
    main(parse_config(TrainConfig))
