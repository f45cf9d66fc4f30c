"""Read a run directory (docs/run-format.md): ``run.json`` and ``episodes.jsonl``.

The reader is strict about what the report computes from (a malformed record is a ``DataError`` naming
``file:line`` and the field) and lenient about what it only displays (dialogue, answer, score details are shown as
they are). The last record per ``(task_id, trial)`` wins; a line that is not JSON is tolerated only as the last line
of the file (a run killed mid-write), and is reported as a warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeGuard

from colbench.errors import DataError
from colbench.llm import Usage

RUN_FORMAT = 1
ROLES = ("agent", "simulator")
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "calls")

Status = Literal["ok", "infra_error"]


@dataclass(frozen=True)
class EpisodeRecord:
    """The final record of one episode (the last line with its key); ``row`` is the whole JSON object."""

    task_id: str
    trial: int
    status: Status
    reward: float | None
    success: bool | None
    where: str
    row: Mapping[str, Any]
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Run:
    """One run directory, read."""

    path: Path
    config: dict[str, Any]
    episodes: dict[tuple[str, int], EpisodeRecord] = field(default_factory=dict)
    records: int = 0
    usage: dict[str, Usage] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    torn_line: str | None = None

    # -- run.json fields ----------------------------------------------------------------------------------------
    @property
    def env_id(self) -> str:
        return str(self.config["env_id"])

    @property
    def domain(self) -> str:
        return str(self.config["domain"])

    @property
    def trials(self) -> int:
        return int(self.config.get("trials", 1))

    @property
    def tasks(self) -> Mapping[str, Any]:
        tasks = self.config.get("tasks")
        return tasks if isinstance(tasks, dict) else {}

    @property
    def task_count(self) -> int | None:
        count = self.tasks.get("count")
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    @property
    def ids_sha256(self) -> str | None:
        value = self.tasks.get("ids_sha256")
        return value if isinstance(value, str) and value else None

    def role_model(self, role: str) -> str | None:
        """The model name of a role as run.json gives it (``name`` / ``model``, else the spec)."""
        section = self.config.get(role)
        if not isinstance(section, dict):
            return None
        for key in ("name", "model", "spec"):
            value = section.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    def role_names(self, role: str) -> list[str]:
        """Every name a price table may list the role's model under, most specific first."""
        section = self.config.get(role)
        if not isinstance(section, dict):
            return []
        names = [section.get(k) for k in ("name", "model", "spec")]
        return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))

    # -- episodes -----------------------------------------------------------------------------------------------
    def ordered_episodes(self) -> list[EpisodeRecord]:
        """Final records, tasks in the order they first appear in the file, trials ascending."""
        first_seen: dict[str, int] = {}
        for task_id, _ in self.episodes:
            first_seen.setdefault(task_id, len(first_seen))
        return sorted(self.episodes.values(), key=lambda e: (first_seen[e.task_id], e.trial))

    @property
    def infra_errors(self) -> int:
        """Episodes whose final record is an infrastructure error (excluded from every score)."""
        return sum(1 for e in self.episodes.values() if not e.ok)

    def scored(self) -> dict[str, list[EpisodeRecord]]:
        """Scored (``ok``) episodes grouped by task, in file order."""
        out: dict[str, list[EpisodeRecord]] = {}
        for episode in self.ordered_episodes():
            if episode.ok:
                out.setdefault(episode.task_id, []).append(episode)
        return out


# -- run.json ---------------------------------------------------------------------------------------------------
def _read_config(path: Path) -> dict[str, Any]:
    where = path / "run.json"
    if not path.exists():
        raise DataError(f"{path}: no such run directory")
    if not path.is_dir():
        raise DataError(f"{path}: not a directory (expected a run directory written by colbench eval)")
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{where}: not found (is {path} a run directory written by colbench eval?)") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: cannot read: {exc}") from exc
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(config, dict):
        raise DataError(f"{where}: expected a JSON object")
    fmt = config.get("format")
    if fmt != RUN_FORMAT:
        raise DataError(f"{where}: field 'format': {fmt!r} is not supported (this colbench reads format {RUN_FORMAT})")
    if not isinstance(config.get("env_id"), str) or not config["env_id"]:
        raise DataError(f"{where}: field 'env_id': missing or not a string")
    if config.get("domain") not in ("backend", "frontend"):
        raise DataError(f"{where}: field 'domain': {config.get('domain')!r} is not 'backend' or 'frontend'")
    trials = config.get("trials", 1)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise DataError(f"{where}: field 'trials': {trials!r} is not a positive integer")
    tasks = config.get("tasks")
    if tasks is not None and not isinstance(tasks, dict):
        raise DataError(f"{where}: field 'tasks': expected an object")
    for role in ROLES:
        if config.get(role) is not None and not isinstance(config[role], dict):
            raise DataError(f"{where}: field '{role}': expected an object")
    return config


