"""Image embedders for frontend similarity: PNG screenshots in, L2-normalised float32 rows out.

Every embedder has a ``name`` that identifies the model, its weights and its preprocessing. Results record it, and
similarities from embedders with different names are never compared (docs/frontend.md).

* ``ClipEmbedder``: open_clip ViT-B-32 with OpenAI's weights, the paper's model. The image tower only, in QuickGELU
  form, as the weights were trained. open_clip 3.x builds plain ``ViT-B-32`` with exact GELU even when given the
  OpenAI weights; it only warns. The weights come from a local file, ``$COLBENCH_CLIP_WEIGHTS``, or the Hugging Face
  hub cache (``timm/vit_base_patch32_clip_224.openai``, where open_clip itself keeps them). The hub is asked only
  when the cache has nothing and ``HF_HUB_OFFLINE`` is not set. Missing or unreadable weights are a ``ConfigError``;
  there is never a silent fallback to random weights.
* ``TestEmbedder``: a small, deterministic numpy embedder for offline tests: a colour thumbnail plus an edge map of
  the letterboxed page. It ranks identical > similar > unrelated pages, but its scores are not CLIP scores; its name
  (``test-...``) says so.

Preprocessing of tall pages (screenshots are 1280 px wide and 720 to 2560 px tall), the ``mode`` of a ClipEmbedder:

* ``"pad"`` (default): letterbox. The whole screenshot is scaled to fit 224x224 (bicubic, longest side 224), centred
  on a white square, then normalised with CLIP's mean and std. The model sees all of the page, header and footer
  included, in one forward pass.
* ``"center-crop"``: the original release's preprocessing (Hugging Face ``CLIPProcessor``, the same as open_clip's
  default transform): shortest side to 224 (bicubic), centre crop 224x224. For comparison with published numbers.
  It shows the model the middle 56 % of a 1280x720 page's width, or the middle half of a 2560 px page's height, so
  a change to a page's header, navigation bar or footer often does not change the score at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import socket
import threading
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlparse

import numpy as np
import numpy.typing as npt

from colbench.errors import ConfigError, DataError

if TYPE_CHECKING:
    from PIL.Image import Image

Embeddings = npt.NDArray[np.float32]
PreprocessMode = Literal["pad", "center-crop"]
PREPROCESS_MODES: tuple[PreprocessMode, ...] = ("pad", "center-crop")

CLIP_ARCH = "ViT-B-32"
CLIP_HUB_REPO = "timm/vit_base_patch32_clip_224.openai"
"""Where open_clip keeps the OpenAI ViT-B-32 weights on the Hugging Face hub (its ``pretrained="openai"``)."""
CLIP_HUB_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
CLIP_OPENAI_CACHE = Path("~/.cache/clip/ViT-B-32.pt")
"""Where open_clip's direct download from OpenAI puts the same weights (a TorchScript archive)."""
WEIGHTS_ENV = "COLBENCH_CLIP_WEIGHTS"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGE_SIZE = 224
EMBEDDER_SPECS = ("clip", "clip-center-crop", "clip:PATH", "clip-center-crop:PATH", "test")

CLIP_INSTALL_HINT = "install it with `pip install 'colbench[clip]'` (offline tests can use the embedder 'test')"
WEIGHTS_HINT = (
    "download them once on a machine with network access "
    f"(`python -c \"from huggingface_hub import hf_hub_download as d; d('{CLIP_HUB_REPO}', '{CLIP_HUB_FILES[0]}')\"`"
    f" fills the hub cache) or pass a local weights file: `--embedder clip:/path/to/file`, ClipEmbedder(weights=...) "
    f"or ${WEIGHTS_ENV}"
)


