"""``tasks.jsonl``: the tasks a run used, as it used them (docs/run-format.md#tasks-jsonl).

A run directory names its tasks by a spec and a hash of their ids; the rows themselves may change or vanish later
(a regenerated split, an edited file). The snapshot keeps what the agent was asked, what the human knew, the
reference and the tests, so a viewer or an audit reads the run alone. One ``Task.to_row()`` per line, in the run's
task order; read back through the task loader, so a snapshot is validated like any task file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from colbench._util.storage import write_atomic
from colbench.errors import DataError
from colbench.runs.layout import RUN_JSON, TASKS_SNAPSHOT
from colbench.runs.run_json import RunConfig
from colbench.tasks.rows import load_jsonl
from colbench.types.task import Task


def write_task_snapshot(out: Path, tasks: Sequence[Task]) -> None:
    """Write ``out/tasks.jsonl`` atomically and durably (before run.json names it, so a named snapshot is whole)."""
    text = "".join(json.dumps(task.to_row(), ensure_ascii=False) + "\n" for task in tasks)
    write_atomic(out / TASKS_SNAPSHOT, text, durable=True)


def snapshot_path(run_dir: Path, config: RunConfig) -> Path | None:
    """The snapshot file run.json names (None for a run written before snapshots). run.json is read from disk: a
    name that is not a plain file name, or a named file that is missing, is a DataError."""
    name = config.tasks.snapshot if config.tasks is not None else None
    if name is None:
        return None
    if not name or Path(name).name != name or name in {".", ".."}:
        raise DataError(f"{run_dir / RUN_JSON}: tasks.snapshot must be a file name in the run directory, got {name!r}")
    path = run_dir / name
    if not path.is_file():
        raise DataError(f"{path}: not found, though {RUN_JSON} names it as the run's task snapshot")
    return path


def read_task_snapshot(run_dir: Path, config: RunConfig) -> list[Task] | None:
    """The tasks of a run directory's snapshot, in the run's order (None for a run written before snapshots); a
    malformed row is a DataError naming ``file:line``."""
    path = snapshot_path(run_dir, config)
    return None if path is None else load_jsonl(path, domain=config.domain)
