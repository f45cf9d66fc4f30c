"""Embedders: the numpy PNG decoder, the deterministic TestEmbedder, and CLIP weights loading and preprocessing.

CLIP tests build ViT-B-32 with random weights through open_clip (no hub is reachable), save them in every format
the loader accepts, and check that what ``ClipEmbedder`` computes equals the source model's output.
"""

from __future__ import annotations

import io
import re
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from colbench.domains.frontend.embed import (
    CLIP_HUB_FILES,
    CLIP_HUB_REPO,
    WEIGHTS_ENV,
    ClipEmbedder,
    Embedder,
    TestEmbedder,
    decode_png,
    make_embedder,
    preprocess,
    resolve_clip_weights,
)
from colbench.errors import ConfigError, DataError


def encode_png(pixels: np.ndarray, filters: list[int] | None = None) -> bytes:
    """A PNG (RGB or RGBA, 8-bit) whose rows use the given filter types (default: cycle through all five)."""
    height, width, channels = pixels.shape
    colour = {3: 2, 4: 6}[channels]
    data = pixels.astype(np.int16)
    rows = []
    for y in range(height):
        kind = filters[y % len(filters)] if filters else y % 5
        x = data[y]
        a = np.vstack([np.zeros((1, channels), np.int16), x[:-1]])
        b = data[y - 1] if y else np.zeros_like(x)
        c = np.vstack([np.zeros((1, channels), np.int16), b[:-1]])
        if kind == 0:
            pred = np.zeros_like(x)
        elif kind == 1:
            pred = a
        elif kind == 2:
            pred = b
        elif kind == 3:
            pred = (a + b) >> 1
        else:
            pa, pb, pc = np.abs(b - c), np.abs(a - c), np.abs(a + b - 2 * c)
            pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        rows.append(bytes([kind]) + ((x - pred) & 255).astype(np.uint8).tobytes())

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def page_like(
    height: int = 180, width: int = 320, seed: int = 0, header: tuple[int, int, int] = (34, 197, 94)
) -> np.ndarray:
    """A synthetic 'web page': white background, a coloured header bar, a few text-like grey blocks."""
    rng = np.random.default_rng(seed)
    pixels = np.full((height, width, 3), 255, np.uint8)
    pixels[: height // 8] = header
    for _ in range(6):
        y, x = int(rng.integers(height // 6, height - 12)), int(rng.integers(0, width - 60))
        pixels[y : y + 8, x : x + int(rng.integers(20, 60))] = rng.integers(0, 120)
    return pixels


# -- PNG decoding ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [3, 4])
def test_png_decoding_undoes_every_filter_and_drops_alpha(channels: int) -> None:
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(23, 17, channels), dtype=np.uint8)
    pixels[5:9] = pixels[4]  # flat stretches exercise the Paeth ties
    png = encode_png(pixels)  # every row filter type in turn
    assert np.array_equal(decode_png(png), pixels[..., :3])


def test_bad_png_is_a_data_error() -> None:
    with pytest.raises(DataError, match="PNG"):
        decode_png(b"not a png")
    with pytest.raises(DataError, match="PNG"):
        decode_png(b"\x89PNG\r\n\x1a\n garbage")


# -- the test embedder -------------------------------------------------------------------------------------------------


def test_test_embedder_is_deterministic_normalised_and_honestly_named() -> None:
    images = [encode_png(page_like(seed=s)) for s in range(3)] + [encode_png(page_like(720, 1280, seed=3))]
    first = TestEmbedder().embed(images)
    again = TestEmbedder().embed(list(reversed(images)))[::-1]
    assert first.dtype == np.float32 and first.shape == (4, 4 * 32 * 32)
    assert first.tobytes() == again.tobytes()  # bit-identical, independent of batch order and instance
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert TestEmbedder().embed([]).shape == (0, 4 * 32 * 32)
    embedder = make_embedder("test")
    assert isinstance(embedder, Embedder) and embedder.name.startswith("test-")
    flat = TestEmbedder().embed([encode_png(np.full((50, 80, 3), 255, np.uint8))])
    assert np.isclose(np.linalg.norm(flat), 1.0)  # a blank page still gets a unit vector


def test_test_embedder_ranks_identical_over_similar_over_different() -> None:
    reference = page_like(seed=0)
    similar = reference.copy()
    similar[: reference.shape[0] // 8] = (236, 72, 153)  # the header bar recoloured
    different = page_like(seed=7, header=(30, 64, 175))
    ref, same, sim, diff = TestEmbedder().embed([encode_png(p) for p in (reference, reference, similar, different)])
    assert float(ref @ same) == pytest.approx(1.0, abs=1e-6)
    assert float(ref @ same) > float(ref @ sim) > float(ref @ diff)


def test_make_embedder_rejects_unknown_specs() -> None:
    for spec in ("nope", "clip:", "test:x", "CLIP-center"):
        with pytest.raises(ConfigError, match="clip-center-crop"):
            make_embedder(spec)
    with pytest.raises(ConfigError, match="grid"):
        TestEmbedder(grid=1)


# -- CLIP ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: on a small, busy machine (CI, Chromium next door) two threads wait on each other at every
    parallel region, and a forward pass takes ten times as long."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def clip_model() -> Any:
    open_clip = pytest.importorskip("open_clip")
    pytest.importorskip("torch")
    model = open_clip.create_model("ViT-B-32", force_quick_gelu=True)  # random weights: no hub is reachable
    return model.eval()


@pytest.fixture(scope="module")
def weight_files(clip_model: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("clip-weights")
    state = {k: v.contiguous() for k, v in clip_model.state_dict().items()}
    files = {"safetensors": root / "vit.safetensors", "bin": root / "vit.bin"}
    save_file(state, str(files["safetensors"]))  # a whole checkpoint, as on the hub
    torch.save({"state_dict": {k: v for k, v in state.items() if k.startswith("visual.")}}, files["bin"])  # tower only
    return files


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No weights anywhere: an empty hub cache, HF_HUB_OFFLINE=1, a HOME without ~/.cache/clip, no env override."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    return tmp_path / "hub"


def reference_embeddings(model: Any, images: list[bytes], transform: Any) -> np.ndarray:
    import torch
    from PIL import Image

    batch = torch.stack([transform(Image.open(io.BytesIO(png)).convert("RGB")) for png in images])
    with torch.no_grad():
        features = model.visual(batch)
    return (features / features.norm(dim=-1, keepdim=True)).numpy()


@pytest.fixture(scope="module")
def file_embedder(weight_files: dict[str, Path]) -> ClipEmbedder:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv(WEIGHTS_ENV, raising=False)
        embedder = make_embedder(f"clip:{weight_files['safetensors']}")
    assert isinstance(embedder, ClipEmbedder)
    return embedder


@pytest.fixture(scope="module")
def screenshots() -> list[bytes]:
    return [encode_png(page_like(720, 1280, seed=0)), encode_png(page_like(2560, 1280, seed=1))]


def test_clip_from_a_local_file_equals_the_source_model(
    clip_model: Any, file_embedder: ClipEmbedder, screenshots: list[bytes]
) -> None:
    import torch

    embedder = file_embedder
    assert embedder.device == torch.device("cpu")
    got = embedder.embed(screenshots)
    expected = reference_embeddings(clip_model, screenshots, lambda im: torch.from_numpy(preprocess(im, "pad")))
    assert got.dtype == np.float32 and got.shape == (2, 512)
    np.testing.assert_allclose(got, expected, atol=2e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert embedder.name.startswith("clip/ViT-B-32-quickgelu/pad224/w:")
    assert embedder.embed([]).shape == (0, 512)


def test_clip_center_crop_reproduces_open_clips_default_transform(
    clip_model: Any, weight_files: dict[str, Path], file_embedder: ClipEmbedder, screenshots: list[bytes], offline: Path
) -> None:
    import open_clip

    embedder = ClipEmbedder(weight_files["bin"], mode="center-crop", batch_size=1)
    assert embedder.fingerprint == file_embedder.fingerprint  # .bin and .safetensors: the same tensors
    transform = open_clip.image_transform(
        224, is_train=False, mean=open_clip.OPENAI_DATASET_MEAN, std=open_clip.OPENAI_DATASET_STD
    )
    from PIL import Image

    for png in screenshots:  # the input tensors themselves, not only what the model makes of them
        image = Image.open(io.BytesIO(png)).convert("RGB")
        np.testing.assert_allclose(preprocess(image, "center-crop"), transform(image).numpy(), atol=1e-6)
    np.testing.assert_allclose(
        embedder.embed(screenshots), reference_embeddings(clip_model, screenshots, transform), atol=2e-5
    )
    assert "/center-crop224/" in embedder.name


def test_pad_sees_the_whole_page_where_center_crop_misses_the_header() -> None:
    pytest.importorskip("PIL")
    from PIL import Image

    page = page_like(2560, 1280, seed=2)
    changed = page.copy()
    changed[:320] = (236, 72, 153)  # only the top eighth of a tall page differs
    before, after = Image.fromarray(page), Image.fromarray(changed)
    assert np.array_equal(preprocess(before, "center-crop"), preprocess(after, "center-crop"))
    assert not np.array_equal(preprocess(before, "pad"), preprocess(after, "pad"))
    padded = preprocess(Image.fromarray(np.zeros((720, 1280, 3), np.uint8)), "pad")
    assert padded.shape == (3, 224, 224)
    white = (1 - np.array([0.48145466, 0.4578275, 0.40821073])) / np.array([0.26862954, 0.26130258, 0.27577711])
    np.testing.assert_allclose(padded[:, 0, 0], white, rtol=1e-5)  # letterbox margins are white
    np.testing.assert_allclose(
        padded[:, 112, 112],
        -np.array([0.48145466, 0.4578275, 0.40821073]) / np.array([0.26862954, 0.26130258, 0.27577711]),
        rtol=1e-5,
    )


def test_clip_weights_from_the_hub_cache_offline(
    weight_files: dict[str, Path], file_embedder: ClipEmbedder, screenshots: list[bytes], offline: Path
) -> None:
    snapshot = offline / f"models--{CLIP_HUB_REPO.replace('/', '--')}" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    (snapshot / CLIP_HUB_FILES[1]).symlink_to(weight_files["bin"])
    from_hub = make_embedder("clip")
    assert isinstance(from_hub, ClipEmbedder) and from_hub.weights_path == snapshot / CLIP_HUB_FILES[1]
    # The same weights from another file format: the same name (the fingerprint is over the tensors, not the file).
    assert from_hub.name == file_embedder.name
    np.testing.assert_array_equal(from_hub.embed(screenshots), file_embedder.embed(screenshots))
    (snapshot / CLIP_HUB_FILES[0]).symlink_to(weight_files["safetensors"])
    assert resolve_clip_weights() == snapshot / CLIP_HUB_FILES[0]  # safetensors first


def test_clip_weights_from_the_environment_variable(
    weight_files: dict[str, Path], offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEIGHTS_ENV, str(weight_files["bin"]))
    assert resolve_clip_weights() == weight_files["bin"]
    assert resolve_clip_weights(weight_files["safetensors"]) == weight_files["safetensors"]  # an argument wins
    monkeypatch.setenv(WEIGHTS_ENV, str(offline / "missing.bin"))
    with pytest.raises(ConfigError, match=r"\$COLBENCH_CLIP_WEIGHTS '.*missing\.bin' does not exist"):
        ClipEmbedder()


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.jit.trace is deprecated
def test_clip_weights_from_openais_torchscript_archive(
    clip_model: Any, file_embedder: ClipEmbedder, screenshots: list[bytes], offline: Path, tmp_path: Path
) -> None:
    """OpenAI's own ViT-B-32.pt is a TorchScript archive (torch.load refuses it); built here with the same names."""
    import torch

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.visual = clip_model.visual  # the image tower is all the loader reads (keeps the file small)
            self.logit_scale = clip_model.logit_scale
            self.register_buffer("input_resolution", torch.tensor(224))  # extras OpenAI's archive carries

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.logit_scale

    archive = tmp_path / "ViT-B-32.pt"
    torch.jit.trace(Holder(), torch.ones(1), check_trace=False).save(str(archive))
    embedder = ClipEmbedder(archive)
    assert embedder.name == file_embedder.name
    np.testing.assert_array_equal(embedder.embed(screenshots), file_embedder.embed(screenshots))


def test_missing_clip_weights_are_a_config_error_saying_how_to_get_them(offline: Path) -> None:
    pytest.importorskip("open_clip")
    with pytest.raises(ConfigError) as caught:
        make_embedder("clip")
    message = str(caught.value)
    assert "\n" not in message
    assert "HF_HUB_OFFLINE" in message and WEIGHTS_ENV in message and "clip:/path" in message
    with pytest.raises(ConfigError, match="does not exist"):
        make_embedder(f"clip:{offline / 'nowhere.safetensors'}")


def test_without_network_the_download_fails_at_once(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    pytest.importorskip("huggingface_hub")
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def no_dns(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(ConfigError, match=r"huggingface\.co does not resolve.*COLBENCH_CLIP_WEIGHTS"):
        resolve_clip_weights()
    with pytest.raises(ConfigError, match="downloads are off"):
        resolve_clip_weights(download=False)


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".safetensors"])
def test_corrupt_clip_weights_are_a_config_error_naming_the_file(suffix: str, tmp_path: Path, offline: Path) -> None:
    pytest.importorskip("open_clip")
    bad = tmp_path / f"broken{suffix}"
    bad.write_bytes(b"\x00not weights at all" * 64)
    with pytest.raises(ConfigError, match=re.escape(f"could not load CLIP ViT-B-32 weights from '{bad}'")):
        ClipEmbedder(bad)


def test_weights_of_another_model_are_refused(tmp_path: Path, offline: Path) -> None:
    torch = pytest.importorskip("torch")
    wrong = tmp_path / "other.bin"
    torch.save({"visual.conv1.weight": torch.zeros(3)}, wrong)
    with pytest.raises(ConfigError, match=r"other\.bin.*Missing key"):
        ClipEmbedder(wrong)
    torch.save({"vision_model.embeddings.patch_embedding.weight": torch.zeros(3)}, wrong)
    with pytest.raises(ConfigError, match="transformers checkpoints are not supported"):
        ClipEmbedder(wrong)


def test_missing_clip_extra_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "open_clip", None)
    with pytest.raises(ConfigError, match=r"pip install 'colbench\[clip\]'"):
        ClipEmbedder()


def test_bad_clip_arguments(offline: Path) -> None:
    with pytest.raises(ConfigError, match="mode"):
        ClipEmbedder(mode="tiles")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_size"):
        ClipEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="threads"):
        ClipEmbedder(threads=0)


def test_threads_sets_torchs_thread_count(file_embedder: ClipEmbedder, weight_files: dict[str, Path]) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        ClipEmbedder(weight_files["safetensors"], threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _no_real_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Never reach for the network from these tests, whatever the machine's environment says."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield
