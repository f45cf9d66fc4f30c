"""The on-disk index of the runs ``colbench view`` shows: one sqlite file per run directory in colbench's cache.

Why an index: a run of 10,000 episodes must open as fast as one of 100, and a live run grows while it is watched.
The index holds one small row per episode (the record that counts, by :func:`colbench.runs.counted`'s rule) with
the byte offset of that record's line, so a page of the table is one query and an episode page re-reads one line.
It is updated by reading only the bytes appended to ``episodes.jsonl`` since the last look (its size is the
bookmark); a file that shrank or whose first bytes changed is indexed again from the start.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench._util.storage import colbench_home
from colbench.env.domain import Domain
from colbench.errors import DataError
from colbench.eval.progress import Pricing
from colbench.report.truth import episode_truth
from colbench.runs import EPISODES, RUN_JSON, EpisodeRecord, RunConfig, parse_record

SCHEMA = 4  # 4: the human's checked and untrue replies (claims checker); an older index is rebuilt
NEWLINE = b"\n"
HEAD_BYTES = 256  # the first bytes of episodes.jsonl, kept to see a file replaced by another of the same size
SORTS = {"order": "seq", "task": "task_id, trial", "reward": "reward", "turns": "turns", "tokens": "tokens"}
FILTERS = ("failed", "failed_all", "leaked", "untrue", "infra")

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS episodes (
  seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL, trial INTEGER NOT NULL, status TEXT NOT NULL,
  reward REAL, success INTEGER, failed INTEGER, turns INTEGER, leaks INTEGER, tokens INTEGER, cost REAL,
  termination TEXT, error TEXT, offset INTEGER NOT NULL, length INTEGER NOT NULL, attempts INTEGER NOT NULL,
  checked INTEGER, untrue INTEGER, UNIQUE (task_id, trial));
CREATE INDEX IF NOT EXISTS episodes_task ON episodes (task_id);
CREATE VIRTUAL TABLE IF NOT EXISTS transcripts USING fts5 (text);
"""


def cache_dir() -> Path:
    """Where the indexes live: ``view/`` in colbench's cache folder (``$COLBENCH_HOME`` etc.)."""
    return colbench_home() / "view"


@dataclass(frozen=True)
class Row:
    """One episode as the table shows it (the record that counts)."""

    task_id: str
    trial: int
    status: str
    reward: float | None
    success: bool | None
    failed: bool | None  # None: the env id has no success rule ("n/a")
    turns: int | None
    leaks: int | None
    tokens: int
    cost: float | None
    termination: str | None
    error: str | None
    attempts: int
    checked: int | None = None  # the human's replies the claims checker saw; None: none (older run, policy off)
    untrue: int | None = None  # of them, replies whose first draw held a false claim

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    total: int  # rows matching the filters
    page: int
    size: int


