"""Audit and augment many tasks at once, ``jobs`` tasks at a time, results in task order as they finish.

What ``colbench tasks audit`` and ``colbench tasks augment`` run; a task that fails for a reason of its own (its
reference cannot be parsed or run) is reported with the reason, never a crash of the whole job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from colbench.domains.backend.plus.audit import TaskAudit, audit_task
from colbench.domains.backend.plus.augment import AUGMENTER_VERSION, Augmented, Proposer, augment_task
from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import InfraError
from colbench.types.task import PlusTests, Task

T = TypeVar("T")


def _in_order(tasks: Sequence[Task], work: Callable[[Task], T], jobs: int) -> Iterator[T]:
    if jobs <= 1:
        yield from (work(task) for task in tasks)
        return
    with ThreadPoolExecutor(jobs, thread_name_prefix="colbench-plus") as pool:
        yield from pool.map(work, tasks)


def audit_tasks(tasks: Sequence[Task], scorer: BackendScorer, *, jobs: int = 1) -> Iterator[TaskAudit]:
    """Each task's mutation analysis, in task order."""

    def one(task: Task) -> TaskAudit:
        try:
            return audit_task(task, scorer)
        except InfraError as exc:
            return TaskAudit(task.task_id, problem=f"infrastructure error: {exc}")

    yield from _in_order(tasks, one, jobs)


def augment_tasks(
    tasks: Sequence[Task], scorer: BackendScorer, *, jobs: int = 1, proposer: Proposer | None = None
) -> Iterator[Augmented]:
    """Each task with its plus tests, in task order (a task the sandbox could not run gets none, with why)."""

    def one(task: Task) -> Augmented:
        try:
            return augment_task(task, scorer, proposer=proposer)
        except InfraError as exc:
            return Augmented(replace(task, plus=PlusTests((), AUGMENTER_VERSION, f"infrastructure error: {exc}")))

    yield from _in_order(tasks, one, jobs)
