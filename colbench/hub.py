"""Named ColBench splits loaded from the Hugging Face dataset hub, pinned to a commit and hash-checked.

The packaged manifest (``colbench/manifests/colbench.json``) names each split: which file of which hub
repository, which rows, and, where a published value was verified, the commit and SHA-256 of the file.
Frontend splits (kind ``hf-websight``) are built from the parquet shards of ``HuggingFaceM4/WebSight`` by
:mod:`colbench.websight`, pinned and hash-checked the same way, shard by shard.
Where the manifest has no verified pin the loader *trusts on first use*: the first download records the
commit it resolved and the file's SHA-256 in ``colbench_home()/hub-pins.json`` (with an
:class:`UnverifiedPinWarning`); every later load asks for that commit and checks that hash. A hash mismatch
is a :class:`~colbench.errors.DataError` naming the file and both hashes. ``docs/data.md`` has the details.

``huggingface_hub`` is an optional dependency (``pip install 'colbench[hub]'``), imported only when a split is
actually loaded.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from colbench.errors import ConfigError, DataError, InfraError
from colbench.tasks import DOMAINS, Domain, Task, load_tasks, task_from_row

__all__ = [
    "BUNDLED",
    "HF_FILE",
    "HF_WEBSIGHT",
    "PINS_FILENAME",
    "SplitSpec",
    "UnverifiedPinWarning",
    "colbench_home",
    "known_splits",
    "load_manifest",
    "load_split",
    "parse_manifest",
    "pins_path",
    "resolve_tasks",
    "split_spec",
]

PINS_FILENAME = "hub-pins.json"
HF_FILE = "hf-file"  # a manifest ``kind`` this version can load: one JSONL file in a hub repository
HF_WEBSIGHT = "hf-websight"  # rows of the WebSight parquet shards, built into frontend tasks (colbench.websight)
_HUB_KINDS = (HF_FILE, HF_WEBSIGHT)

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TRUE = {"1", "true", "yes", "on"}


class UnverifiedPinWarning(UserWarning):
    """A split's commit and hash were recorded on first use, not checked against a published value."""


@dataclass(frozen=True)
class SplitSpec:
    """One named split of the manifest.

    ``start``/``stop`` are the half-open range ``[start, stop)`` of JSON rows (blank lines do not count;
    ``stop=None`` means to the end of the file). ``revision``/``sha256`` are ``None`` unless verified:
    then the pins are taken on first use.

    ``hf-websight`` splits have no ``filename``: ``data_files`` is the glob of the config's parquet shards,
    ``shards`` the shard files in row order when the manifest names them (else they are listed on the hub),
    ``shard_sha256`` the verified SHA-256 of named shards, and the row range counts rows across the shards.
    """

    name: str
    kind: str
    domain: Domain
    repo_id: str
    repo_type: str
    filename: str
    revision: str | None
    sha256: str | None
    start: int
    stop: int | None
    expected_rows: int | None
    license: str
    description: str = ""
    config: str = ""
    data_files: str = ""
    shards: tuple[str, ...] = ()
    shard_sha256: tuple[tuple[str, str], ...] = ()

    @property
    def pin_key(self) -> str:
        """The key of this split's file (or shard glob) in the pins file (splits sharing it share its pin)."""
        return f"{self.repo_type}:{self.repo_id}:{self.filename or self.data_files}"

    @property
    def row_range(self) -> str:
        return f"[{self.start}, {'end' if self.stop is None else self.stop})"


# ------------------------------------------------------------------------------------------------ manifest


def load_manifest() -> dict[str, SplitSpec]:
    """The packaged split manifest, validated (a broken one is a DataError naming the split and field)."""
    return dict(_packaged_manifest())