@runtime_checkable
class Embedder(Protocol):
    """Turns PNG screenshots into L2-normalised embedding rows (float32, shape ``(len(images), dim)``).

    ``name`` identifies model, weights and preprocessing: two runs are comparable only when their names are equal.
    ``embed`` may be called from any thread (one call at a time is enough).
    """

    @property
    def name(self) -> str: ...

    def embed(self, images: Sequence[bytes]) -> Embeddings: ...


# -- PNG decoding ------------------------------------------------------------------------------------------------------


def decode_png(data: bytes) -> npt.NDArray[np.uint8]:
    """PNG bytes -> ``(height, width, 3)`` uint8 RGB (alpha dropped, as Pillow's ``convert("RGB")`` does)."""
    try:
        from PIL import Image as PILImage
    except ImportError as exc:
        raise ConfigError("decoding screenshots needs Pillow: pip install 'colbench[frontend]'") from exc
    try:
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))
    except Exception as exc:
        raise DataError(f"not a decodable PNG image: {exc}") from exc


# -- the test embedder -------------------------------------------------------------------------------------------------


def _cell_means(values: npt.NDArray[np.float32], rows: int, cols: int) -> npt.NDArray[np.float64]:
    """Mean of ``values`` (h, w[, c]) over a rows x cols grid of (almost) equal cells."""
    height, width = values.shape[:2]
    row_starts = np.linspace(0, height, rows + 1).round().astype(np.intp)[:-1]
    col_starts = np.linspace(0, width, cols + 1).round().astype(np.intp)[:-1]
    sums = np.add.reduceat(np.add.reduceat(values, row_starts, axis=0, dtype=np.float64), col_starts, axis=1)
    counts = np.outer(np.diff(np.append(row_starts, height)), np.diff(np.append(col_starts, width)))
    means: npt.NDArray[np.float64] = sums / (counts[..., None] if sums.ndim == 3 else counts)
    return means


class TestEmbedder:
    """Deterministic numpy features of a page: a colour thumbnail and an edge-density map, both ``grid`` x ``grid``
    cells of the page letterboxed onto a white square, each centred (mean subtracted) and scaled to unit length.

    Similar pages (one block recoloured) stay close; unrelated pages do not. Fast, no torch, no weights. Its
    similarities are NOT CLIP similarities: use it for tests and plumbing only.
    """

    __test__ = False  # not a pytest class, despite the name

    def __init__(self, grid: int = 32) -> None:
        if grid < 2:
            raise ConfigError(f"TestEmbedder grid must be at least 2, got {grid}")
        self.grid = grid
        self.name = f"test-thumb{grid}-edges-v1"

    def embed(self, images: Sequence[bytes]) -> Embeddings:
        rows = [self._features(decode_png(image)) for image in images]
        return np.stack(rows) if rows else np.zeros((0, 4 * self.grid * self.grid), np.float32)

    def _features(self, pixels: npt.NDArray[np.uint8]) -> Embeddings:
        grid = self.grid
        rgb = pixels.astype(np.float32) / 255.0
        grey = rgb @ np.array([0.299, 0.587, 0.114], np.float32)
        edges = np.zeros_like(grey)
        edges[:, 1:] += np.abs(np.diff(grey, axis=1))
        edges[1:, :] += np.abs(np.diff(grey, axis=0))
        height, width = grey.shape
        side = max(height, width)
        rows, cols = max(1, round(height * grid / side)), max(1, round(width * grid / side))
        top, left = (grid - rows) // 2, (grid - cols) // 2
        colour = np.ones((grid, grid, 3))
        colour[top : top + rows, left : left + cols] = _cell_means(rgb, rows, cols)
        density = np.zeros((grid, grid))
        density[top : top + rows, left : left + cols] = _cell_means(edges, rows, cols)
        parts = []
        for part in (colour, density):
            centred = (part - part.mean()).ravel()
            norm = float(np.linalg.norm(centred))
            parts.append(centred / norm if norm > 1e-9 else centred)
        vector = np.concatenate(parts)
        norm = float(np.linalg.norm(vector))
        if norm < 1e-9:  # a flat page: no colour or edge structure at all; a fixed direction
            vector = np.zeros_like(vector)
            vector[0], norm = 1.0, 1.0
        features: Embeddings = (vector / norm).astype(np.float32)
        return features


