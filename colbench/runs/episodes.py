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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationInfo,
    field_validator,
)

from colbench._util.schema import FieldError, validate
from colbench._util.storage import write_atomic
from colbench.env.domain import Metrics
from colbench.errors import DataError
from colbench.runs.turns import DialogueTurn, read_turns
from colbench.types.chat import Usage

EpisodeKey = tuple[str, int]
Status = Literal["ok", "infra_error"]
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "calls")


class EpisodeRecord(BaseModel):
    """One record of ``episodes.jsonl``: written by the eval player and read by resume, report, show and compare,
    through this one class. Fields a reader computes from are typed and validated; a field this colbench does not
    know is kept as written (``extra``). ``where`` (``file:line``) and, for a counted record, ``attempts`` (how many
    records its episode has) say where it was read; they are not written."""

    model_config = ConfigDict(extra="allow", frozen=True)

    task_id: str
    trial: StrictInt = Field(ge=0)
    status: Status
    reward: float | None = Field(default=None, validate_default=True)
    success: bool | None = Field(default=None, validate_default=True)
    termination: str | None = None
    turns: int | None = None
    score: Any = None
    dialogue: list[dict[str, Any]] | None = None  # as written, so a record written back is the same; read, typed:
    # ``dialogue_turns``
    leaks: StrictInt | None = Field(default=None, ge=0)
    answer: str | None = None
    usage: dict[str, dict[str, StrictInt | None] | None] | None = None
    timings: dict[str, Any] | None = None
    screenshot: str | None = None
    error: str | None = None
    reference_screenshot: str | None = None
    answer_html: str | None = None
    rescored_from: dict[str, Any] | None = None  # ``colbench rescore``: the score this record had before

    _where: str = PrivateAttr(default="")
    _attempts: int = PrivateAttr(default=1)

    @property
    def where(self) -> str:
        return self._where

    @property
    def attempts(self) -> int:
        return self._attempts

    @cached_property
    def dialogue_turns(self) -> tuple[DialogueTurn, ...]:
        """The dialogue's turns, typed (``colbench.runs.turns``): read on first use, once."""
        return read_turns(self.dialogue, self.where or "an episode record")

    @property
    def key(self) -> EpisodeKey:
        return (self.task_id, self.trial)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def usage_by_role(self) -> dict[str, Usage]:
        """Tokens per role; roles without counts are left out."""
        return usage_by_role(self.usage)

    @property
    def row(self) -> dict[str, Any]:
        """The record as one line of ``episodes.jsonl`` holds it (the optional fields only when set)."""
        row = self.model_dump(mode="json", exclude=set(_OPTIONAL))
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                row[name] = value
        return row

    def line(self) -> bytes:
        return (json.dumps(self.row, ensure_ascii=False) + "\n").encode("utf-8")

    def at(self, where: str, attempts: int = 1) -> EpisodeRecord:
        """This record, read at ``where`` (and counted with ``attempts`` records of its episode)."""
        record = self.model_copy()
        record._where, record._attempts = where, attempts
        return record

    @field_validator("task_id", mode="before")
    @classmethod
    def _task_id(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise FieldError("task_id", f"{value!r} is not a string")
        if value == "":
            raise ValueError("'' is not a task id")
        return value

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        if value not in ("ok", "infra_error"):
            raise ValueError(f"{value!r} is not 'ok' or 'infra_error'")
        return value

    @field_validator("reward", mode="before")
    @classmethod
    def _reward(cls, value: Any, info: ValidationInfo) -> Any:
        """An ``ok`` record's reward is a finite number in the domain's range; an infrastructure error has none."""
        if info.data.get("status") != "ok":
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise FieldError("reward", f"{value!r} is not a finite number (status is 'ok')")
        metrics: Metrics | None = (info.context or {}).get("metrics")
        if metrics is not None:
            low, high = metrics.reward_range
            if not low <= value <= high:
                raise FieldError("reward", f"{value!r} is outside {low:g} to {high:g} ({metrics.reward_name})")
        return float(value)

    @field_validator("success", mode="before")
    @classmethod
    def _success(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("status") != "ok":
            return None
        metrics: Metrics | None = (info.context or {}).get("metrics")
        if metrics is not None and metrics.has_success and not isinstance(value, bool):
            raise FieldError("success", f"{value!r} is not true or false (status 'ok')")
        if value is not None and not isinstance(value, bool):
            raise FieldError("success", f"{value!r} is not true, false or null")
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


_OPTIONAL = ("reference_screenshot", "answer_html", "rescored_from")
"""Record fields written only when set: page answers' (frontend) and rescored runs'."""


def usage_by_role(usage: Any) -> dict[str, Usage]:
    """A record's ``usage`` field as a :class:`Usage` per role; roles without counts are left out."""
    if not isinstance(usage, Mapping):
        return {}
    return {
        str(role): Usage(*(int(counts.get(name) or 0) for name in USAGE_FIELDS))
        for role, counts in usage.items()
        if isinstance(counts, Mapping)
    }


def parse_record(row: Any, where: str, metrics: Metrics) -> EpisodeRecord:
    """Validate one decoded line of ``episodes.jsonl`` (a DataError naming ``where`` and the field)."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object")
    record = validate(EpisodeRecord, row, where, context={"metrics": metrics})
    record._where = where  # a record just validated is this reader's own: no copy needed
    return record


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
    return {key: record.at(record.where, attempts[key]) for key, record in chosen.items()}


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

    async def append(self, record: EpisodeRecord) -> None:
        await self._append(record.line())

    async def append_row(self, row: Mapping[str, Any]) -> None:
        """Another kind of JSONL row (a probe's reply), written the same way."""
        await self._append((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))

    async def _append(self, line: bytes) -> None:
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
