"""ColBench tasks: the record, loaders (JSONL files, bundled samples, hub splits pinned and hash-checked, the
WebSight builder) and lookup by id. docs/tasks.md is the guide.

    from colbench import tasks
    test = tasks.load("backend-test")                 # a split of the manifest, or a JSONL file
    task = tasks.get_task("backend-sample", test_id)  # one task by id
    for task in tasks.iter_tasks("frontend-sample"): ...
    tasks.known_splits()                              # every split name
"""

from __future__ import annotations

from colbench.tasks.manifest import SplitSpec, known_splits, split_spec
from colbench.tasks.pins import UnverifiedPinWarning
from colbench.tasks.record import Task, content_id
from colbench.tasks.rows import iter_jsonl, load_jsonl, task_from_row
from colbench.tasks.sources import describe_source, get_task, iter_tasks, load, load_split

__all__ = [
    "SplitSpec",
    "Task",
    "UnverifiedPinWarning",
    "content_id",
    "describe_source",
    "get_task",
    "iter_jsonl",
    "iter_tasks",
    "known_splits",
    "load",
    "load_jsonl",
    "load_split",
    "split_spec",
    "task_from_row",
]
