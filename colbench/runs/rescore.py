"""``colbench rescore``: the final answers a run holds, scored again under another env id, into a new run directory.

A score belongs to the env id whose rules produced it (docs/scoring.md); to see a run under other rules (a v1 run
under ``ColBench-Backend-v2``'s plus tests, or back), its answers are judged again, without calling any model, and
written as a run directory of their own that ``colbench report``, ``show`` and ``compare`` read like any other:

- ``run.json``: the source's configuration with the new ``env_id`` and ``scoring``, and ``rescored_from`` (the source
  run's path, its ``config_sha256``, ``env_id`` and ``scoring``, and the new scoring options, ``rules``);
- ``episodes.jsonl``: every record of the source in order; each scored one with its new ``reward``, ``success`` and
  ``score`` and its old ones under ``rescored_from``; infrastructure errors as they were (never scored now);
- ``screens/``: copied, so page reports still find their screenshots.

The source is only read: never written, never locked, its torn last line left as it is. The new directory is built
beside ``out`` and renamed into place, so a failure leaves nothing half written. :func:`rescore_answers` is the same
scoring for answers a trainer holds in memory.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench._util.storage import fsync_dir, utc_timestamp
from colbench._util.version import __version__
from colbench.env.domain import Domain, Metrics, Score, get_domain
from colbench.env.registration import env_definitions
from colbench.env.versions import scoring_env, scoring_options
from colbench.errors import ConfigError, DataError
from colbench.runs.episodes import EpisodeRecord, parse_record, read_episode_log
from colbench.runs.layout import EPISODES, SCREENS
from colbench.runs.run_json import RunConfig
from colbench.runs.task_snapshot import snapshot_path
from colbench.tasks.sources import load
from colbench.types.task import Task


@dataclass(frozen=True)
class RescoreResult:
    """What a rescore came to. ``scored``: records judged again; ``changed``: those whose reward changed;
    ``kept_infra``: infrastructure errors copied as they were; ``unjudged``: answers the scorer could not judge
    now (written as infrastructure errors: the harness's fault, never a zero)."""

    source: Path
    out: Path
    env_id: str
    previous_env_id: str
    domain: Domain
    before: tuple[int, int, float]  # scored records, successes, reward sum, as the source had them
    after: tuple[int, int, float]
    changed: int
    kept_infra: int
    unjudged: int

    @property
    def exit_code(self) -> int:
        """0, or 3 when some answers could not be judged (``colbench``'s code for infrastructure errors)."""
        return 3 if self.unjudged else 0

    def summary_line(self) -> str:
        line = (
            f"rescored {self.before[0]} episodes of {self.source} from {self.previous_env_id} to {self.env_id}: "
            f"{self.domain.headline(*self.before, self.previous_env_id)} -> "
            f"{self.domain.headline(*self.after, self.env_id)}; "
            f"{self.changed} rewards changed; infrastructure errors kept {self.kept_infra}"
        )
        if self.unjudged:
            line += f"; {self.unjudged} answers could not be judged now (infrastructure errors)"
        return f"{line} -> {self.out}"


def rescore_answers(
    env_id: str, pairs: Sequence[tuple[Task, str]], *, options: Mapping[str, Any] | None = None
) -> list[Score]:
    """``(task, final answer)`` pairs scored under ``env_id``'s rules, in order, with the process's shared scorer
    for them (warm sandboxes, one reference cache: call it every training step). ``options``: the domain's scoring
    options (backend ``sandbox``, frontend ``embedder``). An answer the scorer cannot judge is that answer's
    unjudged score; a task of another domain than ``env_id``'s is a ConfigError."""
    domain = _domain_of(env_id, pairs)
    scorer = domain.shared_scorer({**(options or {}), **scoring_options(env_id)})
    domain.describe_scoring(scorer, _distinct(task for task, _ in pairs))  # what the version needs, up front
    return list(scorer.score_many(pairs))


def rescore(
    run_dir: str | Path,
    env_id: str,
    out: str | Path,
    *,
    tasks: str | None = None,
    options: Mapping[str, Any] | None = None,
    jobs: int | None = None,
) -> RescoreResult:
    """Score the final answers of the run ``run_dir`` again under ``env_id`` into the new run directory ``out``
    (see the module docstring). ``tasks``: where the tasks are (default: the run's own task source; a file with
    plus tests for ``ColBench-Backend-v2``). ``options``: the domain's scoring options; ``jobs``: answers at once.
    Errors are one line: an unreadable run, or a scored episode without its answer or task (naming the run, the
    task and the trial), an ``out`` that exists and is not empty or is the source, an env id of another domain."""
    source, target = Path(run_dir), Path(out)
    config = RunConfig.read(source)
    domain = get_domain(config.domain)
    try:
        env_id = str(scoring_env(domain, env_id))
    except ConfigError as exc:
        raise ConfigError(f"cannot rescore {source} (a {domain.name} run of {config.env_id}): {exc}") from None
    _check_out(source, target)
    if not (source / EPISODES).is_file():
        raise DataError(f"{source}: no {EPISODES}: the run has no episode to rescore")
    records = read_episode_log(source / EPISODES, domain.metrics_for(config.env_id)).records
    found = _tasks(source, config, tasks)
    pairs = [(_task_of(source, record, found), _answer_of(source, record)) for record in records if record.ok]
    with closing(domain.make_scorer({**(options or {}), **scoring_options(env_id)}, jobs=jobs)) as scorer:
        scoring = domain.describe_scoring(scorer, _distinct(task for task, _ in pairs))
        scores = iter(scorer.score_many(pairs))
        metrics = domain.metrics_for(env_id)
        rescored = [
            _rescored(record, next(scores), config.env_id, metrics) if record.ok else record for record in records
        ]
    new_config = config.model_copy(
        update={
            "env_id": env_id,
            "created": utc_timestamp(),
            "colbench_version": __version__,
            "scoring": scoring,
            "rescored_from": {
                "run": str(source.resolve()),
                "config_sha256": config.config_sha256,
                "env_id": config.env_id,
                "scoring": config.scoring,
                "rules": scoring_options(env_id),
            },
        }
    ).sealed()
    _write(source, target, new_config, rescored)
    before = [r for r in records if r.ok]
    after = [r for r in rescored if r.ok]
    return RescoreResult(
        source=source,
        out=target,
        env_id=env_id,
        previous_env_id=config.env_id,
        domain=domain,
        before=_tally(before),
        after=_tally(after),
        changed=sum(new.reward != old.reward for old, new in zip(records, rescored, strict=True) if old.ok),
        kept_infra=sum(not r.ok for r in records),
        unjudged=len(before) - len(after),
    )


# -- checks -------------------------------------------------------------------------------------------------------
def _domain_of(env_id: str, pairs: Sequence[tuple[Task, str]]) -> Domain:
    """The domain ``env_id`` scores (a ConfigError for an id that scores none, or tasks of another domain)."""
    definition = next((d for d in env_definitions() if d.id == env_id), None)
    if definition is None:
        raise ConfigError(f"env id {env_id!r}: unknown; known: {', '.join(d.id for d in env_definitions())}")
    domain = get_domain(definition.domain)
    scoring_env(domain, env_id, "env id")
    wrong = next((task for task, _ in pairs if task.domain != domain.name), None)
    if wrong is not None:
        raise ConfigError(f"task {wrong.task_id} is a {wrong.domain} task; {env_id} scores {domain.name} answers")
    return domain


def _check_out(source: Path, out: Path) -> None:
    """A new run needs a missing or empty ``out`` that is neither the source nor inside it (never modified)."""
    if out.resolve() == source.resolve():
        raise ConfigError(f"--out {out} is the run being rescored: it is never overwritten; name a new directory")
    if source.resolve() in out.resolve().parents:
        raise ConfigError(f"--out {out} is inside the run being rescored, which is never modified; name another")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty directory: rescore writes a new run")


def _tasks(source: Path, config: RunConfig, spec: str | None) -> dict[str, Task]:
    spec = spec or (config.tasks.spec if config.tasks is not None else None)
    if not spec:
        raise ConfigError(f"{source}: run.json names no task source (tasks.spec): give the tasks to rescore against")
    return {task.task_id: task for task in load(spec)}


def _episode(source: Path, record: EpisodeRecord) -> str:
    return f"{source}: episode task {record.task_id} trial {record.trial} ({record.where})"


def _task_of(source: Path, record: EpisodeRecord, tasks: Mapping[str, Task]) -> Task:
    task = tasks.get(record.task_id)
    if task is None:
        raise DataError(f"{_episode(source, record)}: its task is not among the tasks given")
    return task


def _answer_of(source: Path, record: EpisodeRecord) -> str:
    """The answer that was scored: the page of a page answer (it may come from an earlier turn), else the final
    text."""
    answer = record.answer_html if record.answer_html is not None else record.answer
    if answer is None:
        raise DataError(f"{_episode(source, record)}: a scored episode without its final answer cannot be rescored")
    return answer


def _distinct(tasks: Iterable[Task]) -> list[Task]:
    return list({task.task_id: task for task in tasks}.values())


# -- the new run ----------------------------------------------------------------------------------------------------
def _rescored(record: EpisodeRecord, score: Score, env_id: str, metrics: Metrics) -> EpisodeRecord:
    """``record`` with ``score`` in place of its own, which it keeps under ``rescored_from`` (``env_id``: the
    source's); ``metrics``: how the new env id's records read."""
    row = dict(record.row)
    row["rescored_from"] = {"env_id": env_id, "reward": record.reward, "success": record.success, "score": record.score}
    if score.judged:
        row.update(reward=score.reward, success=score.success, score=score.details())
    else:
        error = score.details().get("error") or score.status
        row.update(status="infra_error", reward=None, success=None, score=None, error=f"rescoring: {error}")
    return parse_record(row, record.where, metrics)


def _tally(records: Sequence[EpisodeRecord]) -> tuple[int, int, float]:
    return len(records), sum(bool(r.success) for r in records), sum(r.reward or 0.0 for r in records)


def _write(source: Path, out: Path, config: RunConfig, records: Sequence[EpisodeRecord]) -> None:
    """The whole run beside ``out``, then renamed into place (an empty ``out`` is replaced)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    building = out.parent / f".{out.name}.rescore-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    building.mkdir()
    try:
        config.write(building)
        with open(building / EPISODES, "wb") as episodes:
            episodes.write(b"".join(record.line() for record in records))
            episodes.flush()
            os.fsync(episodes.fileno())
        snapshot = snapshot_path(source, config)
        if snapshot is not None:  # the tasks the answers were given for, whatever the rescore scored against
            shutil.copy2(snapshot, building / snapshot.name)
        if (source / SCREENS).is_dir():
            shutil.copytree(source / SCREENS, building / SCREENS)
        if out.exists():
            out.rmdir()  # checked empty
        os.rename(building, out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    fsync_dir(out.parent)
