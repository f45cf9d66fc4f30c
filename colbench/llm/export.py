"""The embedded GGUF model as a trainable transformers model, and back: the policy an RL run on this machine
starts from is the model ``--agent llamacpp`` evaluates, and a fine-tuned model (a trained simulated human,
examples/simulator_sft) is served again by the embedded server as ``llamacpp:PATH.gguf``.

``export_hf``: transformers reads GGUF files (with the ``gguf`` package) but marks the loaded model as quantised and
refuses to save it, though the weights it holds are ordinary float tensors (dequantised on load). The quantiser tag
is dropped before saving, and the result is a plain float32 safetensors directory with its tokenizer and chat
template.

``export_gguf``: the inverse. The metadata and tokenizer come from the GGUF the model was exported from (so the
served model tokenises and templates exactly as before); each tensor is the fine-tuned one, mapped back by undoing
exactly what transformers' GGUF loader did to it (its tensor-name map and its architecture's tensor processor:
the q/k row permutation for llama, the ``norm + 1`` offset for gemma), written as F32 or F16. Tensors transformers
did not load (``rope_freqs``) are copied as they are. Architectures whose loader does more than that (MoE merges,
reshapes) are refused rather than written wrongly.

Needs the ``train`` extra (torch, transformers, gguf); no network.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from colbench._util.storage import colbench_home
from colbench.errors import ConfigError
from colbench.llm.llamacpp import resolve_gguf

if TYPE_CHECKING:
    import numpy as np


def export_hf(gguf: str | Path | None = None, out: str | Path | None = None, *, force: bool = False) -> Path:
    """Convert ``gguf`` (default: the embedded model, as ``--agent llamacpp`` finds it) into a transformers
    directory at ``out`` (default ``$COLBENCH_HOME/models/<file stem>``) and return it; an existing conversion is
    reused unless ``force``. Safe to call from several processes at once: each writes a private folder, the first
    rename wins."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConfigError(
            f"exporting the embedded model needs the train extra (pip install 'colbench[train]'): {exc}"
        ) from None
    source = resolve_gguf(gguf)
    target = Path(out) if out is not None else colbench_home() / "models" / source.stem
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


GgufDtype = Literal["f32", "f16"]
_INVERTIBLE = ("TensorProcessor", "LlamaTensorProcessor", "Gemma2TensorProcessor")
"""transformers' GGUF tensor processors whose work ``export_gguf`` undoes: the identity, llama's q/k permutation,
gemma's norm offset. Others (MoE expert merges, bloom's qkv reshapes, ...) are refused."""