# -- CLIP --------------------------------------------------------------------------------------------------------------


def _require_clip() -> None:
    try:
        import open_clip  # noqa: F401
        import PIL  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"CLIP similarity needs torch, open_clip and Pillow: {CLIP_INSTALL_HINT}") from exc


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now (as huggingface_hub does at import)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def resolve_clip_weights(weights: str | os.PathLike[str] | None = None, *, download: bool | None = None) -> Path:
    """The weights file to load, offline first: ``weights``, else ``$COLBENCH_CLIP_WEIGHTS``, else the hub cache,
    else open_clip's OpenAI download cache, else (``download`` not False and ``HF_HUB_OFFLINE`` unset) a download
    into the hub cache. Nothing found is a ConfigError saying how to get the weights."""
    explicit = weights if weights is not None else os.environ.get(WEIGHTS_ENV) or None
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            source = "weights file" if weights is not None else f"${WEIGHTS_ENV}"
            raise ConfigError(f"CLIP {source} {str(path)!r} does not exist or is not a file; {WEIGHTS_HINT}")
        return path
    cache = hub_cache_dir()
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError as exc:  # pragma: no cover - open_clip depends on huggingface_hub
        raise ConfigError(f"finding the CLIP weights needs huggingface_hub: {CLIP_INSTALL_HINT}") from exc
    for filename in CLIP_HUB_FILES:
        found = try_to_load_from_cache(CLIP_HUB_REPO, filename, cache_dir=cache)
        if isinstance(found, str) and os.path.isfile(found):
            return Path(found)
    openai_cache = CLIP_OPENAI_CACHE.expanduser()
    if openai_cache.is_file():
        return openai_cache
    offline = _env_true("HF_HUB_OFFLINE")
    looked = f"looked in {cache / ('models--' + CLIP_HUB_REPO.replace('/', '--'))} and {openai_cache}"
    if download is False or offline:
        why = "HF_HUB_OFFLINE is set" if offline and download is not False else "downloads are off"
        raise ConfigError(f"the CLIP {CLIP_ARCH} OpenAI weights are not cached ({looked}; {why}); {WEIGHTS_HINT}")
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:  # fail at once without a network, instead of after the hub client's retries (about 25 s)
        socket.getaddrinfo(host, 443)
        return Path(hf_hub_download(CLIP_HUB_REPO, CLIP_HUB_FILES[0], cache_dir=cache))
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        if isinstance(exc, socket.gaierror):
            detail = f"{host} does not resolve: no network?"
        raise ConfigError(
            f"the CLIP {CLIP_ARCH} OpenAI weights are not cached ({looked}) and downloading them failed "
            f"({detail}); {WEIGHTS_HINT}"
        ) from exc


