"""A real Hugging Face cache layout in a folder, for loading hub splits offline in tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put_snapshot(cache: Path, repo_dir: str, commit: str, files: dict[str, bytes], *, ref: str | None = "main") -> Path:
    """Lay out files as huggingface_hub caches them: blobs/<hash>, snapshots/<commit>/<file>, refs."""
    repo = cache / repo_dir
    for filename, data in files.items():
        blob = repo / "blobs" / sha(data)
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        pointer = repo / "snapshots" / commit / filename
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink() or pointer.exists():
            pointer.unlink()
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    if ref is not None:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)  # huggingface_hub reads it verbatim: no newline
    return repo / "snapshots" / commit


def go_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No hub access for the test: colbench's home in ``tmp_path``, huggingface_hub offline (its constant too: it
    reads ``HF_HUB_OFFLINE`` once, at import), and its default cache pointed at a folder nothing may use."""
    from huggingface_hub import constants as hf_constants

    home = tmp_path / "colbench-home"
    monkeypatch.setenv("COLBENCH_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "default-hf-cache-unused"))
    return home


def empty_cache(tmp_path: Path) -> Path:
    """A Hugging Face cache folder of the test's own."""
    path = tmp_path / "hf-cache"
    path.mkdir()
    return path