def export_gguf(
    hf_dir: str | Path,
    base_gguf: str | Path | None = None,
    out: str | Path | None = None,
    *,
    dtype: GgufDtype = "f32",
) -> Path:
    """Write the transformers model in ``hf_dir`` (a fine-tune of ``base_gguf``'s ``export_hf`` conversion; default
    base: the embedded model) as a GGUF at ``out`` (default ``<hf_dir>.gguf``) that the embedded llama.cpp server
    serves, and return it. ``dtype``: the matrices' type (vectors stay F32, as llama.cpp's converter writes them);
    F32 keeps the fine-tune exactly, F16 halves the file. The file is written under a private name and renamed into
    place, so a reader never sees half of it."""
    try:
        import gguf
        import numpy as np
        from transformers import AutoModelForCausalLM
        from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map
    except ImportError as exc:
        raise ConfigError(f"exporting a GGUF needs the train extra (pip install 'colbench[train]'): {exc}") from None
    if dtype not in ("f32", "f16"):
        raise ConfigError(f"bad GGUF dtype {dtype!r}: expected 'f32' or 'f16'")
    source = Path(hf_dir)
    if not (source / "config.json").is_file():
        raise ConfigError(f"{source} is not a transformers model directory (no config.json)")
    base = resolve_gguf(base_gguf)
    reader = gguf.GGUFReader(base)
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)
    if processor.__name__ not in _INVERTIBLE:
        raise ConfigError(
            f"exporting a {arch!r} GGUF is not supported: transformers' loader changes its tensors "
            f"({processor.__name__}) in ways export_gguf does not undo"
        )
    model = AutoModelForCausalLM.from_pretrained(source, dtype="auto")
    heads = {
        "num_attention_heads": model.config.num_attention_heads,
        "num_key_value_heads": model.config.num_key_value_heads,
    }
    to_hf: dict[str, str] = get_gguf_hf_weights_map(model, processor(config=heads))  # type: ignore[no-untyped-call]
    state = model.state_dict()
    names = [tensor.name for tensor in reader.tensors]
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    if not tied and "output.weight" not in names and "output.weight" in to_hf:
        names.append("output.weight")  # a base with tied embeddings, trained untied: the head is written too
    base_tensors = {tensor.name: tensor for tensor in reader.tensors}
    _check_match(source, base, state, to_hf, names, tied, base_tensors)

    target = Path(out) if out is not None else source.with_name(source.name + ".gguf")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    writer = gguf.GGUFWriter(tmp, arch=arch, endianess=reader.endianess)
    _copy_metadata(reader, writer, gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)

    def array(name: str) -> np.ndarray:
        """The tensor as the GGUF holds it: the trained one with the loader's change undone, or (not loaded by
        transformers, so not trained) the base's bytes."""
        if name not in to_hf:
            return base_tensors[name].data
        values = state[to_hf[name]].detach().float().numpy()
        values = _undo(processor.__name__, name, values, heads)
        return values.astype(np.float16) if dtype == "f16" and values.ndim > 1 else values.astype(np.float32)

    try:
        for name in names:  # tensor infos first (shapes, types, sizes), then the data, one tensor at a time
            if name in to_hf:
                shape = tuple(state[to_hf[name]].shape)
                width = np.dtype(np.float16 if dtype == "f16" and len(shape) > 1 else np.float32)
                writer.add_tensor_info(name, shape, width, int(np.prod(shape)) * width.itemsize)
            else:
                raw = base_tensors[name]
                writer.add_tensor_info(name, raw.data.shape, raw.data.dtype, raw.data.nbytes, raw.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for name in names:
            writer.write_tensor_data(array(name), tensor_endianess=reader.endianess)
        writer.close()
        tmp.replace(target)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    return target


def _check_match(
    source: Path,
    base: Path,
    state: dict[str, Any],
    to_hf: dict[str, str],
    names: list[str],
    tied: bool,
    base_tensors: dict[str, Any],
) -> None:
    """Refuse a model that is not a fine-tune of ``base``: a trained tensor with no place in the GGUF (it would be
    lost) or a tensor of another shape."""
    placed = {to_hf[name] for name in names if name in to_hf}
    lost = sorted(name for name in state if name not in placed and not (tied and name == "lm_head.weight"))
    if lost:
        raise ConfigError(f"{source} is not a fine-tune of {base.name}: {', '.join(lost[:3])} have no place in it")
    for name in names:
        if name in to_hf and name in base_tensors:
            want = tuple(int(n) for n in reversed(base_tensors[name].shape))
            have = tuple(state[to_hf[name]].shape)
            if have != want:
                raise ConfigError(
                    f"{source} is not a fine-tune of {base.name}: {to_hf[name]} is {have}, {name} is {want}"
                )


def _copy_metadata(reader: Any, writer: Any, file_type: int) -> None:
    """Every key of the base GGUF (tokenizer, chat template, hyper-parameters, names) but the ones the writer sets
    itself, with ``general.file_type`` saying what the tensors now are."""
    import gguf

    alignment = reader.fields.get(gguf.Keys.General.ALIGNMENT)
    if alignment is not None:
        writer.data_alignment = int(alignment.contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_file_type(int(file_type))
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)


def _undo(processor: str, name: str, values: np.ndarray, heads: dict[str, int]) -> np.ndarray:
    """The inverse of transformers' tensor processor ``processor`` on GGUF tensor ``name``.

    llama (``LlamaTensorProcessor._reverse_permute_weights``): the loader regrouped the rows of attn_q (by
    ``num_attention_heads``) and attn_k (by ``num_key_value_heads``) from llama.cpp's interleaved rotary layout
    into halves, ``reshape(n, d, 2, ...).swapaxes(2, 1)``; llama.cpp's converter's ``permute``,
    ``reshape(n, 2, d, ...).swapaxes(1, 2)``, puts them back. gemma (``Gemma2TensorProcessor``): the loader took 1
    from every norm weight; it is added back."""
    if processor == "LlamaTensorProcessor" and (".attn_q." in name or ".attn_k." in name):
        n_head = heads["num_attention_heads"] if ".attn_q." in name else heads["num_key_value_heads"]
        rows = values.shape[0] // n_head // 2
        return values.reshape(n_head, 2, rows, *values.shape[1:]).swapaxes(1, 2).reshape(values.shape)
    if processor == "Gemma2TensorProcessor" and "norm.weight" in name:
        return values + 1
    return values