def _is_torchscript(path: Path) -> bool:
    """OpenAI's own checkpoint (open_clip's URL download) is a TorchScript archive, which ``torch.load`` refuses."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.split("/", 1)[-1].startswith("code/") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


class _DropRandomInitWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "initialized randomly" not in record.getMessage()


@contextlib.contextmanager
def _no_random_init_warning() -> Iterator[None]:
    """open_clip logs "Model initialized randomly" when asked for an empty model; ours is filled right after."""
    root, quiet = logging.getLogger(), _DropRandomInitWarning()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


def _read_state(path: Path) -> dict[str, Any]:
    """The tensors in a checkpoint file: TorchScript archive, safetensors, or a (nested) torch state dict."""
    import torch
    from open_clip.factory import load_state_dict

    if _is_torchscript(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated, but OpenAI's file is one
            state: dict[str, Any] = torch.jit.load(str(path), map_location="cpu").state_dict()  # type: ignore[no-untyped-call]
        return state
    loaded: dict[str, Any] = load_state_dict(str(path), weights_only=True)  # open_clip's reader, no pickled code
    return loaded


def _load_visual(path: Path) -> Any:
    """The image tower of ViT-B-32 (QuickGELU, float32) with the weights in ``path``; any failure names the file.

    The tower is built on the meta device (no random initialisation to pay for, and none that could survive) and
    receives the file's ``visual.*`` tensors, every one of them (strict).
    """
    import open_clip
    import torch

    try:
        state = _read_state(path)
        visual_state = {
            key[len("visual.") :]: value.float() if value.is_floating_point() else value
            for key, value in state.items()
            if key.startswith("visual.")
        }
        if not visual_state:
            raise ValueError(
                "no image tower (visual.*) in it: not an open_clip or OpenAI CLIP checkpoint "
                "(Hugging Face transformers checkpoints are not supported)"
            )
        with _no_random_init_warning(), torch.device("meta"):
            model = open_clip.create_model(CLIP_ARCH, force_quick_gelu=True, device="meta")
        visual = model.visual
        visual.load_state_dict(visual_state, strict=True, assign=True)
    except Exception as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"could not load CLIP {CLIP_ARCH} weights from {str(path)!r}: {type(exc).__name__}"
            + (f": {detail[:300]}" if detail else "")
        ) from exc
    return visual.eval()


def weights_fingerprint(state: dict[str, Any]) -> str:
    """SHA-256 over the image tower's tensors (names, shapes, float32 values): the same weights give the same
    fingerprint whatever file format they came in."""
    import torch

    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().to("cpu", torch.float32).contiguous()
        digest.update(f"{key}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def _resize_bicubic(image: Image, size: tuple[int, int], *, fast: bool) -> Image:
    from PIL import Image as PILImage

    return image.resize(size, PILImage.Resampling.BICUBIC, reducing_gap=3.0 if fast else None)


def preprocess(pixels: Image, mode: PreprocessMode) -> npt.NDArray[np.float32]:
    """One RGB PIL image -> the model's input, ``(3, 224, 224)`` float32, normalised (see the module docstring)."""
    from PIL import Image as PILImage

    width, height = pixels.size
    if mode == "pad":
        scale = IMAGE_SIZE / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        canvas = PILImage.new("RGB", (IMAGE_SIZE, IMAGE_SIZE), (255, 255, 255))
        offset = ((IMAGE_SIZE - size[0]) // 2, (IMAGE_SIZE - size[1]) // 2)
        canvas.paste(_resize_bicubic(pixels, size, fast=True), offset)
        array = np.asarray(canvas)
    elif mode == "center-crop":
        # CLIPProcessor: shortest side to 224, the other int(224 * long / short); crop offsets floor((n - 224) / 2).
        if width <= height:
            size = (IMAGE_SIZE, int(IMAGE_SIZE * height / width))
        else:
            size = (int(IMAGE_SIZE * width / height), IMAGE_SIZE)
        resized = np.asarray(_resize_bicubic(pixels, size, fast=False))
        top, left = (size[1] - IMAGE_SIZE) // 2, (size[0] - IMAGE_SIZE) // 2
        array = resized[top : top + IMAGE_SIZE, left : left + IMAGE_SIZE]
    else:
        raise ConfigError(f"unknown preprocessing mode {mode!r}; expected one of {', '.join(PREPROCESS_MODES)}")
    scaled = array.astype(np.float32) * np.float32(1 / 255)
    normalised = (scaled - np.array(CLIP_MEAN, np.float32)) / np.array(CLIP_STD, np.float32)
    return np.ascontiguousarray(normalised.transpose(2, 0, 1))


class ClipEmbedder:
    """CLIP ViT-B-32 image embeddings (OpenAI weights by default; see the module docstring for where they come from).

    ``weights``: a local file (open_clip state dict ``.bin``/``.pt``/``.safetensors``, or OpenAI's TorchScript
    ``ViT-B-32.pt``); None = ``$COLBENCH_CLIP_WEIGHTS`` or the hub cache. ``mode``: ``"pad"`` or ``"center-crop"``.
    ``device``: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ``"cuda:1"``... ``batch_size``: images per
    forward pass. ``download``: None = fetch into the hub cache when missing unless ``HF_HUB_OFFLINE``; False = never.
    ``threads``: None leaves torch's intra-op thread count alone; a number sets it with ``torch.set_num_threads``,
    which applies to the whole process. Below the core count is faster where Chromium or other work shares the
    cores: torch's threads wait for each other at every parallel region (docs/frontend.md has measurements).
    """

    def __init__(
        self,
        weights: str | os.PathLike[str] | None = None,
        *,
        mode: PreprocessMode = "pad",
        device: str = "auto",
        batch_size: int = 32,
        download: bool | None = None,
        threads: int | None = None,
    ) -> None:
        if mode not in PREPROCESS_MODES:
            raise ConfigError(f"unknown preprocessing mode {mode!r}; expected one of {', '.join(PREPROCESS_MODES)}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        _require_clip()
        import torch

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} requested but torch sees no CUDA device")
        self.mode: PreprocessMode = mode
        self.batch_size = batch_size
        self.weights_path = resolve_clip_weights(weights, download=download)
        visual = _load_visual(self.weights_path)
        self.fingerprint = weights_fingerprint(visual.state_dict())
        self.device = torch.device(device)
        self._visual = visual.to(self.device)
        self.dim = int(visual.output_dim)
        self.name = f"clip/{CLIP_ARCH}-quickgelu/{mode}{IMAGE_SIZE}/w:{self.fingerprint[:12]}"
        self._lock = threading.Lock()
        if threads is not None:
            torch.set_num_threads(threads)

    def embed(self, images: Sequence[bytes]) -> Embeddings:
        import torch
        from PIL import Image as PILImage

        out = np.zeros((len(images), self.dim), np.float32)
        for start in range(0, len(images), self.batch_size):
            batch: list[npt.NDArray[np.float32]] = []
            for data in images[start : start + self.batch_size]:
                try:
                    with PILImage.open(io.BytesIO(data)) as image:
                        rgb = image.convert("RGB")
                except Exception as exc:
                    raise DataError(f"image {start + len(batch)} is not a decodable PNG: {exc}") from exc
                batch.append(preprocess(rgb, self.mode))
            pixels = torch.from_numpy(np.stack(batch)).to(self.device)
            with self._lock, torch.inference_mode():
                features = self._visual(pixels).float()
                features = features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
                out[start : start + len(batch)] = features.cpu().numpy()
        return out


def parse_embedder(spec: str) -> tuple[str, str | None]:
    """An embedder spec as ``(kind, weights path or None)``, checked without loading anything (an env checks its
    ``embedder`` when it is made)."""
    kind, sep, path = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    kind = kind.strip().lower()
    if kind == "test" and not sep:
        return kind, None
    if kind in ("clip", "clip-center-crop") and (path.strip() or not sep):
        return kind, path.strip() or None
    raise ConfigError(f"unknown embedder {spec!r}; expected one of {', '.join(EMBEDDER_SPECS)}")


def make_embedder(spec: str = "clip") -> Embedder:
    """An embedder from its spec: ``clip`` (pad), ``clip-center-crop``, ``clip:PATH`` / ``clip-center-crop:PATH``
    (a local weights file), ``test`` (the offline TestEmbedder: not CLIP scores)."""
    kind, weights = parse_embedder(spec)
    if kind == "test":
        return TestEmbedder()
    mode: PreprocessMode = "pad" if kind == "clip" else "center-crop"
    return ClipEmbedder(weights=weights, mode=mode)
