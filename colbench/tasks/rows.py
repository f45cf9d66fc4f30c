"""Task rows: reading JSONL, validating a row (the fields every task has, then its domain's own), unique ids.

Every error is one line naming ``file:line`` (or the split and row) and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from colbench._util.storage import iter_jsonl
from colbench.errors import ColbenchError, DataError
from colbench.tasks.domain_registry import detect_schema, task_schema
from colbench.types.task import Task, content_id


def task_from_row(row: Any, *, domain: str | None = None, where: str = "<row>") -> Task:
    """Validate one decoded JSON row into a task of ``domain`` (None: the row's ``domain`` field, else the domain
    whose schema the row has; see :func:`colbench.tasks.domain_registry.detect_schema`)."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field in ("problem_description", "ground_truth"):
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            got = "missing" if field not in row else f"{type(value).__name__} {str(value)[:40]!r}"
            raise DataError(f"{where}: field '{field}': expected a non-empty string, got {got}")
    hidden = row.get("hidden_information", row["ground_truth"])
    if not isinstance(hidden, str):
        raise DataError(f"{where}: field 'hidden_information': expected a string, got {type(hidden).__name__}")
    try:
        spec = task_schema(domain) if domain is not None else detect_schema(row)
    except ColbenchError as exc:
        raise DataError(f"{where}: {exc}") from None
    tests = spec.test_cases(row, where)
    task_id = row.get("task_id")
    if task_id is None:
        task_id = content_id(spec.name, row)
    elif isinstance(task_id, bool) or not isinstance(task_id, str | int) or not str(task_id).strip():
        raise DataError(f"{where}: field 'task_id': expected a non-empty string")
    return Task(
        task_id=str(task_id),
        domain=spec.name,
        problem_description=row["problem_description"],
        ground_truth=row["ground_truth"],
        hidden_information=hidden,
        test_cases=tests,
        source=where,
        plus=spec.plus_tests(row, where),
    )


def load_jsonl(path: str | Path, *, domain: str | None = None) -> list[Task]:
    """Load and validate a ColBench JSONL task file; duplicate ids are an error naming both lines."""
    tasks = unique(task_from_row(row, domain=domain, where=where) for where, row in iter_jsonl(path))
    if not tasks:
        raise DataError(f"{path}: no tasks in file")
    return tasks


def unique(tasks: Iterable[Task]) -> list[Task]:
    """The tasks in order; a repeated ``task_id`` is a DataError naming both places."""
    seen: dict[str, str] = {}
    out = []
    for task in tasks:
        if task.task_id in seen:
            raise DataError(f"{task.source}: duplicate task_id {task.task_id!r} (first at {seen[task.task_id]})")
        seen[task.task_id] = task.source
        out.append(task)
    return out


def by_id(tasks: Iterable[Task]) -> Mapping[str, Task]:
    return {task.task_id: task for task in tasks}
