"""The JSONL files the offline commands read and write (``score``, ``leaks score``, ``leaks labelled``)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from colbench._util.storage import iter_jsonl
from colbench.errors import DataError

if TYPE_CHECKING:
    from colbench.types.task import Task


def read_answers(path: str, tasks: dict[str, Task], field: str = "answer") -> list[tuple[Task, str]]:
    """Rows ``{"task_id", field}`` of a JSONL file with their tasks, in file order."""
    answers = []
    for where, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with 'task_id' and '{field}'")
        task_id, answer = row.get("task_id"), row.get(field)
        if not isinstance(task_id, str | int):
            raise DataError(f"{where}: field 'task_id': missing or not a string")
        if not isinstance(answer, str):
            raise DataError(f"{where}: field '{field}': missing or not a string")
        answers.append((row_task(where, task_id, tasks), answer))
    return answers


def row_task(where: str, task_id: str | int, tasks: dict[str, Task]) -> Task:
    """The task a row names (its ``task_id`` checked already): a one-line error naming the row when the task file
    has none of that id."""
    task = tasks.get(str(task_id))
    if task is None:
        raise DataError(f"{where}: field 'task_id': {task_id!r} is not in the task file")
    return task


def write_jsonl(out: TextIO, row: dict[str, Any]) -> None:
    """Append one row, on disk before the next is computed: a long run that stops keeps what it has written."""
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())
