"""Frontend tasks built from WebSight v0.2, the way the ColBench release built them.

The ColBench frontend tasks are not hosted anywhere: the SWEET-RL release rebuilds them from rows 0-20000 of the
Hugging Face dataset ``HuggingFaceM4/WebSight``, config ``v0.2`` (train = rows 0-10000, test = rows 10000-20000, the
paper's test set = the first 500 test rows). One WebSight row becomes one ColBench frontend row:

- ``problem_description`` = the row's ``llm_generated_idea`` (the short description the page was generated from);
- ``ground_truth`` = the row's ``text`` (the HTML + Tailwind page) with its image URLs rewritten by
  :func:`colbench_image_urls`, exactly as the original data script did (``replace_urls`` of sweet_rl);
- nothing else: no ``task_id`` field, so a task's id is the content hash of :mod:`colbench.tasks`, the same id the
  original script's JSONL rows get, and ``hidden_information`` defaults to the ground truth.

A split of kind ``hf-websight`` in the manifest names the repository, the config, the glob of its parquet shards
(``data_files``), the row range and the expected number of rows. Rows are numbered across the shards in sorted
file order (the order ``datasets.load_dataset`` gives them). Which shard holds which rows is not published, so the
loader reads the shards in order, counting their rows, until the range is covered. The shard list comes from the
manifest (``shards``) or, when it names none, from listing the repository at the pinned commit; the list, the
commit and each shard's SHA-256 are pinned on first use like the ``hf-file`` splits (see ``docs/tasks.md``).

Reading parquet needs ``pyarrow`` (``pip install 'colbench[hub]'``); it is imported only when a split is built.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import colbench.tasks.manifest as manifest
import colbench.tasks.pins as pins
from colbench._util.storage import utc_timestamp, write_atomic
from colbench.errors import ConfigError, DataError, InfraError
from colbench.tasks.hub import check_sha256, checked_rows, download, first_line, hub_errors, offline_default, refused
from colbench.tasks.manifest import HF_WEBSIGHT, Split
from colbench.tasks.pins import COMMIT, UnverifiedPinWarning
from colbench.tasks.rows import task_from_row
from colbench.types.task import Task

__all__ = [
    "DESCRIPTION_COLUMN",
    "HTML_COLUMN",
    "build_frontend",
    "colbench_image_urls",
    "frontend_row",
    "load_websight_split",
    "websight_splits",
    "write_frontend_jsonl",
]

DESCRIPTION_COLUMN = "llm_generated_idea"  # WebSight v0.2: the idea the page was generated from
HTML_COLUMN = "text"  # WebSight v0.2: the page's HTML + Tailwind code
_COLUMNS = (DESCRIPTION_COLUMN, HTML_COLUMN)

# The two rewrites of the original data script, with its exact semantics (its output is the ColBench release):
# Unsplash "source" random images -> picsum photo 48 of the same size. ``[\w=]+`` stops at the first character
# that is not a word character or "=", so "?real-estate" leaves "-estate" behind (".../id/48/1600/400-estate"):
# the real ColBench test rows have exactly that, and reproducing the release matters more than tidying it.
_UNSPLASH_RANDOM = re.compile(r"https://source\.unsplash\.com/random/(\d+)x(\d+)/\?[\w=]+")
# Random picsum photos of a given size -> picsum photo 48 of that size.
_PICSUM_RANDOM = re.compile(r"https://picsum\.photos/(\d+)/(\d+)")


def colbench_image_urls(html: str) -> str:
    """Point a WebSight page's pictures at ``https://picsum.photos/id/48/W/H``, as the ColBench release does.

    Why: the agent's prompt asks for images from picsum id 48 only, so reference and answer pages use the same
    picture; ``source.unsplash.com`` no longer serves images at all. Any other URL is left as it is.
    """
    html = _UNSPLASH_RANDOM.sub(lambda m: f"https://picsum.photos/id/48/{m[1]}/{m[2]}", html)
    return _PICSUM_RANDOM.sub(r"https://picsum.photos/id/48/\1/\2", html)


def frontend_row(description: str, html: str) -> dict[str, str]:
    """The ColBench frontend row of one WebSight row (its ``llm_generated_idea`` and ``text``)."""
    return {"problem_description": description, "ground_truth": colbench_image_urls(html)}


# ------------------------------------------------------------------------------------------------- loading


def load_websight_split(
    spec: Split, *, revision: str | None, cache_dir: str | None, local_files_only: bool
) -> list[Task]:
    """Build an ``hf-websight`` split into frontend tasks: shards pinned and hash-checked, rows validated.

    Called by :func:`colbench.tasks.sources.load_split` (use that). Errors name ``split:shard: row N`` (N counts rows
    across the shards, as the manifest's range does) and the WebSight column.
    """
    if spec.kind != HF_WEBSIGHT:
        raise ConfigError(f"split {spec.name!r} is of kind {spec.kind!r}, not {HF_WEBSIGHT!r}")
    parquet = _pyarrow_parquet(spec)
    lock = pins.pins_path()
    recorded_pins = pins.read_pins(lock)
    requested = revision or spec.revision or pins.pinned_commit(recorded_pins, spec.pin_key) or "main"
    commit = requested if COMMIT.fullmatch(requested) else None

    listed = False
    shards: list[str]
    if spec.shards:
        shards = list(spec.shards)
    elif commit is not None and (recorded := pins.recorded_files(recorded_pins, spec.pin_key, commit)) is not None:
        shards = recorded
    elif local_files_only:
        raise InfraError(
            f"split {spec.name!r}: the shard list of {spec.repo_id} {spec.data_files} at {requested} is not "
            f"recorded in {lock} and the hub cannot be reached (offline mode or no network); go online once "
            "(unset HF_HUB_OFFLINE, local_files_only=False), or pass a local JSONL file instead of the split name"
        )
    else:
        listed_commit, shards = _list_shards(spec, requested)
        commit, listed = listed_commit or commit, True
        if commit is not None and (recorded := pins.recorded_files(recorded_pins, spec.pin_key, commit)) is not None:
            shards, listed = recorded, False  # a commit's files never change: keep the list pinned before
    if not shards:
        raise DataError(
            f"split {spec.name!r}: no file of {spec.repo_id}@{commit or requested} matches {spec.data_files!r}"
        )

    verified = dict(spec.shard_sha256)
    tasks: list[Task] = []
    new_hashes: list[tuple[str, dict[str, Any]]] = []
    position = 0  # the WebSight row index of the current shard's first row
    used = 0
    for shard in shards:
        if spec.stop is not None and position >= spec.stop:
            break
        path, got = download(
            spec, commit or requested, cache_dir=cache_dir, local_files_only=local_files_only, filename=shard
        )
        commit = commit or got  # the first shard fixes the commit every later shard is fetched at
        actual = _file_sha256(spec, path)
        key = f"{spec.repo_type}:{spec.repo_id}:{shard}"
        checked = check_sha256(
            spec,
            shard,
            path,
            actual,
            verified=verified.get(shard),
            key=key,
            recorded=recorded_pins,
            commit=commit,
            requested=requested,
        )
        start = max(spec.start - position, 0)
        stop = None if spec.stop is None else spec.stop - position
        file = f"split {spec.name!r}: {spec.repo_id}:{shard}@{commit or requested}"
        rows, picked = _shard_rows(parquet, path, file, start, stop)
        for index, description, html in picked:
            where = f"{spec.name}:{shard}: row {position + index}"
            for column, value in ((DESCRIPTION_COLUMN, description), (HTML_COLUMN, html)):
                if not isinstance(value, str) or not value.strip():
                    got_text = "null" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"
                    raise DataError(f"{where}: column {column!r}: expected a non-empty string, got {got_text}")
            tasks.append(task_from_row(frontend_row(description, html), domain=spec.domain, where=where))
        if not checked:
            new_hashes.append(
                (key, {"sha256": actual, "rows": rows, "requested": requested, "recorded_at": utc_timestamp()})
            )
        position += rows
        used += 1

    prefix = f"{spec.name}: {spec.repo_id} {spec.data_files}"
    short = f"the {used} shards at {commit or requested} hold only {position} rows"
    tasks = checked_rows(spec, prefix, tasks, short if spec.stop is not None and position < spec.stop else None)

    _pin(spec, lock, recorded_pins, commit, requested, shards, new_hashes, listed=listed, make_default=revision is None)
    return tasks


def _pin(
    spec: Split,
    lock: Path,
    recorded: dict[str, Any],
    commit: str | None,
    requested: str,
    shards: list[str],
    new_hashes: list[tuple[str, dict[str, Any]]],
    *,
    listed: bool,
    make_default: bool,
) -> None:
    """Record what this load trusted on first use: the shard list at ``commit`` and each new shard's hash."""
    if commit is None:
        if new_hashes or listed:
            warnings.warn(
                f"split {spec.name!r}: could not tell the commit of {spec.repo_id}@{requested}; the shards' sha256 "
                "were not checked or pinned",
                UnverifiedPinWarning,
                stacklevel=4,  # _pin < load_websight_split < sources.load_split < the caller
            )
        return
    # the default commit is trusted on first use unless the manifest names a verified one
    new_default = make_default and spec.revision is None and pins.pinned_commit(recorded, spec.pin_key) is None
    if listed or new_default:
        record = {"files": shards, "requested": requested, "recorded_at": utc_timestamp()}
        pins.record_pin(lock, spec.pin_key, commit, record, make_default=new_default)
    for key, record in new_hashes:
        pins.record_pin(lock, key, commit, record, make_default=False)
    if new_hashes or listed or new_default:
        what = ", ".join(
            part
            for part, new in (
                ("the default commit", new_default),
                ("the shard list", listed),
                (f"{len(new_hashes)} shard sha256", bool(new_hashes)),
            )
            if new
        )
        warnings.warn(
            f"split {spec.name!r}: pinned {spec.repo_id} {spec.data_files} to commit {commit} ({what}) in {lock}; "
            "this pin was recorded on first use, not verified against a published hash",
            UnverifiedPinWarning,
            stacklevel=4,  # _pin < load_websight_split < sources.load_split < the caller
        )


def _list_shards(spec: Split, revision: str) -> tuple[str | None, list[str]]:
    """The commit ``revision`` resolves to and the repository's files matching ``data_files``, sorted."""
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:
        raise ConfigError(
            f"building split {spec.name!r} needs huggingface_hub and pyarrow: pip install 'colbench[hub]'"
        ) from exc
    errors = hub_errors()
    try:
        info = HfApi().repo_info(spec.repo_id, repo_type=spec.repo_type, revision=revision)
    except (errors.RevisionNotFoundError, errors.RepositoryNotFoundError) as exc:
        raise refused(spec, revision, exc) from exc
    except Exception as exc:  # offline mode, HTTP 5xx (OSError); transport errors of the HTTP client (not OSError)
        raise InfraError(
            f"split {spec.name!r}: cannot list the files of {spec.repo_id}@{revision}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from exc
    names = [getattr(s, "rfilename", None) for s in (getattr(info, "siblings", None) or ())]
    files = sorted(n for n in names if isinstance(n, str) and fnmatch.fnmatchcase(n, spec.data_files))
    sha = getattr(info, "sha", None)
    return (sha if isinstance(sha, str) and COMMIT.fullmatch(sha) else None), files


def _pyarrow_parquet(spec: Split) -> Any:
    try:
        return importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise ConfigError(
            f"building split {spec.name!r} from WebSight parquet shards needs pyarrow: pip install 'colbench[hub]'"
        ) from exc


def _file_sha256(spec: Split, path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InfraError(f"split {spec.name!r}: cannot read {path}: {exc.strerror or exc}") from exc
    return digest.hexdigest()


def _shard_rows(
    parquet: Any, path: Path, where: str, start: int, stop: int | None
) -> tuple[int, list[tuple[int, Any, Any]]]:
    """``(rows in the shard, [(shard row, description, html)] for shard rows [start, stop))``.

    Reads only the two text columns of the row groups that overlap the range (never the screenshots).
    """
    try:
        handle = parquet.ParquetFile(str(path))
        names = list(handle.schema_arrow.names)
        meta = handle.metadata
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise DataError(f"{where}: not a readable parquet file ({path}): {first_line(exc)}") from exc
    for column in _COLUMNS:
        if column not in names:
            raise DataError(f"{where}: missing column {column!r} (the file has: {', '.join(names) or 'none'})")
    total = int(meta.num_rows)
    picked: list[tuple[int, Any, Any]] = []
    offset = 0
    for group in range(meta.num_row_groups):
        size = int(meta.row_group(group).num_rows)
        lo, hi = max(start, offset), min(offset + size, total if stop is None else stop)
        if lo < hi:
            try:
                table = handle.read_row_group(group, columns=list(_COLUMNS))
            except (OSError, ValueError) as exc:
                raise DataError(f"{where}: cannot read row group {group}: {first_line(exc)}") from exc
            descriptions = table.column(DESCRIPTION_COLUMN).to_pylist()
            pages = table.column(HTML_COLUMN).to_pylist()
            picked.extend((i, descriptions[i - offset], pages[i - offset]) for i in range(lo, hi))
        offset += size
    return total, picked


# ---------------------------------------------------------------------------------------------- JSONL out


def websight_splits() -> list[str]:
    """Names of the manifest's splits that are built from WebSight."""
    return [name for name, spec in manifest.load_manifest().items() if spec.kind == HF_WEBSIGHT]


def write_frontend_jsonl(tasks: Iterable[Task], out: str | Path) -> int:
    """Write tasks as ColBench frontend JSONL, atomically: ``{"problem_description", "ground_truth"}`` per line.

    The lines are ``json.dumps`` of exactly the fields the original data script wrote, in its order, so a built
    split is byte-for-byte the file that script writes for the same rows, and loads with the same task ids.
    """
    lines = [
        json.dumps({"problem_description": t.problem_description, "ground_truth": t.ground_truth}) + "\n" for t in tasks
    ]
    try:
        write_atomic(out, "".join(lines))
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write the task file: {exc.strerror or exc}") from exc
    return len(lines)


def build_frontend(
    split: str,
    out: str | Path,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    local_files_only: bool | None = None,
) -> list[Task]:
    """Build a WebSight frontend split (``frontend-test``, ...) into a ColBench JSONL file; returns its tasks."""
    spec = manifest.get_split(split)
    if spec.kind != HF_WEBSIGHT:
        raise ConfigError(
            f"split {split!r} is not built from WebSight (kind {spec.kind!r}); WebSight splits: "
            f"{', '.join(websight_splits()) or '(none)'}"
        )
    offline = offline_default() if local_files_only is None else local_files_only
    tasks = load_websight_split(spec, revision=revision, cache_dir=cache_dir, local_files_only=offline)
    write_frontend_jsonl(tasks, out)
    return tasks
