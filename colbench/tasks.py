"""Task records and the ColBench JSONL loader.

A task is immutable and self-identifying: ``task_id`` is the row's own ``task_id`` field when present, else the
first 12 hex digits of the SHA-256 of the row's canonical content (domain, description, ground truth, hidden
information, tests), so the same row gets the same id in every file, order and machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from colbench.errors import DataError

Domain = Literal["backend", "frontend"]
DOMAINS: tuple[Domain, ...] = ("backend", "frontend")


@dataclass(frozen=True)
class Task:
    """One ColBench task. ``hidden_information`` is what the simulated human knows and the agent never sees."""

    task_id: str
    domain: Domain
    problem_description: str
    ground_truth: str
    hidden_information: str
    test_cases: tuple[tuple[str, str], ...] = ()
    source: str = ""

    def to_row(self) -> dict[str, Any]:
        """The JSONL row this task round-trips through (``task_id`` included)."""
        row: dict[str, Any] = {
            "task_id": self.task_id,
            "problem_description": self.problem_description,
            "ground_truth": self.ground_truth,
            "hidden_information": self.hidden_information,
        }
        if self.domain == "backend":
            row["test_cases"] = dict(self.test_cases)
        return row


def content_id(domain: str, row: dict[str, Any]) -> str:
    """The stable short hash used as ``task_id`` for rows that carry none."""
    canonical = json.dumps(
        {
            "domain": domain,
            "problem_description": row.get("problem_description"),
            "ground_truth": row.get("ground_truth"),
            "hidden_information": row.get("hidden_information", row.get("ground_truth")),
            "test_cases": row.get("test_cases"),
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def task_from_row(row: Any, *, domain: Domain | None = None, where: str = "<row>") -> Task:
    """Validate one decoded JSON row; every error names ``where`` (file:line) and the offending field."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field in ("problem_description", "ground_truth"):
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            got = "missing" if field not in row else f"{type(value).__name__} {str(value)[:40]!r}"
            raise DataError(f"{where}: field '{field}': expected a non-empty string, got {got}")
    hidden = row.get("hidden_information", row["ground_truth"])
    if not isinstance(hidden, str):
        raise DataError(f"{where}: field 'hidden_information': expected a string, got {type(hidden).__name__}")
    if domain is None:
        domain = "backend" if "test_cases" in row else "frontend"
    elif domain not in DOMAINS:
        raise DataError(f"{where}: unknown domain {domain!r}; expected one of {', '.join(DOMAINS)}")
    tests: tuple[tuple[str, str], ...] = ()
    if domain == "backend":
        raw = row.get("test_cases")
        if not isinstance(raw, dict) or not raw:
            got = "missing" if raw is None else type(raw).__name__
            raise DataError(f"{where}: field 'test_cases': expected a non-empty object of call expressions, got {got}")
        for name, expr in raw.items():
            if not isinstance(expr, str) or not expr.strip():
                raise DataError(f"{where}: field 'test_cases.{name}': expected a call expression string")
        tests = tuple((str(k), v) for k, v in raw.items())
    task_id = row.get("task_id")
    if task_id is None:
        task_id = content_id(domain, row)
    elif not isinstance(task_id, str | int) or not str(task_id).strip():
        raise DataError(f"{where}: field 'task_id': expected a non-empty string")
    return Task(
        task_id=str(task_id),
        domain=domain,
        problem_description=row["problem_description"],
        ground_truth=row["ground_truth"],
        hidden_information=hidden,
        test_cases=tests,
        source=where,
    )


def iter_jsonl(path: str | Path) -> Iterator[tuple[str, Any]]:
    """Yield ``(file:line, decoded row)``, skipping blank lines; bad JSON is a DataError naming the line."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc


def load_tasks(path: str | Path, *, domain: Domain | None = None) -> list[Task]:
    """Load and validate a ColBench JSONL task file; duplicate ids are an error naming both lines."""
    tasks = _unique(task_from_row(row, domain=domain, where=where) for where, row in iter_jsonl(path))
    if not tasks:
        raise DataError(f"{path}: no tasks in file")
    return tasks


def _unique(tasks: Iterable[Task]) -> list[Task]:
    seen: dict[str, str] = {}
    out = []
    for task in tasks:
        if task.task_id in seen:
            raise DataError(f"{task.source}: duplicate task_id {task.task_id!r} (first at {seen[task.task_id]})")
        seen[task.task_id] = task.source
        out.append(task)
    return out
