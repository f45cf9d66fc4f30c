"""Which ColBench+ tests a ``ColBench-Backend-v2`` run judged, in two fields of its run.json ``scoring``.

Plus tests are not part of a task's content id (augmenting a file keeps its ids), so ``tasks.ids_sha256`` cannot tell
two runs over differently augmented tasks apart: ``plus_digest`` does, and a ``--resume`` whose plus tests changed
is refused as any other change of configuration is. ``augmenter`` names the augmenter versions that made them.
"""

from __future__ import annotations

from collections.abc import Iterable

from colbench._util.storage import canonical_json, sha256_text
from colbench.errors import ConfigError
from colbench.types.task import PlusTests, Task


def _plus(task: Task) -> PlusTests:
    if task.plus is None:
        raise ConfigError(f"task {task.task_id}: no plus tests to describe (resolve them with the scorer first)")
    return task.plus


def plus_digest(tasks: Iterable[Task]) -> str:
    """The sha256 of the canonical JSON of ``[(task_id, plus test cases)]``, sorted by task id (each task once)."""
    cases = {task.task_id: [list(case) for case in _plus(task).cases] for task in tasks}
    return sha256_text(canonical_json(sorted(cases.items())))


def augmenters(tasks: Iterable[Task]) -> list[str]:
    """The augmenter versions that made the tasks' plus tests, sorted, each once."""
    return sorted({_plus(task).augmenter for task in tasks})