# -- episodes.jsonl ---------------------------------------------------------------------------------------------
def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage(row: Mapping[str, Any], where: str) -> dict[str, Usage]:
    usage = row.get("usage")
    if usage is None:
        return {}
    if not isinstance(usage, dict):
        raise DataError(f"{where}: field 'usage': expected an object")
    out: dict[str, Usage] = {}
    for role, counts in usage.items():
        if counts is None:
            continue
        if not isinstance(counts, dict):
            raise DataError(f"{where}: field 'usage.{role}': expected an object")
        values = []
        for name in USAGE_FIELDS:
            value = counts.get(name, 0)
            if value is None:
                value = 0
            if not _count(value):
                raise DataError(f"{where}: field 'usage.{role}.{name}': {value!r} is not a non-negative integer")
            values.append(value)
        out[str(role)] = Usage(*values)
    return out


def _episode(row: Any, where: str, domain: str) -> EpisodeRecord:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object")
    task_id = row.get("task_id")
    if isinstance(task_id, bool) or not isinstance(task_id, str | int) or task_id == "":
        raise DataError(f"{where}: field 'task_id': missing or not a string")
    trial = row.get("trial")
    if not _count(trial):
        raise DataError(f"{where}: field 'trial': {trial!r} is not a non-negative integer")
    status = row.get("status")
    if status == "infra_error":
        return EpisodeRecord(str(task_id), trial, "infra_error", None, None, where, row)
    if status != "ok":
        raise DataError(f"{where}: field 'status': {status!r} is not 'ok' or 'infra_error'")
    reward = row.get("reward")
    if not _number(reward):
        raise DataError(f"{where}: field 'reward': {reward!r} is not a finite number (status is 'ok')")
    success = row.get("success")
    if domain == "backend":
        if not 0 <= reward <= 1:
            raise DataError(f"{where}: field 'reward': {reward!r} is not a fraction of tests passed (0 to 1)")
        if not isinstance(success, bool):
            raise DataError(f"{where}: field 'success': {success!r} is not true or false (backend, status 'ok')")
    elif success is not None and not isinstance(success, bool):
        raise DataError(f"{where}: field 'success': {success!r} is not true, false or null")
    return EpisodeRecord(str(task_id), trial, "ok", float(reward), success, where, row)


def _read_episodes(run: Run) -> None:
    path = run.path / "episodes.jsonl"
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        run.warnings.append(f"{path}: not found: no episode has finished yet")
        return
    except OSError as exc:
        raise DataError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    attempts: dict[tuple[str, int], int] = {}
    pending: str | None = None  # a bad line: fine as the last line, an error if anything follows it
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if pending is not None:
                raise DataError(pending)
            where = f"{path}:{lineno}"
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                pending = f"{where}: not UTF-8 (byte {exc.start + 1})"
                continue
            except json.JSONDecodeError as exc:
                pending = f"{where}: invalid JSON: {exc.msg} (column {exc.colno})"
                continue
            episode = _episode(row, where, run.domain)
            for role, counts in _usage(row, where).items():
                run.usage.setdefault(role, Usage()).add(counts)
            key = (episode.task_id, episode.trial)
            attempts[key] = attempts.get(key, 0) + 1
            run.records += 1
            run.episodes[key] = episode  # the last record wins; the key keeps its first position
    if pending is not None:
        run.torn_line = pending.split(": ", 1)[0]
        run.warnings.append(f"{run.torn_line}: ignored a torn last line (the run was stopped mid-write)")
    for key, count in attempts.items():
        if count > 1:
            run.episodes[key] = replace(run.episodes[key], attempts=count)


def load_run(path: str | Path) -> Run:
    """Read one run directory; a ``DataError`` naming the file (and line) for anything malformed."""
    path = Path(path)
    run = Run(path=path, config=_read_config(path))
    _read_episodes(run)
    return run
