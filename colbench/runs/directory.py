"""A run directory, read (docs/run-format.md): its configuration and the record that counts for each episode.

Strict about what scores are computed from (a malformed record is a DataError naming ``file:line`` and the field),
lenient about what is only displayed (dialogue, answer, score details are kept as they are). Which record counts
when an episode has several is :func:`colbench.runs.episodes.final_records`: the same answer resume gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from colbench.env.domain import Domain, Metrics, get_domain
from colbench.runs.episodes import EpisodeRecord, final_records, read_episode_log
from colbench.runs.layout import EPISODES
from colbench.runs.run_json import RoleSection, RunConfig, TasksSection
from colbench.runs.task_snapshot import read_task_snapshot
from colbench.types.chat import Usage
from colbench.types.task import Task

ROLES = ("agent", "simulator")


@dataclass
class Run:
    """One run directory, read."""

    path: Path
    config: RunConfig
    episodes: dict[tuple[str, int], EpisodeRecord] = field(default_factory=dict)
    records: int = 0
    usage: dict[str, Usage] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    torn_line: str | None = None

    # -- run.json fields ----------------------------------------------------------------------------------------
    @property
    def env_id(self) -> str:
        return self.config.env_id

    @property
    def judged_by(self) -> str:
        """The env id, for a run judged with ColBench+ tests the augmenter versions that made them (run.json's
        ``scoring.augmenter``), and the task environment its code ran in (``scoring.taskenv``): runs that differ
        here were judged by other tests or ran elsewhere, and reports never rank or pair them as one."""
        scoring = self.config.scoring or {}
        parts = []
        if augmenter := scoring.get("augmenter"):
            versions = ", ".join(map(str, augmenter)) if isinstance(augmenter, list) else str(augmenter)
            parts.append(f"plus tests of augmenter {versions}")
        if taskenv := scoring.get("taskenv"):
            parts.append(f"task environment {taskenv}")
        return f"{self.env_id} ({', '.join(parts)})" if parts else self.env_id

    @property
    def domain_name(self) -> str:
        return self.config.domain

    @property
    def domain(self) -> Domain:
        """The run's domain (how its results read)."""
        return get_domain(self.domain_name)

    @property
    def metrics(self) -> Metrics:
        """How this run's results read: its env id's metrics (an env id may judge by rules of its own)."""
        return self.domain.metrics_for(self.env_id)

    @property
    def trials(self) -> int:
        return self.config.trials

    @property
    def tasks(self) -> TasksSection:
        return self.config.tasks or TasksSection()

    @property
    def task_count(self) -> int | None:
        return self.tasks.count

    @property
    def ids_sha256(self) -> str | None:
        return self.tasks.ids_sha256 or None

    def snapshot_tasks(self) -> list[Task] | None:
        """The tasks as the run used them, in its order (``tasks.jsonl``); None for a run written before snapshots
        (run.json names no snapshot). A named snapshot that is missing or malformed is a DataError."""
        return read_task_snapshot(self.path, self.config)

    def role(self, role: str) -> RoleSection | None:
        """The ``agent`` or ``simulator`` section of run.json (None for any other role)."""
        return {"agent": self.config.agent, "simulator": self.config.simulator}.get(role)

    def role_model(self, role: str) -> str | None:
        """The model name of a role as run.json gives it (``name`` / ``model``, else the spec)."""
        section = self.role(role)
        if section is None:
            return None
        return section.name or section.model or section.spec or None

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


def load_run(path: str | Path) -> Run:
    """Read one run directory; a ``DataError`` naming the file (and line) for anything malformed."""
    path = Path(path)
    run = Run(path=path, config=RunConfig.read(path))
    episodes = path / EPISODES
    if not episodes.exists():
        run.warnings.append(f"{episodes}: not found: no episode has finished yet")
        return run
    log = read_episode_log(episodes, run.domain.metrics_for(run.env_id))
    run.records = len(log.records)
    for record in log.records:
        for role, counts in record.usage_by_role().items():
            run.usage.setdefault(role, Usage()).add(counts)
    run.episodes = final_records(log.records)
    if log.torn_line is not None:
        run.torn_line = log.torn_line
        run.warnings.append(f"{log.torn_line}: ignored a torn last line (the run was stopped mid-write)")
    return run
