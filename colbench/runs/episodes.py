"""``episodes.jsonl``: one record per finished episode attempt, appended and fsync'ed (docs/run-format.md).

**Which record counts.** An episode (``task_id``, ``trial``) may have several records: infrastructure errors that
``--resume`` ran again, or, outside colbench's own writing, files joined by hand. The one rule, used by resume,
report and leaderboard alike (:func:`final_records`): **an episode's first ``ok`` record counts; an episode with
no ``ok`` record is counted by its last record** (an infrastructure error, to run again). An ``ok`` record is final:
nothing appended later replaces a score.

A line that is not valid JSON (or not UTF-8) can only be the last one: a run killed in the middle of a write. It
is ignored (and reported), and cut off before a resume appends. A malformed record anywhere is a DataError naming
``file:line`` and the field.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from colbench._util.schema import FieldError, validate
from colbench._util.storage import write_atomic
from colbench.env.domain import Metrics
from colbench.errors import DataError
from colbench.types.chat import Usage

EpisodeKey = tuple[str, int]
Status = Literal["ok", "infra_error"]
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "calls")


@dataclass(frozen=True)
class EpisodeRecord:
    """One record of ``episodes.jsonl``: the fields computed from, where it is (``file:line``), the whole row, and
    (for a counted record) how many records its episode has."""

    task_id: str
    trial: int
    status: Status
    reward: float | None
    success: bool | None
    where: str
    row: Mapping[str, Any]
    attempts: int = 1

    @property
    def key(self) -> EpisodeKey:
        return (self.task_id, self.trial)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def usage(self) -> dict[str, Usage]:
        """Tokens per role (validated when the record was read)."""
        return usage_by_role(self.row)


def usage_by_role(row: Mapping[str, Any]) -> dict[str, Usage]:
    """A record's ``usage`` field as a :class:`Usage` per role; roles without counts are left out."""
    usage = row.get("usage")
    if not isinstance(usage, Mapping):
        return {}
    return {
        str(role): Usage(*(int(counts.get(name) or 0) for name in USAGE_FIELDS))
        for role, counts in usage.items()
        if isinstance(counts, Mapping)
    }


class _Row(BaseModel):
    """What a record must hold to be counted; the rest of the row is kept as written."""

    model_config = ConfigDict(extra="allow")

    task_id: StrictStr | StrictInt
    trial: StrictInt = Field(ge=0)
    status: str
    reward: Any = None
    success: Any = None
    usage: dict[str, dict[str, StrictInt | None] | None] | None = None
    leaks: StrictInt | None = Field(default=None, ge=0)

    @field_validator("task_id")
    @classmethod
    def _non_empty(cls, value: str | int) -> str | int:
        if value == "":
            raise ValueError("'' is not a task id")
        return value

    @field_validator("status")
    @classmethod
    def _status(cls, value: str) -> str:
        if value not in ("ok", "infra_error"):
            raise ValueError(f"{value!r} is not 'ok' or 'infra_error'")
        return value

    @field_validator("usage")
    @classmethod
    def _counts(cls, value: dict[str, dict[str, int | None] | None] | None) -> Any:
        for role, counts in (value or {}).items():
            for name in USAGE_FIELDS:
                count = (counts or {}).get(name)
                if count is not None and count < 0:
                    raise FieldError(f"usage.{role}.{name}", f"{count!r} is not a non-negative integer")
        return value

    @model_validator(mode="after")
    def _scored(self, info: ValidationInfo) -> _Row:
        if self.status != "ok":
            return self
        metrics: Metrics = (info.context or {})["metrics"]
        reward = self.reward
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise FieldError("reward", f"{reward!r} is not a finite number (status is 'ok')")
        low, high = metrics.reward_range
        if not low <= reward <= high:
            raise FieldError("reward", f"{reward!r} is outside {low:g} to {high:g} ({metrics.reward_name})")
        if metrics.has_success and not isinstance(self.success, bool):
            raise FieldError("success", f"{self.success!r} is not true or false (status 'ok')")
        if self.success is not None and not isinstance(self.success, bool):
            raise FieldError("success", f"{self.success!r} is not true, false or null")
        return self


