"""The one claims checker every part uses (the env, ``colbench claims check``, the probe, reports, the viewer).

A domain's checker (``Domain.claim_checker``) works in two halves, so that a reply without a claim costs a scan on
the host and nothing more: ``find`` reads a reply's claims without running anything; ``settle`` settles the claims
of one task's replies, running the reference once for all of them (backend: one sandbox request). ``check_rows``
groups many replies by task. What a verdict means is in :mod:`colbench.types.claims`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from colbench.types.claims import Claim, Grounded

if TYPE_CHECKING:
    from colbench.types.task import Task


@runtime_checkable
class ClaimChecker(Protocol):
    """Finds and settles a domain's claims. ``name`` identifies the checker in run.json (a changed checker is a
    changed run). Thread-safe."""

    name: str

    def find(self, task: Task, reply: str, question: str | None = None) -> Sequence[object]:
        """The claims of ``reply`` (answering the agent's ``question``), read on the host; nothing runs."""

    def settle(self, task: Task, found: Sequence[Sequence[object]]) -> list[tuple[Claim, ...]]:
        """The verdicts of ``found`` (one list per reply of ``task``), the reference run once for all of them."""

    def ground(self, task: Task, agent_text: str) -> tuple[Grounded, ...]:
        """What a grounded human is told before answering ``agent_text``: the reference's results on a few of its
        literal calls (none for a domain without such calls)."""


class NoClaims:
    """The checker of a domain that has no checkable claims: every reply has none."""

    name = "none"

    def find(self, task: Task, reply: str, question: str | None = None) -> Sequence[object]:
        return ()

    def settle(self, task: Task, found: Sequence[Sequence[object]]) -> list[tuple[Claim, ...]]:
        return [() for _ in found]

    def ground(self, task: Task, agent_text: str) -> tuple[Grounded, ...]:
        return ()


def check(checker: ClaimChecker, task: Task, reply: str, question: str | None = None) -> tuple[Claim, ...]:
    """The claims of one reply, settled (no reference run when it has none)."""
    found = checker.find(task, reply, question)
    return checker.settle(task, [found])[0] if found else ()


def check_rows(checker: ClaimChecker, rows: Sequence[tuple[Task, str, str | None]]) -> list[tuple[Claim, ...]]:
    """The claims of many replies, in order: each task's replies settled together (one reference run a task)."""
    found = [checker.find(task, reply, question) for task, reply, question in rows]
    by_task: dict[str, list[int]] = {}
    for i, (task, _, _) in enumerate(rows):
        if found[i]:
            by_task.setdefault(task.task_id + "\0" + task.ground_truth, []).append(i)
    out: list[tuple[Claim, ...]] = [() for _ in rows]
    for indices in by_task.values():
        settled = checker.settle(rows[indices[0]][0], [found[i] for i in indices])
        for i, claims in zip(indices, settled, strict=True):
            out[i] = claims
    return out
