"""Named ColBench splits loaded from the Hugging Face dataset hub, pinned to a commit and hash-checked.

The manifest (:mod:`colbench.tasks.manifest`) names each split: which file of which hub repository, which rows,
and, where a published value was verified, the commit and SHA-256 of the file. Frontend splits (kind
``hf-websight``) are built from the parquet shards of ``HuggingFaceM4/WebSight`` by :mod:`colbench.tasks.websight`,
pinned and hash-checked the same way, shard by shard. Where the manifest has no verified pin the loader *trusts
on first use* (:mod:`colbench.tasks.pins`). A hash mismatch is a :class:`~colbench.errors.DataError` naming the
file and both hashes. ``docs/tasks.md`` has the details.

``huggingface_hub`` is an optional dependency (``pip install 'colbench[hub]'``), imported only when a split is
actually loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any

import colbench.tasks.pins as pins
from colbench._util.storage import utc_timestamp
from colbench.errors import ColbenchError, ConfigError, DataError, InfraError
from colbench.tasks.manifest import Split
from colbench.tasks.pins import COMMIT, UnverifiedPinWarning
from colbench.tasks.rows import task_from_row, unique
from colbench.types.task import Task

_TRUE = {"1", "true", "yes", "on"}


# ------------------------------------------------------------------------------------------------ download


def offline_default() -> bool:
    """Whether hub loads stay offline by default (``HF_HUB_OFFLINE``)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(getattr(constants, "HF_HUB_OFFLINE", False))


def download(
    spec: Split, revision: str, *, cache_dir: str | None, local_files_only: bool, filename: str | None = None
) -> tuple[Path, str | None]:
    """Fetch (or find in the HF cache) the split's file (or ``filename``) at ``revision``: ``(path, commit)``."""
    filename = filename or spec.filename
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise ConfigError(
            f"loading split {spec.name!r} needs huggingface_hub: pip install 'colbench[hub]' "
            "(or pass a local JSONL file instead of a split name)"
        ) from exc

    errors = hub_errors()
    target = f"{spec.repo_id}:{filename}@{revision}"
    try:
        local = hf_hub_download(
            spec.repo_id,
            filename,
            repo_type=spec.repo_type,
            revision=revision,
            cache_dir=cache_dir,
            local_files_only=local_files_only,
        )
    except errors.LocalEntryNotFoundError as exc:
        where = f" {cache_dir}" if cache_dir else ""
        raise InfraError(
            f"split {spec.name!r}: {target} is not in the local Hugging Face cache{where} and the hub "
            "cannot be reached (offline mode or no network); go online once to download it "
            "(unset HF_HUB_OFFLINE, local_files_only=False), or pass a local JSONL file instead of the split "
            "name"
        ) from exc
    except (errors.RevisionNotFoundError, errors.RepositoryNotFoundError) as exc:
        raise refused(spec, revision, exc) from exc
    except errors.EntryNotFoundError as exc:
        raise DataError(f"split {spec.name!r}: {target}: file not found in the repository") from exc
    except OSError as exc:  # network errors, HTTP 5xx, unwritable cache dir
        raise InfraError(f"split {spec.name!r}: cannot fetch {target}: {first_line(exc)}") from exc
    path = Path(str(local))
    return path, _commit_of(path, filename)


def _commit_of(path: Path, filename: str) -> str | None:
    """The commit of a file in the HF cache layout ``.../snapshots/<commit>/<filename>``, if it is one."""
    snapshot = path
    for _ in filename.split("/"):
        snapshot = snapshot.parent
    if snapshot.parent.name == "snapshots" and COMMIT.fullmatch(snapshot.name):
        return snapshot.name
    return None


def hub_errors() -> Any:
    """huggingface_hub's error classes (a module with them as attributes)."""
    return importlib.import_module("huggingface_hub.errors")


