"""Plus tests for tasks that do not carry them (hub splits): computed on first use, kept per task on disk.

A task file written by ``colbench tasks augment`` (and the bundled samples) carries its plus tests; a hub split
(``backend-test``, ``backend-train``) does not. ``ColBench-Backend-v2`` then augments each task the first time it
is needed and keeps the result under ``$COLBENCH_HOME/plus/<augmenter version>/<content id>.json``: a new augmenter
version never reads an old one's tests, and the same task in another file finds its tests by content.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from colbench._util.storage import colbench_home, write_atomic
from colbench.domains.backend.plus.augment import AUGMENTER_VERSION, augment_task
from colbench.domains.backend.scorer import BackendScorer
from colbench.types.task import PlusTests, Task, content_id


class PlusCache:
    """Plus tests by task content, in memory and on disk (``directory``; default under ``colbench_home()``)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._directory = Path(directory) if directory else None
        self._lock = threading.Lock()
        self._memory: dict[str, PlusTests] = {}

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
        key = content_id(task.domain, task.to_row())
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        try:
            raw = json.loads(self._path(task).read_text(encoding="utf-8"))
            found = PlusTests(tuple((str(k), str(v)) for k, v in raw["cases"]), str(raw["augmenter"]), raw["note"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with self._lock:
            self._memory[key] = found
        return found

    def plus_tests(self, task: Task, scorer: BackendScorer) -> PlusTests:
        """The task's plus tests: carried, cached, or computed now in ``scorer``'s sandbox (and cached)."""
        found = self.lookup(task)
        if found is not None:
            return found
        made = augment_task(task, scorer).plus
        record = {"cases": [list(c) for c in made.cases], "augmenter": made.augmenter, "note": made.note}
        write_atomic(self._path(task), json.dumps(record))
        with self._lock:
            self._memory[content_id(task.domain, task.to_row())] = made
        return made

    def with_plus_tests(
        self,
        tasks: Sequence[Task],
        scorer: BackendScorer,
        *,
        jobs: int = 1,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Task]:
        """``tasks`` each with its plus tests, computing the missing ones ``jobs`` at a time; ``progress(done,
        total)`` after each task computed."""
        missing = [t for t in tasks if self.lookup(t) is None]
        done = 0

        def one(task: Task) -> None:
            nonlocal done
            self.plus_tests(task, scorer)
            with self._lock:
                done += 1
            if progress is not None:
                progress(done, len(missing))

        if missing:
            with ThreadPoolExecutor(max(1, jobs), thread_name_prefix="colbench-plus") as pool:
                list(pool.map(one, missing))
        return [replace(t, plus=self.lookup(t)) for t in tasks]


@contextmanager
def plus_progress(total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr while ``total`` tasks get their plus tests computed (none when there are none):
    a hub split's first ``-v2`` run augments every task, minutes for a thousand."""
    if total <= 0:
        yield lambda: None
        return
    from rich.console import Console  # only when there is something to show
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("ColBench+ tests, first use"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task("plus", total=total)
        yield lambda: progress.advance(bar)
