"""``colbench tasks check``: can every task be judged fairly? Each task's domain says (backend: run the references
in the sandbox against their own tests; frontend: render the reference pages); one line per problem found, then a
summary line per domain."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from colbench.domains import get_domain
from colbench.tasks.record import Task


def check_tasks(tasks: Sequence[Task], options: Mapping[str, Any]) -> Iterator[str]:
    """The findings of each domain's checks, domain by domain in order of first appearance. ``options``: what the
    checks may use (``sandbox``, ``jobs``); each domain reads its own."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.domain, []).append(task)
    for name, group in groups.items():
        yield from get_domain(name).check_tasks(group, options)