class RunIndex:
    """The index of one run directory. Thread-safe: every use takes the lock (the server's worker threads share it);
    :meth:`refresh` is cheap when nothing was appended (one ``stat``)."""

    def __init__(self, run_dir: Path, cache: Path | None = None) -> None:
        self.run_dir = run_dir.resolve()
        self.config = RunConfig.read(self.run_dir)
        self.domain: Domain = self._domain()
        self.metrics = self.domain.metrics_for(self.config.env_id)
        self.has_success = self.metrics.has_success or self.metrics.success_threshold is not None
        self._prices = Pricing.for_run({"agent": self.config.agent, "simulator": self.config.simulator}).roles
        folder = cache or cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(str(self.run_dir).encode()).hexdigest()[:24]
        self.db_path = folder / f"{key}.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._open()
        self.torn_line: str | None = None
        self.version = 0  # the size of the log as indexed: what is computed from the rows is cached on it
        self.refresh()

    def _domain(self) -> Domain:
        from colbench.env.domain import get_domain  # on first use: the domain registry loads the domain packages

        return get_domain(self.config.domain)

    def _open(self) -> None:
        meta = self._meta()
        config = hashlib.sha256((self.run_dir / RUN_JSON).read_bytes()).hexdigest()
        if (meta.get("schema"), meta.get("run_dir"), meta.get("config")) != (str(SCHEMA), str(self.run_dir), config):
            self._db.executescript(
                "DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS episodes; DROP TABLE IF EXISTS transcripts;"
            )
        self._db.executescript(_DDL)
        self._set("schema", str(SCHEMA))
        self._set("run_dir", str(self.run_dir))
        self._set("config", config)

    def _meta(self) -> dict[str, str]:
        try:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            return {}

    def _set(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- updating ------------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Index what was appended since the last look; True when rows changed."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> bool:
        path = self.run_dir / EPISODES
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        self.version = size
        if size == int(self._meta().get("size", "-1")):
            return False
        # another viewer of the same run may be indexing it too: decide and write under sqlite's write lock
        self._db.execute("BEGIN IMMEDIATE")
        try:
            meta = self._meta()
            if size == int(meta.get("size", "-1")):
                self._db.execute("ROLLBACK")
                return False
            done = int(meta.get("offset", "0"))
            head = _head(path)
            reset = size < done or bool(done and meta.get("head") != head[: len(meta.get("head", ""))])
            if reset:  # a log that shrank or was replaced: indexed again from its start
                self._db.execute("DELETE FROM episodes")
                self._db.execute("DELETE FROM transcripts")
                self._set("lines", "0")
                self._set("offset", "0")
                done = 0
            changed = (self._read_from(path, done, size) if size else False) or reset
            self._set("head", head)
            self._set("size", str(size))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return changed

    def _read_from(self, path: Path, start: int, size: int) -> bool:
        """Index the whole lines between ``start`` and ``size``, one line in memory at a time, inside the caller's
        transaction; a line without its newline yet waits (a write in progress). A last line that is not JSON is
        reported as the torn line."""
        number = int(self._meta().get("lines", "0"))
        changed = False
        offset = start
        tail = b""
        with open(path, "rb") as handle:
            handle.seek(start)
            while offset < size:
                raw = handle.readline(size - offset)
                if not raw.endswith(NEWLINE):
                    tail = raw
                    break
                number += 1
                if raw.strip():
                    self._add(raw[:-1], offset, f"{path}:{number}")
                    changed = True
                offset += len(raw)
        self._set("offset", str(offset))
        self._set("lines", str(number))
        self.torn_line = None
        if tail.strip():
            try:
                json.loads(tail)
            except (UnicodeDecodeError, json.JSONDecodeError):
                self.torn_line = f"{path}:{number + 1}"
        return changed

    def _add(self, raw: bytes, offset: int, where: str) -> None:
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{where}: not a JSON record ({exc})") from exc
        record = parse_record(row, where, self.metrics)
        held = self._db.execute(
            "SELECT seq, status, attempts FROM episodes WHERE task_id = ? AND trial = ?", (record.task_id, record.trial)
        ).fetchone()
        if held is not None and held[1] == "ok":  # a score is final (colbench.runs.counted)
            self._db.execute("UPDATE episodes SET attempts = attempts + 1 WHERE seq = ?", (held[0],))
            return
        attempts = 1 if held is None else held[2] + 1
        values = self._values(record, offset, len(raw), attempts)
        if held is None:
            cursor = self._db.execute(
                f"INSERT INTO episodes ({_FIELDS}) VALUES ({', '.join('?' * len(values))})", values
            )
            seq = cursor.lastrowid
        else:
            seq = held[0]
            assignments = ", ".join(f"{name}=?" for name in _FIELDS.split(", "))
            self._db.execute(f"UPDATE episodes SET {assignments} WHERE seq=?", (*values, seq))
            self._db.execute("DELETE FROM transcripts WHERE rowid = ?", (seq,))
        self._db.execute("INSERT INTO transcripts (rowid, text) VALUES (?, ?)", (seq, transcript_text(record)))

    def _values(self, record: EpisodeRecord, offset: int, length: int, attempts: int) -> tuple[Any, ...]:
        usage = record.usage_by_role()
        tokens = sum(u.prompt_tokens + u.completion_tokens for u in usage.values())
        cost: float | None = 0.0
        for role, counts in usage.items():
            price = self._prices.get(role)
            if price is None:
                cost = None
                break
            assert cost is not None
            cost += price.cost(counts)
        failed: bool | None = None
        if record.ok and self.has_success:
            failed = not self.domain.success_of(record.reward or 0.0, record.success, self.config.env_id)
        truth = episode_truth(record.dialogue_turns)
        return (
            record.task_id,
            record.trial,
            record.status,
            record.reward,
            record.success,
            failed,
            record.turns,
            record.leaks,
            tokens,
            cost,
            record.termination,
            record.error,
            offset,
            length,
            attempts,
            None if truth is None else truth.checked,
            None if truth is None else truth.untrue,
        )

    # -- reading -------------------------------------------------------------------------------------------
    def page(
        self,
        page: int = 0,
        size: int = 50,
        *,
        filters: tuple[str, ...] = (),
        search: str = "",
        sort: str = "order",
        descending: bool = False,
    ) -> Page:
        """One page of the table; ``filters`` from :data:`FILTERS`, ``search`` full text over the transcripts."""
        where, params = self._where(filters, search)
        order = SORTS.get(sort, "seq") + (" DESC" if descending else "")
        with self._lock:
            total = self._db.execute(f"SELECT count(*) FROM episodes {where}", params).fetchone()[0]
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM episodes {where} ORDER BY {order}, seq LIMIT ? OFFSET ?",
                (*params, size, page * size),
            ).fetchall()
        return Page([_row(r) for r in rows], total, page, size)

    def _where(self, filters: tuple[str, ...], search: str) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for name in filters:
            if name not in FILTERS:
                raise DataError(f"filter {name!r}: not one of {', '.join(FILTERS)}")
            clauses.append(
                {
                    "failed": "failed = 1",
                    "failed_all": "task_id IN (SELECT task_id FROM episodes WHERE status = 'ok' GROUP BY task_id"
                    " HAVING max(failed) = 1 AND min(failed) = 1)",
                    "leaked": "leaks > 0",
                    "untrue": "untrue > 0",
                    "infra": "status = 'infra_error'",
                }[name]
            )
        phrase = fts_phrase(search)
        if phrase:
            clauses.append("seq IN (SELECT rowid FROM transcripts WHERE transcripts MATCH ?)")
            params.append(phrase)
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def rows(self) -> Iterator[Row]:
        """Every episode in order (summaries and the bundle), read in bounded batches."""
        last = 0
        while True:
            with self._lock:
                batch = self._db.execute(
                    f"SELECT {_COLUMNS}, seq FROM episodes WHERE seq > ? ORDER BY seq LIMIT 2000", (last,)
                ).fetchall()
            if not batch:
                return
            for raw in batch:
                yield _row(raw[:-1])
            last = batch[-1][-1]

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM episodes").fetchone()[0])

    def record(self, task_id: str, trial: int) -> EpisodeRecord | None:
        """The record that counts for one episode, read from its line (None when there is no such episode)."""
        with self._lock:
            found = self._db.execute(
                "SELECT offset, length, attempts FROM episodes WHERE task_id = ? AND trial = ?", (task_id, trial)
            ).fetchone()
        if found is None:
            return None
        try:
            with open(self.run_dir / EPISODES, "rb") as handle:
                handle.seek(found[0])
                raw = handle.read(found[1])
        except FileNotFoundError:  # removed since it was indexed
            return None
        record = parse_record(json.loads(raw.decode("utf-8")), f"{self.run_dir / EPISODES}@{found[0]}", self.metrics)
        return record.at(record.where, found[2])

    def saved(self, name: str) -> Any:
        """A value computed from the rows as they are now (a summary), saved by :meth:`save`; None once the log
        has grown since, or never saved. Kept on disk: the next viewer of an unchanged run starts from it."""
        with self._lock:
            meta = self._meta()
        if name not in meta or meta.get(f"{name}@") != meta.get("size"):
            return None
        return json.loads(meta[name])

    def save(self, name: str, value: Any) -> None:
        with self._lock:
            size = self._meta().get("size", "")
            self._set(name, json.dumps(value))
            self._set(f"{name}@", size)

    def close(self) -> None:
        with self._lock:
            self._db.close()


