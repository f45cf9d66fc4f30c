"""Where tasks come from: a JSONL file, a bundled sample, or a hub split (``NAME`` or ``NAME@REVISION``).

:func:`load` is what every command and env takes as ``--tasks`` / ``tasks=``; :func:`describe_source` is what a run
records about it (run.json's ``tasks.source``), so a run names its data by content, not by path.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import colbench.tasks.manifest as manifest
import colbench.tasks.pins as pins
from colbench._util.datafiles import data_path
from colbench._util.storage import sha256_file
from colbench.errors import ConfigError, DataError
from colbench.tasks.hub import load_hf_file, offline_default
from colbench.tasks.manifest import BUNDLED, HF_FILE, HF_WEBSIGHT
from colbench.tasks.rows import load_jsonl
from colbench.types.task import Task


def load_split(
    name: str,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    local_files_only: bool | None = None,
) -> list[Task]:
    """Load a named split of the manifest: a bundled sample, or from the dataset hub, pinned and hash-checked.

    ``revision`` overrides the pinned commit (a commit, branch or tag of the hub repository).
    ``cache_dir`` is the Hugging Face cache folder (default: the hub's own, ``HF_HUB_CACHE``).
    ``local_files_only`` never touches the network; ``None`` means: only when ``HF_HUB_OFFLINE`` is set.
    Row errors name ``split:file:line`` (``split:shard: row N`` for WebSight splits) and the field.
    """
    spec = manifest.get_split(name)
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ConfigError(f"split {name!r}: revision must be a non-empty string, got {revision!r}")
    if spec.kind == BUNDLED:
        if revision is not None:
            raise ConfigError(f"split {name!r} is bundled with colbench: it has no revisions")
        return load_jsonl(data_path("tasks", spec.path), domain=spec.domain)
    offline = offline_default() if local_files_only is None else local_files_only
    if spec.kind == HF_FILE:
        return load_hf_file(spec, revision=revision, cache_dir=cache_dir, local_files_only=offline)
    if spec.kind == HF_WEBSIGHT:
        from colbench.tasks.websight import load_websight_split  # needs pyarrow: imported only when asked for

        return load_websight_split(spec, revision=revision, cache_dir=cache_dir, local_files_only=offline)
    raise ConfigError(
        f"split {name!r} is of kind {spec.kind!r}, which this version of colbench cannot load "
        "(build it into a JSONL file and pass that file instead)"
    )


def load(spec: str, *, cache_dir: str | None = None, local_files_only: bool | None = None) -> list[Task]:
    """Tasks from a JSONL file path or a split name (``NAME`` or ``NAME@REVISION``), as the CLI takes them."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"expected a task file or split name, got {spec!r}")
    if Path(spec).is_file():
        return load_jsonl(spec)
    splits = manifest.load_manifest()
    name, sep, revision = spec.partition("@")
    if name in splits and (not sep or revision):
        return load_split(name, revision=revision or None, cache_dir=cache_dir, local_files_only=local_files_only)
    raise ConfigError(f"{spec!r} is not a file and not a split; known splits: {', '.join(splits)}")


def load_shared(spec: str) -> list[Task]:
    """``load(spec)`` read once per process and shared (a file again when its size or time changes): every env of
    a vector env, and every env a trainer makes, gets its tasks without reading the split again."""
    path = Path(spec)
    stamp = (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
    return list(_loaded(spec, stamp))


@lru_cache(maxsize=16)
def _loaded(spec: str, stamp: tuple[int, int] | None) -> tuple[Task, ...]:
    return tuple(load(spec))


def iter_tasks(spec: str) -> Iterator[Task]:
    """The tasks of a file or split, in order."""
    yield from load(spec)


@lru_cache(maxsize=8)
def _by_id(spec: str) -> dict[str, Task]:
    return {task.task_id: task for task in load(spec)}


def get_task(spec: str, task_id: str) -> Task:
    """One task of a file or split by its id (the file or split is read once per process and kept)."""
    tasks = _by_id(spec)
    if task_id not in tasks:
        raise ConfigError(f"{spec}: no task {task_id!r} among its {len(tasks)} tasks")
    return tasks[task_id]


def describe_source(spec: str) -> dict[str, Any]:
    """Where tasks came from: a file (path + sha256), a bundled sample, or a hub split (repo, revision and file
    hash: the manifest's verified values, else the pins recorded on first use)."""
    path = Path(spec)
    if path.is_file():
        return {"kind": "file", "path": str(path.resolve()), "sha256": sha256_file(path)}
    name, _, revision = spec.partition("@")
    split = manifest.get_split(name)
    if split.kind == BUNDLED:
        return {"kind": "bundled", "name": name, "sha256": sha256_file(data_path("tasks", split.path))}
    commit = revision or split.revision
    sha = split.sha256 if split.revision is None or commit == split.revision else None
    try:
        recorded = pins.read_pins(pins.pins_path())
    except DataError:  # an unreadable pins file: nothing pinned as far as the record goes (loading says why)
        recorded = {"files": {}}
    if commit is None:
        commit = pins.pinned_commit(recorded, split.pin_key)
    if sha is None and commit is not None:
        sha = pins.recorded_hash(recorded, split.pin_key, commit)
    return {
        "kind": split.kind,
        "split": name,
        "repo_id": split.repo_id,
        "filename": split.filename or split.data_files,
        "revision": commit,
        "sha256": sha,
    }
