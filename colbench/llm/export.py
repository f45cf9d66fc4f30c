"""The embedded GGUF model as a trainable transformers model: the policy an RL run on this machine starts from is
the model ``--agent llamacpp`` evaluates.

transformers reads GGUF files (with the ``gguf`` package) but marks the loaded model as quantised and refuses to
save it, though the weights it holds are ordinary float tensors (dequantised on load). The quantiser tag is dropped
before saving, and the result is a plain float32 safetensors directory with its tokenizer and chat template.
Needs the ``train`` extra (torch, transformers, gguf); no network.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from colbench._util.storage import colbench_home
from colbench.errors import ConfigError
from colbench.llm.llamacpp import resolve_gguf


def default_export_dir(gguf: Path) -> Path:
    """Where ``export_hf`` puts a GGUF's conversion by default: ``$COLBENCH_HOME/models/<file stem>``."""
    return colbench_home() / "models" / gguf.stem


def export_hf(gguf: str | Path | None = None, out: str | Path | None = None, *, force: bool = False) -> Path:
    """Convert ``gguf`` (default: the embedded model, as ``--agent llamacpp`` finds it) into a transformers
    directory at ``out`` (default ``default_export_dir``) and return it; an existing conversion is reused unless
    ``force``. Safe to call from several processes at once: each writes a private folder, the first rename wins."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConfigError(
            f"exporting the embedded model needs the train extra (pip install 'colbench[train]'): {exc}"
        ) from None
    source = resolve_gguf(gguf)
    target = Path(out) if out is not None else default_export_dir(source)
    if (target / "config.json").is_file() and not force:
        return target
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    if force:
        shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError:  # another process exported it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target
