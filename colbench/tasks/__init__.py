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

from typing import TYPE_CHECKING

from colbench._util.lazy import lazy_exports

if TYPE_CHECKING:
    from colbench.tasks.domain_registry import domain_names, register_domain
    from colbench.tasks.manifest import Split, get_split, known_splits
    from colbench.tasks.pins import UnverifiedPinWarning
    from colbench.tasks.rows import load_jsonl, task_from_row
    from colbench.tasks.sources import describe_source, get_task, iter_tasks, load, load_shared, load_split
    from colbench.types.task import Task, TaskSchema, content_id

_HOME = {
    "Split": "colbench.tasks.manifest",
    "known_splits": "colbench.tasks.manifest",
    "get_split": "colbench.tasks.manifest",
    "UnverifiedPinWarning": "colbench.tasks.pins",
    "Task": "colbench.types.task",
    "content_id": "colbench.types.task",
    "TaskSchema": "colbench.types.task",
    "domain_names": "colbench.tasks.domain_registry",
    "register_domain": "colbench.tasks.domain_registry",
    "load_jsonl": "colbench.tasks.rows",
    "task_from_row": "colbench.tasks.rows",
    "describe_source": "colbench.tasks.sources",
    "get_task": "colbench.tasks.sources",
    "iter_tasks": "colbench.tasks.sources",
    "load": "colbench.tasks.sources",
    "load_shared": "colbench.tasks.sources",
    "load_split": "colbench.tasks.sources",
}

__all__ = [
    "Split",
    "Task",
    "TaskSchema",
    "UnverifiedPinWarning",
    "content_id",
    "describe_source",
    "domain_names",
    "get_split",
    "get_task",
    "iter_tasks",
    "known_splits",
    "load",
    "load_jsonl",
    "load_shared",
    "load_split",
    "register_domain",
    "task_from_row",
]


__getattr__, __dir__ = lazy_exports("colbench.tasks", _HOME, globals())
