"""A real Hugging Face cache layout in a folder, for loading hub splits offline in tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


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