@cache
def _packaged_manifest() -> tuple[tuple[str, SplitSpec], ...]:
    source = "colbench/manifests/colbench.json"
    try:
        text = resources.files("colbench.manifests").joinpath("colbench.json").read_text(encoding="utf-8")
        raw = json.loads(text)
    except (OSError, ValueError) as exc:
        raise DataError(f"{source}: cannot read the packaged split manifest: {exc}") from exc
    return tuple(parse_manifest(raw, source=source).items())


def parse_manifest(raw: Any, *, source: str = "<manifest>") -> dict[str, SplitSpec]:
    """Validate a decoded manifest document (format 1) into split specs."""
    if not isinstance(raw, dict) or raw.get("format") != 1 or not isinstance(raw.get("splits"), dict):
        raise DataError(f'{source}: expected an object with "format": 1 and a "splits" object')
    return {name: _parse_split(name, entry, f"{source}: split {name!r}") for name, entry in raw["splits"].items()}


def _parse_split(name: str, entry: Any, where: str) -> SplitSpec:
    if not isinstance(entry, dict):
        raise DataError(f"{where}: expected an object")

    def text(field: str, *, required: bool = True) -> str:
        value = entry.get(field, "" if not required else None)
        if not isinstance(value, str) or (required and not value):
            raise DataError(f"{where}: field '{field}': expected a non-empty string")
        return value

    def optional(field: str, pattern: re.Pattern[str], what: str) -> str | None:
        value = entry.get(field)
        if value is None:
            return None
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise DataError(f"{where}: field '{field}': expected null or {what}, got {value!r}")
        return value

    kind = text("kind")
    domain = text("domain")
    if domain not in DOMAINS:
        raise DataError(f"{where}: field 'domain': expected one of {', '.join(DOMAINS)}, got {domain!r}")
    rows = entry.get("rows", [0, None])
    if (
        not isinstance(rows, list)
        or len(rows) != 2
        or not _is_count(rows[0])
        or not (rows[1] is None or (_is_count(rows[1]) and rows[1] > rows[0]))
    ):
        raise DataError(f"{where}: field 'rows': expected [start, stop] with 0 <= start < stop (stop may be null)")
    expected = entry.get("expected_rows")
    if expected is not None and not _is_count(expected):
        raise DataError(f"{where}: field 'expected_rows': expected null or a non-negative integer")
    hf = kind in _HUB_KINDS
    websight = kind == HF_WEBSIGHT
    shards: tuple[str, ...] = ()
    shard_sha256: tuple[tuple[str, str], ...] = ()
    if websight:
        shards, shard_sha256 = _parse_shards(entry, text("data_files"), where)
    return SplitSpec(
        name=name,
        kind=kind,
        domain=domain,
        repo_id=text("repo_id", required=hf),
        repo_type=text("repo_type", required=False) or "dataset",
        filename=text("filename", required=kind == HF_FILE),
        # a revision may be a branch or tag for kinds built from other sources; hub files pin commits only
        revision=optional("revision", _COMMIT if hf else re.compile(r"\S+"), "a 40-hex commit"),
        sha256=None if websight else optional("sha256", _SHA256, "64 lowercase hex digits"),
        start=rows[0],
        stop=rows[1],
        expected_rows=expected,
        license=text("license"),
        description=text("description", required=False),
        config=text("config", required=websight),
        data_files=text("data_files", required=websight),
        shards=shards,
        shard_sha256=shard_sha256,
    )


