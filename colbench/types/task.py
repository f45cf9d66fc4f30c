"""The task record: immutable and self-identifying.

``task_id`` is the row's own ``task_id`` field when present, else the first 12 hex digits of the SHA-256 of the
row's canonical content (domain, description, ground truth, hidden information, tests), so the same row gets the
same id in every file, order and machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from colbench._util.storage import canonical_json, sha256_text


@dataclass(frozen=True)
class PlusTests:
    """ColBench+ tests of a backend task (``colbench tasks augment``): call expressions added to ``test_cases`` by
    ``ColBench-Backend-v2``. ``augmenter`` is the version of the augmenter that made them (a task's plus tests are
    a function of the task and that version alone); ``note`` says why a task has none (its reference is
    nondeterministic, or raises on its own tests). They are not part of the task's content id."""

    cases: tuple[tuple[str, str], ...]
    augmenter: str
    note: str = ""

    def to_fields(self) -> dict[str, Any]:
        """The row fields these tests round-trip through."""
        fields: dict[str, Any] = {"plus_test_cases": dict(self.cases), "plus_augmenter": self.augmenter}
        if self.note:
            fields["plus_note"] = self.note
        return fields


@dataclass(frozen=True)
class Task:
    """One ColBench task. ``hidden_information`` is what the simulated human knows and the agent never sees;
    ``test_cases`` are the call expressions of a backend task (empty for domains judged otherwise); ``plus``, its
    ColBench+ tests when the row carries them (None: never augmented)."""

    task_id: str
    domain: str
    problem_description: str
    ground_truth: str
    hidden_information: str
    test_cases: tuple[tuple[str, str], ...] = ()
    source: str = ""
    plus: PlusTests | None = None

    def to_row(self) -> dict[str, Any]:
        """The JSONL row this task round-trips through (``task_id`` included)."""
        row: dict[str, Any] = {
            "task_id": self.task_id,
            "problem_description": self.problem_description,
            "ground_truth": self.ground_truth,
            "hidden_information": self.hidden_information,
        }
        if self.test_cases:
            row["test_cases"] = dict(self.test_cases)
        if self.plus is not None:
            row.update(self.plus.to_fields())
        return row


def content_id(domain: str, row: Mapping[str, Any]) -> str:
    """The stable short hash used as ``task_id`` for rows that carry none."""
    canonical = canonical_json(
        {
            "domain": domain,
            "problem_description": row.get("problem_description"),
            "ground_truth": row.get("ground_truth"),
            "hidden_information": row.get("hidden_information", row.get("ground_truth")),
            "test_cases": row.get("test_cases"),
        }
    )
    return sha256_text(canonical)[:12]


@runtime_checkable
class TaskSchema(Protocol):
    """What the task layer needs of a domain: its name and the shape of its rows. Every
    :class:`~colbench.env.domain.Domain` is one; the task loaders see no more of it."""

    name: str

    def claims(self, row: Mapping[str, Any]) -> bool:
        """Whether ``row`` has this domain's fields (used when a row names no domain)."""
        ...

    def test_cases(self, row: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        """The row's tests, validated (a DataError naming ``where`` and the field)."""
        ...

    def plus_tests(self, row: Mapping[str, Any], where: str) -> PlusTests | None:
        """The row's ColBench+ tests, validated, or None when it has none."""
        ...
