"""Trust on first use for hub splits without a verified pin: ``colbench_home()/hub-pins.json``.

The first download of a split's file records the commit it resolved to and the file's SHA-256; every later load
asks for that commit and checks that hash, so a split cannot change under a leaderboard without an error. The file
maps a pin key (``repo_type:repo_id:file``) to ``{"pinned": commit, "commits": {commit: record}}``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from colbench._util.storage import colbench_home, write_json_atomic
from colbench.errors import DataError, InfraError

PINS_FILENAME = "hub-pins.json"
COMMIT = re.compile(r"[0-9a-f]{40}")


class UnverifiedPinWarning(UserWarning):
    """A split's commit and hash were recorded on first use, not checked against a published value."""


def pins_path() -> Path:
    """The trust-on-first-use pins file: ``colbench_home()/hub-pins.json``."""
    return colbench_home() / PINS_FILENAME


def read_pins(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"format": 1, "files": {}}
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable pins file ({exc}); delete it to pin again on the next load") from exc
    if not isinstance(raw, dict) or raw.get("format") != 1 or not isinstance(raw.get("files"), dict):
        raise DataError(f"{path}: not a colbench pins file (format 1); delete it to pin again on the next load")
    return raw


def _record(pins: dict[str, Any], key: str, commit: str) -> dict[str, Any] | None:
    entry = pins["files"].get(key)
    commits = entry.get("commits") if isinstance(entry, dict) else None
    record = commits.get(commit) if isinstance(commits, dict) else None
    return record if isinstance(record, dict) else None


def pinned_commit(pins: dict[str, Any], key: str) -> str | None:
    entry = pins["files"].get(key)
    commit = entry.get("pinned") if isinstance(entry, dict) else None
    return commit if isinstance(commit, str) and COMMIT.fullmatch(commit) else None


def recorded_hash(pins: dict[str, Any], key: str, commit: str) -> str | None:
    sha = (_record(pins, key, commit) or {}).get("sha256")
    return sha if isinstance(sha, str) else None


def recorded_files(pins: dict[str, Any], key: str, commit: str) -> list[str] | None:
    files = (_record(pins, key, commit) or {}).get("files")
    if isinstance(files, list) and files and all(isinstance(f, str) for f in files):
        return list(files)
    return None


def record_pin(path: Path, key: str, commit: str, record: dict[str, Any], *, make_default: bool) -> None:
    """Add ``commit -> record`` under ``key`` (re-reading the file first) and write it atomically."""
    pins = read_pins(path)
    entry = pins["files"].setdefault(key, {})
    if not isinstance(entry, dict):
        entry = pins["files"][key] = {}
    commits = entry.setdefault("commits", {})
    if not isinstance(commits, dict):
        commits = entry["commits"] = {}
    commits.setdefault(commit, record)
    if make_default and not pinned_commit(pins, key):
        entry["pinned"] = commit
    try:
        write_json_atomic(path, pins, sort_keys=True)
    except OSError as exc:
        raise InfraError(f"{path}: cannot write the pins file: {exc}") from exc