_FIELDS = (
    "task_id, trial, status, reward, success, failed, turns, leaks, tokens, cost, termination, error, offset, length,"
    " attempts, checked, untrue"
)
"""The columns ``_values`` gives, in its order."""
_COLUMNS = ", ".join(name for name in _FIELDS.split(", ") if name not in ("offset", "length"))
"""The columns a :class:`Row` is read from, in its fields' order."""


def _row(raw: tuple[Any, ...]) -> Row:
    values = list(raw)
    for flag in (4, 5):  # success and failed: sqlite keeps booleans as integers
        values[flag] = None if values[flag] is None else bool(values[flag])
    return Row(*values)


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(HEAD_BYTES).hex()
    except FileNotFoundError:
        return ""


def transcript_text(record: EpisodeRecord) -> str:
    """What full-text search looks in: every turn as the agent saw it, withheld replies and the human's other draws
    (truth policy resample), the answer, the error."""
    parts = []
    for turn in record.dialogue_turns:
        parts += [turn.text, *turn.withheld]
        parts += [d.reply for d in turn.truth_draws if d.number - 1 != turn.truth_shown]
    parts.extend([record.answer or "", record.error or ""])
    return "\n".join(parts).replace("\x00", " ")


def fts_phrase(text: str) -> str:
    """The user's words as one FTS5 query of quoted terms: no FTS syntax of theirs is interpreted."""
    terms = [t for t in text.replace("\x00", " ").split() if t]
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)
