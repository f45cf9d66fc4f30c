"""The run directory of ``colbench eval`` (the contract is docs/run-format.md): reading and writing it.

``run.json`` is written once, atomically, before the first episode; ``episodes.jsonl`` is append-only, one JSON
object per finished episode attempt, each flushed and fsync'ed before the episode counts as done. Readers take the
last record per ``(task_id, trial)``; a line that is not valid JSON can only be the last one (a run killed in the
middle of a write) and is ignored, or cut off by :func:`read_episodes` with ``repair=True`` before a resume.
"""

from __future__ import annotations

import asyncio
import copy
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from colbench.errors import ConfigError, DataError

FORMAT = 1
RUN_JSON = "run.json"
EPISODES = "episodes.jsonl"
SCREENS = "screens"
CACHE = "cache"
LOCK = ".lock"

# Fields of run.json that describe a run without changing its results: a resume may differ in them. Task data is
# identified by content (the selected ids' hash, the source file's hash), so the path or name it was read from may
# change; both sandbox runtimes pass one conformance suite, so Docker and the local runtime score alike.
NOT_COMPARED = frozenset(
    {"created", "colbench_version", "config_sha256", "runtime", "tasks.spec", "tasks.source.path", "scoring.sandbox"}
)

EpisodeKey = tuple[str, int]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compared_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` without the fields in ``NOT_COMPARED``: what must be equal for a resume."""
    view = copy.deepcopy(dict(run))
    for dotted in NOT_COMPARED:
        *parents, leaf = dotted.split(".")
        node: Any = view
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return view


def config_sha256(run: Mapping[str, Any]) -> str:
    return sha256_text(canonical_json(compared_view(run)))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


_ABSENT = object()


def first_difference(old: Any, new: Any, path: str = "") -> str | None:
    """The first field where two configurations differ, as ``path: old -> new`` (``None`` when equal)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            diff = first_difference(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}" if path else key)
            if diff is not None:
                return diff
        return None
    if old is _ABSENT or new is _ABSENT or old != new:
        before = "(absent)" if old is _ABSENT else _short(old)
        after = "(absent)" if new is _ABSENT else _short(new)
        return f"{path}: {before} -> {after}"
    return None


# ------------------------------------------------------------------------------------------------- run.json


def write_json_atomic(path: Path, value: Mapping[str, Any]) -> None:
    """Write ``value`` to ``path`` through a temporary file, fsync'ed and renamed (never a half-written file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_run_json(out: Path) -> dict[str, Any]:
    path = out / RUN_JSON
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{out} is not a colbench run directory: it has no {RUN_JSON}") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(run, dict) or run.get("format") != FORMAT:
        raise DataError(f"{path}: not a colbench run description of format {FORMAT}")
    return run


def check_out_dir(out: Path, *, resume: bool) -> bool:
    """Whether ``out`` holds a run to resume. A fresh run needs a missing or empty directory (a ``cache/`` left by a
    run that never started is fine); a resume without ``run.json`` but with episodes is refused."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    entries = {p.name for p in out.iterdir()} if out.is_dir() else set()
    ours = entries & {RUN_JSON, EPISODES}
    if not resume:
        if entries - {CACHE, LOCK}:
            raise ConfigError(f"--out {out} is not empty: use --resume to continue the run there, or another --out")
        return False
    if EPISODES in ours and RUN_JSON not in ours:
        raise DataError(f"{out} has {EPISODES} but no {RUN_JSON}: not a run colbench can resume")
    if RUN_JSON not in ours and entries - {CACHE, LOCK}:
        raise ConfigError(f"--out {out} is not empty and holds no colbench run: use another --out")
    return RUN_JSON in ours


def lock_run_dir(out: Path) -> IO[bytes]:
    """Hold ``out/.lock`` for this process (released when the file is closed or the process dies): two runs
    appending to one directory would run episodes twice."""
    handle = open(out / LOCK, "ab")  # noqa: SIM115 (the caller closes it)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ConfigError(f"another colbench eval is writing to {out}: let it end, or use another --out") from None
    return handle


# ------------------------------------------------------------------------------------------- episodes.jsonl


def read_episodes(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records of ``episodes.jsonl`` in file order (a missing file has none).

    A last line that is not valid JSON (torn by a kill) is ignored; with ``repair`` it is cut off, and a valid last
    line without its newline gets one, so appending is safe. An invalid line anywhere else is a ``DataError``.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    records: list[dict[str, Any]] = []
    offset = 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for index, raw in enumerate(lines):
        last = index == len(lines) - 1
        try:
            record = json.loads(raw)
            if not _is_record(record):
                raise ValueError("not an episode record")
        except ValueError as exc:
            if not last:
                raise DataError(f"{path}:{index + 1}: not a valid episode record ({exc})") from exc
            if repair:
                _truncate(path, offset)
            return records
        records.append(record)
        offset += len(raw) + 1
    if repair and data and not data.endswith(b"\n"):
        with open(path, "ab") as out:
            out.write(b"\n")
            out.flush()
            os.fsync(out.fileno())
    return records


def _is_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("task_id"), str)
        and isinstance(record.get("trial"), int)
        and record.get("status") in ("ok", "infra_error")
    )


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as out:
        out.truncate(size)
        out.flush()
        os.fsync(out.fileno())


def latest(records: Iterable[Mapping[str, Any]]) -> dict[EpisodeKey, dict[str, Any]]:
    """The last record per ``(task_id, trial)``; an ``ok`` record is final and never replaced."""
    final: dict[EpisodeKey, dict[str, Any]] = {}
    for record in records:
        key = (str(record["task_id"]), int(record["trial"]))
        if final.get(key, {}).get("status") != "ok":
            final[key] = dict(record)
    return final


class EpisodeWriter:
    """Appends records to ``episodes.jsonl`` from asyncio code without blocking the loop.

    Records that arrive while a write is in progress are written together and fsync'ed once (group commit), in one
    dedicated thread; ``append`` returns when its record is on disk. A kill leaves at worst a torn last line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 (closed by close())
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="colbench-writer")
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((line, done))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        await done

    async def save_file(self, relative: str, data: bytes) -> None:
        """Write a side file (a screenshot) under the run directory, in the writer's thread."""
        target = self.path.parent / relative
        await asyncio.get_running_loop().run_in_executor(self._executor, _write_file, target, data)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await loop.run_in_executor(self._executor, self._write, b"".join(line for line, _ in batch))
                except Exception as exc:
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                else:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
        finally:
            self._flusher = None

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Wait for a write in progress (a cancelled run still leaves whole lines), then close the file."""
        self._executor.shutdown(wait=True)
        self._file.close()


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
