"""``export_gguf`` (``colbench model export-gguf``): a transformers model back as a GGUF the embedded server runs.

The round trip GGUF -> ``export_hf`` -> ``export_gguf`` must give back the base's tensors (dequantised) and metadata,
and the served file must generate what transformers generates from the same weights; a changed weight must reach
the served model. The real embedded model, the real gguf reader and the real llama.cpp server throughout."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_model import needs_model

from colbench.errors import ConfigError
from colbench.llm import LLMClient, llamacpp

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from colbench.llm.export import export_gguf  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


@pytest.fixture(scope="module")
def servers() -> Iterator[None]:
    yield
    llamacpp.close()


def greedy_served(gguf_file: Path | None, max_tokens: int = 24) -> str:
    endpoint = llamacpp.server_endpoint(
        None if gguf_file is None else str(gguf_file), temperature=0.0, max_tokens=max_tokens
    )
    return LLMClient(endpoint).chat(QUESTION).text


def greedy_transformers(model_dir: Path, max_tokens: int = 24) -> str:
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    inputs = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False)
    text: str = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return text


def dequantised(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {t.name: gguf.dequantize(t.data, t.tensor_type) for t in reader.tensors}


def fields(path: Path) -> dict[str, Any]:
    return {name: field.contents() for name, field in gguf.GGUFReader(path).fields.items()}


@pytest.mark.slow
@needs_model
def test_round_trip_gives_back_the_base_tensors_and_metadata(exported_model: Path, tmp_path: Path) -> None:
    base = llamacpp.default_gguf()
    out = export_gguf(exported_model, None, tmp_path / "f32.gguf")
    want, have = dequantised(base), dequantised(out)
    assert list(have) == list(want)  # same tensors, same order
    for name, values in want.items():
        assert have[name].shape == values.shape, name
        assert np.array_equal(have[name], values), name  # exact: q/k permutation undone, nothing else changed
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
    assert types["blk.0.attn_q.weight"] == "F32" and types["blk.0.attn_norm.weight"] == "F32"
    base_fields, out_fields = fields(base), fields(out)
    assert set(out_fields) == set(base_fields)
    assert {k for k in base_fields if base_fields[k] != out_fields[k]} == {"general.file_type"}
    assert out_fields["general.file_type"] == int(gguf.LlamaFileType.ALL_F32)

    half = export_gguf(exported_model, base, tmp_path / "f16.gguf", dtype="f16")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(half).tensors}
    assert types["blk.0.attn_q.weight"] == "F16" and types["blk.0.attn_norm.weight"] == "F32"  # vectors stay F32
    for name, values in dequantised(half).items():
        assert np.allclose(values, want[name], rtol=1e-3, atol=1e-4), name
    assert half.stat().st_size < 0.6 * out.stat().st_size


@pytest.mark.slow
@needs_model
def test_served_export_replies_as_the_base_and_as_transformers(
    exported_model: Path, tmp_path: Path, servers: None
) -> None:
    out = export_gguf(exported_model, None, tmp_path / "round.gguf")
    served = greedy_served(out)
    assert served == greedy_served(None)  # the quantised base: the same greedy reply to a short question
    assert served == greedy_transformers(exported_model)  # float32 on both sides: the same tokens


@pytest.mark.slow
@needs_model
def test_a_changed_weight_reaches_the_served_model(exported_model: Path, tmp_path: Path, servers: None) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(exported_model, dtype=torch.float32)
    with torch.no_grad():
        model.model.layers[-1].mlp.down_proj.weight.mul_(4.0)
        model.model.layers[3].self_attn.q_proj.weight[:64].mul_(-1.0)  # rows of the first head: permuted on export
    changed = tmp_path / "changed"
    model.save_pretrained(changed)
    transformers.AutoTokenizer.from_pretrained(exported_model).save_pretrained(changed)
    done = subprocess.run(
        [sys.executable, "-m", "colbench", "model", "export-gguf", str(changed)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = Path(done.stdout.strip())
    assert out == tmp_path / "changed.gguf" and out.is_file()
    served = greedy_served(out)
    assert served != greedy_served(None)
    assert served == greedy_transformers(changed)


@pytest.mark.slow
@needs_model
def test_a_model_of_another_shape_and_a_missing_dir_are_refused(tmp_path: Path) -> None:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "tiny")
    with pytest.raises(ConfigError, match=re.escape("is not a fine-tune of SmolLM2-135M-Instruct.Q4_1.gguf")):
        export_gguf(tmp_path / "tiny", None, tmp_path / "tiny.gguf")
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".*tmp*"))
    done = subprocess.run(
        [sys.executable, "-m", "colbench", "model", "export-gguf", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no config.json" in done.stderr


def test_bad_inputs_are_one_line_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a transformers model directory"):
        export_gguf(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="bad GGUF dtype 'bf16'"):
        export_gguf(tmp_path, dtype="bf16")  # type: ignore[arg-type]
    bloom = tmp_path / "bloom.gguf"
    writer = gguf.GGUFWriter(bloom, arch="bloom")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    with pytest.raises(ConfigError, match=r"exporting a 'bloom' GGUF is not supported: .*BloomTensorProcessor"):
        export_gguf(tmp_path, bloom)
