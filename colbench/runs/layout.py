"""The files of a run directory, and who may write them (docs/run-format.md)."""

from __future__ import annotations

import fcntl
import re
from pathlib import Path, PurePosixPath
from typing import IO
from urllib.parse import quote

from colbench.errors import ConfigError, DataError

RUN_JSON = "run.json"
EPISODES = "episodes.jsonl"
TASKS_SNAPSHOT = "tasks.jsonl"
SCREENS = "screens"
CACHE = "cache"
LOCK = ".lock"
LOG_FILE = "eval.log"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def screenshot_name(task_id: str, trial: int) -> str:
    """Where an episode's final page goes: ``screens/<task_id>.<trial>.png``, other characters of the id as ``_``."""
    return f"{SCREENS}/{_stem(task_id)}.{trial}.png"


def turn_screenshot_name(task_id: str, trial: int, turn: int) -> str:
    """Where the page of an episode's agent turn ``turn`` (1-based) goes, the page the human saw then:
    ``screens/turns/<task_id>.<trial>.<turn>.png``."""
    return f"{SCREENS}/turns/{_stem(task_id)}.{trial}.{turn}.png"


def reference_screenshot_name(task_id: str) -> str:
    """Where a task's reference page goes (once per task, whatever the trials): ``screens/reference/<task_id>.png``."""
    return f"{SCREENS}/reference/{_stem(task_id)}.png"


def _stem(task_id: str) -> str:
    return _UNSAFE.sub("_", task_id)[:120] or "task"


def safe_relative(name: object, run_dir: Path | None = None) -> str | None:
    """``name`` as a link relative to the run directory (percent-quoted) when it is a plain relative path inside it,
    else None: a record's path is untrusted, so no absolute path, drive or scheme (``:``), backslash, NUL or ``..``.
    With ``run_dir``, the file must also exist there once resolved (a symlink out of the directory does not)."""
    if not isinstance(name, str) or not name or name.startswith("/") or any(c in name for c in "\\:\x00"):
        return None
    if ".." in PurePosixPath(name).parts:
        return None
    if run_dir is not None:
        try:
            target = (run_dir / name).resolve()
        except (OSError, RuntimeError):
            return None
        if not (target.is_relative_to(run_dir.resolve()) and target.is_file()):
            return None
    return quote(name)


def check_out_dir(out: Path, *, resume: bool, marker: str = RUN_JSON, what: str = "run") -> bool:
    """Whether ``out`` holds a run (a ``what`` whose directory holds ``marker``: a probe) to resume. A fresh one needs
    a missing or empty directory (a ``cache/`` left by one that never started is fine); a run's resume without
    ``run.json`` but with episodes is refused."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    entries = {p.name for p in out.iterdir()} if out.is_dir() else set()
    if not resume:
        if entries - {CACHE, LOCK}:
            raise ConfigError(f"--out {out} is not empty: use --resume to continue the {what} there, or another --out")
        return False
    if marker == RUN_JSON and EPISODES in entries and RUN_JSON not in entries:
        raise DataError(f"{out} has {EPISODES} but no {RUN_JSON}: not a run colbench can resume")
    if marker not in entries and entries - {CACHE, LOCK}:
        raise ConfigError(f"--out {out} is not empty and holds no colbench {what}: use another --out")
    return marker in entries


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
