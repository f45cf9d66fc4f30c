"""One progress bar on stderr for work counted in items (tasks augmented, audited, given plus tests).

``colbench eval`` has its own live display (``eval.progress``); the task tools and the first use of plus tests share
this one, so they look and behave alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(label: str, total: int) -> Iterator[Callable[[], None]]:
    """A bar of ``total`` items on stderr (none when there is nothing to count), advanced by the callable it
    yields (thread-safe: rich's progress is); transient, so the command's own output is what stays."""
    if total <= 0:
        yield lambda: None
        return
    from rich.console import Console  # only when there is something to show
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(label, total=total)
        yield lambda: progress.advance(bar)
