"""Chat replies cached on disk, so a re-run (a resumed evaluation, a probe) sees the same human and costs nothing."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench._util.storage import canonical_json, sha256_text


class ResponseCache:
    """Chat replies on disk, keyed by the SHA-256 of the canonical JSON of the whole request.

    One SQLite file; a lock serialises this process's threads and SQLite's own locking (WAL, busy timeout)
    serialises processes sharing the file. Keys cover model, base URL (or the endpoint's identity), messages,
    temperature, max tokens and extra body, so anything that could change the reply changes the key. A cached
    sampled reply (temperature > 0) is replayed as is: that is the point, a re-run sees the same human.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        # Switching a new file to WAL can fail with "database is locked" at once, without SQLite's busy handler,
        # when another process is doing the same: retry within the connection's own 30 s budget.
        deadline = time.monotonic() + 30.0
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS replies"
                    " (key TEXT PRIMARY KEY, model TEXT, text TEXT NOT NULL, created REAL)"
                )
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        return sha256_text(canonical_json(request))

    def get(self, request: Mapping[str, Any]) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT text FROM replies WHERE key = ?", (self.key(request),)).fetchone()
        return None if row is None else str(row[0])

    def put(self, request: Mapping[str, Any], text: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (key, model, text, created) VALUES (?, ?, ?, ?)",
                (self.key(request), str(request.get("model", "")), text, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
