"""How colbench writes its files and names content: atomic writes, canonical JSON, SHA-256.

Every file colbench writes for later reading (run.json, pins, reference caches, built task files, screenshots) goes
through :func:`write_atomic`: a reader, or a process killed mid-write, never sees half a file. Every hash that keys
a cache or identifies a configuration is taken over :func:`canonical_json`, so equal values give equal keys on every
machine and Python version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from colbench.errors import DataError


def colbench_home() -> Path:
    """colbench's own cache folder (hub pins, the sandbox image's root filesystem).

    ``$COLBENCH_HOME`` if set, else ``$XDG_CACHE_HOME/colbench``, else ``~/.cache/colbench``.
    """
    home = os.environ.get("COLBENCH_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "colbench"


def utc_timestamp() -> str:
    """Now, as the ISO 8601 UTC second every colbench record uses (``2026-11-22T10:00:00Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no whitespace, UTF-8 kept as is (cache keys, config hashes, task ids)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def write_atomic(path: str | Path, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it into place.

    ``durable`` also fsyncs the file and its folder, for files that must survive a power cut once written (a run's
    configuration). Parent folders are created. Concurrent writers of one path are safe: each has its own temporary
    file and the last rename wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def write_json_atomic(path: str | Path, value: Any, *, durable: bool = False, sort_keys: bool = False) -> None:
    """``value`` as indented JSON (one trailing newline), written with :func:`write_atomic`."""
    text = json.dumps(value, ensure_ascii=False, indent=2, sort_keys=sort_keys) + "\n"
    write_atomic(path, text, durable=durable)


def write_jsonl_atomic(path: str | Path, rows: Iterable[Any]) -> int:
    """``rows`` as JSON lines, written with :func:`write_atomic`; how many were written."""
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    write_atomic(path, "".join(lines))
    return len(lines)


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new file in ``path`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def iter_jsonl(path: str | Path) -> Iterator[tuple[str, Any]]:
    """Yield ``(file:line, decoded row)``, skipping blank lines; bad JSON is a DataError naming the line."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
