"""Plus tests for tasks that do not carry them (hub splits): computed on first use, kept per task on disk.

A task file written by ``colbench tasks augment`` (and the bundled samples) carries its plus tests; a hub split
(``backend-test``, ``backend-train``) does not. ``ColBench-Backend-v2`` then augments each task the first time it
is needed and keeps the result under ``$COLBENCH_HOME/plus/<augmenter version>/<content id>.json``: a new augmenter
version never reads an old one's tests, and the same task in another file finds its tests by content.
"""

from __future__ import annotations

import json
from pathlib import Path

from colbench._util.storage import colbench_home, write_atomic
from colbench.domains.backend.plus.augment import AUGMENTER_VERSION, augment_task
from colbench.domains.backend.scorer import BackendScorer
from colbench.types.task import PlusTests, Task, content_id


class PlusCache:
    """Plus tests by task content, on disk (``directory``; default under ``colbench_home()``). Each scorer keeps
    what it got in memory (``BackendScorer.plus_tests``), so a file is read once per scorer and task."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._directory = Path(directory) if directory else None

    @property
    def directory(self) -> Path:
        """The folder of this augmenter version's tests (``colbench_home()`` is read each time: it may change)."""
        return self._directory or colbench_home() / "plus" / AUGMENTER_VERSION

    def _path(self, task: Task) -> Path:
        return self.directory / f"{content_id(task.domain, task.to_row())}.json"

    def lookup(self, task: Task) -> PlusTests | None:
        """The task's own plus tests, else those computed before (None: not yet)."""
        if task.plus is not None:
            return task.plus
        try:
            raw = json.loads(self._path(task).read_text(encoding="utf-8"))
            return PlusTests(tuple((str(k), str(v)) for k, v in raw["cases"]), str(raw["augmenter"]), raw["note"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def plus_tests(self, task: Task, scorer: BackendScorer) -> PlusTests:
        """The task's plus tests: carried, cached, or computed now in ``scorer``'s sandbox (and cached)."""
        found = self.lookup(task)
        if found is not None:
            return found
        made = augment_task(task, scorer).plus
        record = {"cases": [list(c) for c in made.cases], "augmenter": made.augmenter, "note": made.note}
        write_atomic(self._path(task), json.dumps(record))
        return made