def refused(spec: Split, revision: str, exc: BaseException) -> ColbenchError:
    """What the hub's refusal of a repository or a revision means for the user (``exc`` is one of them)."""
    if isinstance(exc, hub_errors().RevisionNotFoundError):
        return ConfigError(f"split {spec.name!r}: revision {revision!r} not found in {spec.repo_id}")
    return InfraError(
        f"split {spec.name!r}: the hub refused {spec.repo_type} repository {spec.repo_id!r} "
        f"(not found, gated or bad token): {first_line(exc)}"
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ------------------------------------------------------------------------------------------------- loading


def load_hf_file(spec: Split, *, revision: str | None, cache_dir: str | None, local_files_only: bool) -> list[Task]:
    """Load a split of kind ``hf-file``: pinned, hash-checked, validated (errors name ``split:file:line``).

    Called by :func:`colbench.tasks.sources.load_split` (use that)."""
    lock = pins.pins_path()
    recorded = pins.read_pins(lock)
    requested = revision or spec.revision or pins.pinned_commit(recorded, spec.pin_key) or "main"

    path, commit = download(spec, requested, cache_dir=cache_dir, local_files_only=local_files_only)
    if commit is None and COMMIT.fullmatch(requested):
        commit = requested
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InfraError(f"split {spec.name!r}: cannot read {path}: {exc.strerror or exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    checked = check_sha256(
        spec,
        spec.filename,
        path,
        actual,
        verified=spec.sha256,
        key=spec.pin_key,
        recorded=recorded,
        commit=commit,
        requested=requested,
    )

    tasks, file_rows = _parse_rows(spec, data)

    if not checked:
        if commit is None:
            warnings.warn(
                f"split {spec.name!r}: could not tell the commit of {path}; sha256 {actual} was not checked or pinned",
                UnverifiedPinWarning,
                stacklevel=3,  # load_hf_file < sources.load_split < the caller
            )
        else:
            record = {"sha256": actual, "rows": file_rows, "requested": requested, "recorded_at": utc_timestamp()}
            pins.record_pin(lock, spec.pin_key, commit, record, make_default=revision is None)
            warnings.warn(
                f"split {spec.name!r}: pinned {spec.repo_id}:{spec.filename} to commit {commit}, sha256 {actual}, "
                f"in {lock}; this pin was recorded on first use, not verified against a published hash",
                UnverifiedPinWarning,
                stacklevel=3,
            )
    return tasks


def check_sha256(
    spec: Split,
    filename: str,
    path: Path,
    actual: str,
    *,
    verified: str | None,
    key: str,
    recorded: dict[str, Any],
    commit: str | None,
    requested: str,
) -> bool:
    """Compare ``actual`` with the verified hash (when the manifest's revision applies) or the pin recorded for
    ``key`` at ``commit`` in ``recorded`` (the pins file's content): True when checked, False when neither exists;
    a mismatch is a DataError."""
    if verified is not None and (spec.revision is None or spec.revision == commit):
        expected, origin = verified, "the packaged manifest (verified)"
    elif commit is not None and (pinned := pins.recorded_hash(recorded, key, commit)) is not None:
        expected, origin = pinned, f"the pin recorded on first use in {pins.pins_path()}"
    else:
        return False
    if actual != expected:
        raise DataError(
            f"split {spec.name!r}: sha256 mismatch for {spec.repo_id}:{filename}@{commit or requested} "
            f"(local file {path}): expected {expected} (from {origin}), got {actual}; the cached copy is "
            "corrupt or was modified: delete it and load again"
        )
    return True


def _parse_rows(spec: Split, data: bytes) -> tuple[list[Task], int]:
    """Validate the rows of ``spec``'s range: ``(tasks, number of rows in the whole file)``."""
    prefix = f"{spec.name}:{spec.filename}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{prefix}: not UTF-8 text (byte {exc.start})") from exc
    tasks: list[Task] = []
    index = 0
    # line numbers as in storage.iter_jsonl: universal newlines only (str.splitlines would also split at U+2028 etc.)
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        if index >= spec.start and (spec.stop is None or index < spec.stop):
            where = f"{prefix}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
            tasks.append(task_from_row(row, domain=spec.domain, where=where))
        index += 1
    short = f"the file has only {index} rows" if spec.stop is not None and index < spec.stop else None
    return checked_rows(spec, prefix, tasks, short), index


def checked_rows(spec: Split, prefix: str, tasks: list[Task], short: str | None) -> list[Task]:
    """``tasks`` without duplicates, as many as the split expects; a DataError naming ``prefix`` otherwise (``short``:
    how the source falls short of the split's rows, None when it holds them all)."""
    tasks = unique(tasks)
    if short is not None:
        raise DataError(f"{prefix}: split wants rows {spec.row_range} but {short}")
    if spec.expected_rows is not None and len(tasks) != spec.expected_rows:
        raise DataError(f"{prefix}: expected {spec.expected_rows} rows in {spec.row_range}, found {len(tasks)}")
    if not tasks:
        raise DataError(f"{prefix}: no tasks in rows {spec.row_range}")
    return tasks
