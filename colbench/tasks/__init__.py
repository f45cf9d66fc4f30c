"""ColBench tasks: the record, loaders (JSONL files, bundled samples, hub splits pinned and hash-checked, the
WebSight builder) and lookup by id. docs/tasks.md is the guide.

    from colbench import tasks
    test = tasks.load("backend-test")                 # a split of the manifest, or a JSONL file
    task = tasks.get_task("backend-sample", test_id)  # one task by id
    for task in tasks.iter_tasks("frontend-sample"): ...
    tasks.known_splits()                              # every split name

The names are imported on first use, so a module that needs only the ``Task`` record (a scorer, a sandbox
worker's host side) does not load the manifest's validation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colbench.tasks.domain_registry import domain_names, register_domain
    from colbench.tasks.manifest import SplitSpec, known_splits, split_spec
    from colbench.tasks.pins import UnverifiedPinWarning
    from colbench.tasks.rows import load_jsonl, task_from_row
    from colbench.tasks.sources import describe_source, get_task, iter_tasks, load, load_shared, load_split
    from colbench.types.task import Task, TaskSchema, content_id

_HOME = {
    "SplitSpec": "manifest",
    "known_splits": "manifest",
    "split_spec": "manifest",
    "UnverifiedPinWarning": "pins",
    "Task": "colbench.types.task",
    "content_id": "colbench.types.task",
    "TaskSchema": "colbench.types.task",
    "domain_names": "domain_registry",
    "register_domain": "domain_registry",
    "load_jsonl": "rows",
    "task_from_row": "rows",
    "describe_source": "sources",
    "get_task": "sources",
    "iter_tasks": "sources",
    "load": "sources",
    "load_shared": "sources",
    "load_split": "sources",
}

__all__ = [
    "SplitSpec",
    "Task",
    "TaskSchema",
    "UnverifiedPinWarning",
    "content_id",
    "describe_source",
    "domain_names",
    "get_task",
    "iter_tasks",
    "known_splits",
    "load",
    "load_jsonl",
    "load_shared",
    "load_split",
    "register_domain",
    "split_spec",
    "task_from_row",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'colbench.tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module if "." in module else f"colbench.tasks.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