def parse_record(row: Any, where: str, metrics: Metrics) -> EpisodeRecord:
    """Validate one decoded line of ``episodes.jsonl`` (a DataError naming ``where`` and the field)."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object")
    valid = validate(_Row, row, where, context={"metrics": metrics})
    scored = valid.status == "ok"
    return EpisodeRecord(
        task_id=str(valid.task_id),
        trial=valid.trial,
        status="ok" if scored else "infra_error",
        reward=float(valid.reward) if scored else None,
        success=valid.success if scored else None,
        where=where,
        row=row,
    )


@dataclass(frozen=True)
class EpisodeLog:
    """``episodes.jsonl`` read: every record in file order, and the torn last line's place if there was one."""

    records: list[EpisodeRecord]
    torn_line: str | None = None


def read_episode_log(path: Path, metrics: Metrics, *, repair: bool = False) -> EpisodeLog:
    """The records of ``path`` (a missing file has none). ``repair`` cuts a torn last line off and gives a valid
    last line without its newline one, so appending is safe (what a resume does first)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return EpisodeLog([])
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    records: list[EpisodeRecord] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    offset = 0
    for index, raw in enumerate(lines):
        where = f"{path}:{index + 1}"
        if raw.strip():
            try:
                row = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                if index < len(lines) - 1:
                    raise DataError(f"{where}: {_what(exc)}") from exc
                if repair:
                    _truncate(path, offset)
                return EpisodeLog(records, torn_line=where)
            records.append(parse_record(row, where, metrics))
        offset += len(raw) + 1
    if repair and data and not data.endswith(b"\n"):
        with open(path, "ab") as out:
            out.write(b"\n")
            out.flush()
            os.fsync(out.fileno())
    return EpisodeLog(records)


def _what(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 (byte {exc.start + 1})"
    assert isinstance(exc, json.JSONDecodeError)
    return f"invalid JSON: {exc.msg} (column {exc.colno})"


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as out:
        out.truncate(size)
        out.flush()
        os.fsync(out.fileno())


def counted(held: EpisodeRecord | None, later: EpisodeRecord) -> EpisodeRecord:
    """Of an episode's record so far and a later one, the one that counts: the held record once it is ``ok``
    (a score is final), else the later one. Every reader of run directories decides through this."""
    return held if held is not None and held.ok else later


def final_records(records: Iterable[EpisodeRecord]) -> dict[EpisodeKey, EpisodeRecord]:
    """The record that counts for each episode (see the module docstring), with its ``attempts``; episodes keep
    the order in which they first appear."""
    chosen: dict[EpisodeKey, EpisodeRecord] = {}
    attempts: dict[EpisodeKey, int] = {}
    for record in records:
        key = record.key
        attempts[key] = attempts.get(key, 0) + 1
        chosen[key] = counted(chosen.get(key), record)
    return {key: replace(record, attempts=attempts[key]) for key, record in chosen.items()}


class EpisodeWriter:
    """Appends records to ``episodes.jsonl`` from asyncio code without blocking the loop.

    Records that arrive while a write is in progress are written together and fsync'ed once (group commit), in one
    dedicated thread; ``append`` returns when its record is on disk. A kill leaves at worst a torn last line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 (closed by close())
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="colbench-writer")
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((line, done))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        await done

    async def save_file(self, relative: str, data: bytes) -> None:
        """Write a side file (a screenshot) under the run directory, in the writer's thread."""
        target = self.path.parent / relative
        await asyncio.get_running_loop().run_in_executor(self._executor, write_atomic, target, data)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await loop.run_in_executor(self._executor, self._write, b"".join(line for line, _ in batch))
                except Exception as exc:
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                else:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
        finally:
            self._flusher = None

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Wait for a write in progress (a cancelled run still leaves whole lines), then close the file."""
        self._executor.shutdown(wait=True)
        self._file.close()