def _parse_shards(
    entry: dict[str, Any], pattern: str, where: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``shards`` (null or a list of files matching ``data_files``) and ``sha256`` (null or {shard: hex})."""
    raw = entry.get("shards")
    if raw is None:
        shards: tuple[str, ...] = ()
    elif (
        not isinstance(raw, list)
        or not raw
        or not all(isinstance(s, str) and fnmatch.fnmatchcase(s, pattern) for s in raw)
        or len(set(raw)) != len(raw)
    ):
        raise DataError(f"{where}: field 'shards': expected null or a list of distinct files matching {pattern!r}")
    else:
        shards = tuple(raw)
    sums = entry.get("sha256")
    if sums is None:
        return shards, ()
    if not isinstance(sums, dict):
        raise DataError(f"{where}: field 'sha256': expected null or an object {{shard file: sha256}}")
    for shard, digest in sums.items():
        if not fnmatch.fnmatchcase(shard, pattern) or not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise DataError(
                f"{where}: field 'sha256.{shard}': expected a shard matching {pattern!r} -> 64 lowercase hex digits"
            )
    return shards, tuple(sorted(sums.items()))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# Small samples shipped inside the package, for offline demos and smoke runs (see colbench/data/README.md):
# name -> (path inside the package, domain its rows are validated as).
BUNDLED: dict[str, tuple[str, Domain]] = {
    "backend-sample": ("data/backend_sample.jsonl", "backend"),
    "frontend-sample": ("data/frontend_sample.jsonl", "frontend"),
}


def known_splits() -> list[str]:
    """Names of the splits in the manifest, in manifest order."""
    return list(load_manifest())


def split_spec(name: str) -> SplitSpec:
    """The manifest entry for ``name``; an unknown name is a ConfigError listing the known splits."""
    splits = load_manifest()
    if name not in splits:
        raise ConfigError(f"unknown split {name!r}; known splits: {', '.join(splits) or '(none)'}")
    return splits[name]


# ---------------------------------------------------------------------------------------- cache dir + pins


def colbench_home() -> Path:
    """colbench's own cache folder (pins live here).

    ``$COLBENCH_HOME`` if set, else ``$XDG_CACHE_HOME/colbench``, else ``~/.cache/colbench``.
    """
    home = os.environ.get("COLBENCH_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "colbench"


def pins_path() -> Path:
    """The trust-on-first-use pins file: ``colbench_home()/hub-pins.json``."""
    return colbench_home() / PINS_FILENAME


def _read_pins(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"format": 1, "files": {}}
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable pins file ({exc}); delete it to pin again on the next load") from exc
    if not isinstance(raw, dict) or raw.get("format") != 1 or not isinstance(raw.get("files"), dict):
        raise DataError(f"{path}: not a colbench pins file (format 1); delete it to pin again on the next load")
    return raw


def _pinned_commit(pins: dict[str, Any], key: str) -> str | None:
    entry = pins["files"].get(key)
    commit = entry.get("pinned") if isinstance(entry, dict) else None
    return commit if isinstance(commit, str) and _COMMIT.fullmatch(commit) else None


def _recorded_hash(pins: dict[str, Any], key: str, commit: str) -> str | None:
    entry = pins["files"].get(key)
    commits = entry.get("commits") if isinstance(entry, dict) else None
    record = commits.get(commit) if isinstance(commits, dict) else None
    sha = record.get("sha256") if isinstance(record, dict) else None
    return sha if isinstance(sha, str) else None


def _record_pin(path: Path, key: str, commit: str, record: dict[str, Any], *, make_default: bool) -> None:
    """Add ``commit -> record`` under ``key`` (re-reading the file first) and write it atomically."""
    pins = _read_pins(path)
    entry = pins["files"].setdefault(key, {})
    if not isinstance(entry, dict):
        entry = pins["files"][key] = {}
    commits = entry.setdefault("commits", {})
    if not isinstance(commits, dict):
        commits = entry["commits"] = {}
    commits.setdefault(commit, record)
    if make_default and not _pinned_commit(pins, key):
        entry["pinned"] = commit
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".hub-pins-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(pins, handle, indent=2, sort_keys=True)
                handle.write("\n")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise InfraError(f"{path}: cannot write the pins file: {exc}") from exc


# ------------------------------------------------------------------------------------------------ download


def _offline_default() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _download(
    spec: SplitSpec, revision: str, *, cache_dir: str | None, local_files_only: bool, filename: str | None = None
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

    try:
        from huggingface_hub.errors import (
            EntryNotFoundError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:  # huggingface_hub < 0.24 kept its errors in utils
        from huggingface_hub.utils import (  # type: ignore[attr-defined]
            EntryNotFoundError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

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
    except LocalEntryNotFoundError as exc:
        where = f" {cache_dir}" if cache_dir else ""
        raise InfraError(
            f"split {spec.name!r}: {target} is not in the local Hugging Face cache{where} and the hub "
            "cannot be reached (offline mode or no network); go online once to download it "
            "(unset HF_HUB_OFFLINE, local_files_only=False), or pass a local JSONL file instead of the split "
            "name"
        ) from exc
    except RevisionNotFoundError as exc:
        raise ConfigError(f"split {spec.name!r}: revision {revision!r} not found in {spec.repo_id}") from exc
    except RepositoryNotFoundError as exc:
        raise InfraError(
            f"split {spec.name!r}: the hub refused {spec.repo_type} repository {spec.repo_id!r} "
            f"(not found, gated or bad token): {_first_line(exc)}"
        ) from exc
    except EntryNotFoundError as exc:
        raise DataError(f"split {spec.name!r}: {target}: file not found in the repository") from exc
    except OSError as exc:  # network errors, HTTP 5xx, unwritable cache dir
        raise InfraError(f"split {spec.name!r}: cannot fetch {target}: {_first_line(exc)}") from exc
    path = Path(str(local))
    return path, _commit_of(path, filename)


def _commit_of(path: Path, filename: str) -> str | None:
    """The commit of a file in the HF cache layout ``.../snapshots/<commit>/<filename>``, if it is one."""
    snapshot = path
    for _ in filename.split("/"):
        snapshot = snapshot.parent
    if snapshot.parent.name == "snapshots" and _COMMIT.fullmatch(snapshot.name):
        return snapshot.name
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ------------------------------------------------------------------------------------------------- loading


def load_split(
    name: str,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    local_files_only: bool | None = None,
) -> list[Task]:
    """Load a named split from the dataset hub: pinned, hash-checked, validated.

    ``revision`` overrides the pinned commit (a commit, branch or tag of the hub repository).
    ``cache_dir`` is the Hugging Face cache folder (default: the hub's own, ``HF_HUB_CACHE``).
    ``local_files_only`` never touches the network; ``None`` means: only when ``HF_HUB_OFFLINE`` is set.
    Row errors name ``split:file:line`` and the field. Splits of kind ``hf-websight`` are built from WebSight's
    parquet shards by :func:`colbench.websight.load_websight_split` (errors name ``split:shard: row N``).
    """
    spec = split_spec(name)
    if spec.kind not in _HUB_KINDS:
        raise ConfigError(
            f"split {name!r} is of kind {spec.kind!r}, which this version of colbench cannot load "
            "(build it into a JSONL file and pass that file instead)"
        )
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ConfigError(f"split {name!r}: revision must be a non-empty string, got {revision!r}")
    offline = _offline_default() if local_files_only is None else local_files_only
    if spec.kind == HF_WEBSIGHT:
        from colbench.websight import load_websight_split

        return load_websight_split(spec, revision=revision, cache_dir=cache_dir, local_files_only=offline)
    lock = pins_path()
    pins = _read_pins(lock)
    requested = revision or spec.revision or _pinned_commit(pins, spec.pin_key) or "main"

    path, commit = _download(spec, requested, cache_dir=cache_dir, local_files_only=offline)
    if commit is None and _COMMIT.fullmatch(requested):
        commit = requested
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InfraError(f"split {name!r}: cannot read {path}: {exc.strerror or exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    checked = _check_sha256(
        spec,
        spec.filename,
        path,
        actual,
        verified=spec.sha256,
        key=spec.pin_key,
        pins=pins,
        commit=commit,
        requested=requested,
    )

    tasks, file_rows = _parse_rows(spec, data)

    if not checked:
        if commit is None:
            warnings.warn(
                f"split {name!r}: could not tell the commit of {path}; sha256 {actual} was not checked or pinned",
                UnverifiedPinWarning,
                stacklevel=2,
            )
        else:
            record = {"sha256": actual, "rows": file_rows, "requested": requested, "recorded_at": _now()}
            _record_pin(lock, spec.pin_key, commit, record, make_default=revision is None)
            warnings.warn(
                f"split {name!r}: pinned {spec.repo_id}:{spec.filename} to commit {commit}, sha256 {actual}, "
                f"in {lock}; this pin was recorded on first use, not verified against a published hash",
                UnverifiedPinWarning,
                stacklevel=2,
            )
    return tasks


def _check_sha256(
    spec: SplitSpec,
    filename: str,
    path: Path,
    actual: str,
    *,
    verified: str | None,
    key: str,
    pins: dict[str, Any],
    commit: str | None,
    requested: str,
) -> bool:
    """Compare ``actual`` with the verified hash (when the manifest's revision applies) or the pin recorded for
    ``key`` at ``commit``: True when checked, False when neither exists; a mismatch is a DataError."""
    if verified is not None and (spec.revision is None or spec.revision == commit):
        expected, origin = verified, "the packaged manifest (verified)"
    elif commit is not None and (recorded := _recorded_hash(pins, key, commit)) is not None:
        expected, origin = recorded, f"the pin recorded on first use in {pins_path()}"
    else:
        return False
    if actual != expected:
        raise DataError(
            f"split {spec.name!r}: sha256 mismatch for {spec.repo_id}:{filename}@{commit or requested} "
            f"(local file {path}): expected {expected} (from {origin}), got {actual}; the cached copy is "
            "corrupt or was modified: delete it and load again"
        )
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_rows(spec: SplitSpec, data: bytes) -> tuple[list[Task], int]:
    """Validate the rows of ``spec``'s range: ``(tasks, number of rows in the whole file)``."""
    prefix = f"{spec.name}:{spec.filename}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{prefix}: not UTF-8 text (byte {exc.start})") from exc
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    index = 0
    # line numbers as in load_tasks: universal newlines only (str.splitlines would also split at U+2028 etc.)
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        if index >= spec.start and (spec.stop is None or index < spec.stop):
            where = f"{prefix}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
            task = task_from_row(row, domain=spec.domain, where=where)
            if task.task_id in seen:
                raise DataError(f"{where}: duplicate task_id {task.task_id!r} (first at {seen[task.task_id]})")
            seen[task.task_id] = where
            tasks.append(task)
        index += 1
    if spec.stop is not None and index < spec.stop:
        raise DataError(f"{prefix}: split wants rows {spec.row_range} but the file has only {index} rows")
    if spec.expected_rows is not None and len(tasks) != spec.expected_rows:
        raise DataError(f"{prefix}: expected {spec.expected_rows} rows in {spec.row_range}, found {len(tasks)}")
    if not tasks:
        raise DataError(f"{prefix}: no tasks in rows {spec.row_range}")
    return tasks, index


def resolve_tasks(spec: str, *, cache_dir: str | None = None, local_files_only: bool | None = None) -> list[Task]:
    """Tasks from a JSONL file path or a split name (``NAME`` or ``NAME@REVISION``), as the CLI takes them."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"expected a task file or split name, got {spec!r}")
    if Path(spec).is_file():
        return load_tasks(spec)
    if spec in BUNDLED:
        resource, domain = BUNDLED[spec]
        with resources.as_file(resources.files("colbench").joinpath(resource)) as path:
            return load_tasks(path, domain=domain)
    splits = load_manifest()
    name, sep, revision = spec.partition("@")
    if name in splits and (not sep or revision):
        return load_split(name, revision=revision or None, cache_dir=cache_dir, local_files_only=local_files_only)
    raise ConfigError(f"{spec!r} is not a file and not a split; known splits: {', '.join([*BUNDLED, *splits])}")
