"""The leaderboard: one row per run, one table per env id (a domain's versions score differently, so their runs are
never ranked together), best first; plus tokens and cost per role.

Runs of one env id that do not share a task set, scoring or simulator are still shown in one table (``colbench
report runs/*`` must not fail because one run is odd), but each such row says how it differs in its note column;
the baseline of each property is the value most runs in the table share (ties: the run named first).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.env.domain import all_domains
from colbench.errors import ConfigError
from colbench.report import stats
from colbench.report.costs import LIST_PRICES, Prices, RoleCost, role_costs
from colbench.report.truth import episode_truth, simulator_label, truth_config
from colbench.runs import Run


@dataclass
class Row:
    """One run's leaderboard entry. A domain with success (backend): ``primary`` = success, ``secondary`` = the mean
    reward (tests passed). Without (frontend): ``primary`` = the mean reward (similarity), ``secondary`` = win rate
    against the reference run (if any)."""

    run: Run
    label: str
    n_tasks: int
    infra: int
    not_run: int | None
    primary: stats.Estimate
    secondary: stats.Estimate | None
    flip: float | None
    flip_n: int
    leak: stats.Estimate | None = None
    notes: list[str] = field(default_factory=list)
    pass_k: list[stats.PassHatK] = field(default_factory=list)
    parts: dict[str, stats.Estimate] = field(default_factory=dict)
    """The mean of each part of the reward (``Metrics.subscores``, from each record's ``score["subscores"]``) and, for
    a frontend run scored with real CLIP weights, ``CLIP >= 0.8``: HAL's success rule on the plain similarity."""
    rank: int = 0
    untrue: stats.Estimate | None = None
    """The share of the human's checked replies whose first draw held a false claim (``colbench.report.truth``),
    pooled over replies with a cluster bootstrap over tasks (``stats.ratio_estimate``); None: nothing checked."""
    untrue_replies: int = 0
    """How many checked replies ``untrue`` is over."""
    failed_untrue: tuple[int, int] | None = None
    """(failed episodes with an untrue reply, failed episodes with a checked reply); None where nothing was checked
    or the env id has no success rule."""

    @property
    def domain(self) -> str:
        return self.run.domain_name


@dataclass
class Table:
    """The runs of one env id (and, for ColBench+, one augmenter's plus tests), ranked. ``judged_by``: the plus tests
    too (``Run.judged_by``), where runs of the table's env id were judged by other plus tests (else empty)."""

    domain: str
    env_id: str
    rows: list[Row]
    reference_label: str | None = None
    judged_by: str = ""


def task_values(run: Run) -> dict[str, list[float]]:
    return {task: [e.reward for e in eps if e.reward is not None] for task, eps in run.scored().items()}


def _task_success(run: Run) -> dict[str, list[bool]]:
    domain = run.domain
    return {
        task: [domain.success_of(e.reward or 0.0, e.success, run.env_id) for e in eps if e.reward is not None]
        for task, eps in run.scored().items()
    }


def _task_leaks(run: Run) -> dict[str, list[bool]]:
    """Per task, whether each scored episode had a human reply flagged as a leak (episodes that measured it)."""
    leaks: dict[str, list[bool]] = {}
    for task, eps in run.scored().items():
        measured = [e.leaks for e in eps if e.leaks is not None]
        if measured:
            leaks[task] = [bool(count) for count in measured]
    return leaks


def _task_truth(run: Run) -> dict[str, list[tuple[int, int]]]:
    """Per task, each scored episode's (untrue replies, checked replies), for the episodes with a checked reply."""
    out: dict[str, list[tuple[int, int]]] = {}
    for task, eps in run.scored().items():
        for episode in eps:
            found = episode_truth(episode.dialogue_turns)
            if found is not None:
                out.setdefault(task, []).append((found.untrue, found.checked))
    return out


def failed_untrue(run: Run) -> tuple[int, int] | None:
    """(failed episodes whose human made a false claim in some reply, failed episodes with a checked reply), failure
    by the env id's own success rule (``Domain.success_of``); None when no episode was checked or the env id has no
    success rule."""
    metrics = run.metrics
    if not metrics.has_success and metrics.success_threshold is None:
        return None
    domain = run.domain
    measured = hits = 0
    checked = False
    for eps in run.scored().values():
        for episode in eps:
            found = episode_truth(episode.dialogue_turns)
            if found is None or episode.reward is None:
                continue
            checked = True
            if not domain.success_of(episode.reward, episode.success, run.env_id):
                measured += 1
                hits += found.untrue > 0
    return (hits, measured) if checked else None


def summarize(run: Run, label: str, reference: Run | None = None) -> Row:
    """The scores of one run (comparability notes are added per table by ``build_report``)."""
    values = task_values(run)
    successes = _task_success(run)
    flip, flip_n = stats.flip_rate(successes)
    expected = run.task_count * run.trials if run.task_count is not None else None
    not_run = max(0, expected - len(run.episodes)) if expected is not None else None
    notes = []
    secondary: stats.Estimate | None
    if run.metrics.has_success:
        primary, secondary = stats.success_estimate(successes), stats.mean_estimate(values)
    else:
        primary, secondary = stats.mean_estimate(values), None
        if reference is not None and run.metrics.win_rate:
            secondary = stats.win_estimate(stats.task_means(values), stats.task_means(task_values(reference)))
            if secondary.n != primary.n:
                notes.append(f"win rate over {secondary.n} common tasks")
    if not_run:
        notes.append(f"incomplete: {not_run} of {expected} episodes not run")
    if run.torn_line:
        notes.append("torn last line ignored")
    leaks = _task_leaks(run)
    leak = stats.success_estimate(leaks) if leaks else None
    if leak is not None and leak.n != primary.n:
        notes.append(f"leak % over {leak.n} tasks that measured it")
    pass_k = [stats.pass_hat_k(successes, k) for k in range(1, run.trials + 1)] if run.trials >= 2 else []
    truth = _task_truth(run)
    untrue = stats.ratio_estimate(truth) if truth else None
    checked = sum(total for pairs in truth.values() for _, total in pairs)
    replies = sum(1 for eps in run.scored().values() for e in eps for t in e.dialogue_turns if t.role == "human")
    if untrue is not None and checked < replies:
        notes.append(f"untrue % over the {checked} of {replies} human replies that were checked")
    row = Row(run, label, primary.n, run.infra_errors, not_run, primary, secondary, flip, flip_n, leak, notes, pass_k)
    row.parts = _parts(run, reference)
    row.untrue = untrue
    row.untrue_replies = checked
    row.failed_untrue = failed_untrue(run)
    return row


HAL_THRESHOLD = 0.8
"""HAL's leaderboard counts a frontend answer a success when its CLIP similarity reaches this."""


def _parts(run: Run, reference: Run | None) -> dict[str, stats.Estimate]:
    """Sub-score means; HAL's CLIP >= 0.8 rate where the similarity is a real CLIP cosine (never the test embedder's);
    the win rate on the reward against a reference run, for an env id with successes whose domain has one."""
    parts: dict[str, stats.Estimate] = {}
    scored = run.scored()
    for name in run.metrics.subscores:
        values = {
            t: [float(e.score["subscores"][name]) for e in eps if _has_part(e.score, name)] for t, eps in scored.items()
        }
        parts[name] = stats.mean_estimate({t: v for t, v in values.items() if v})
    embedder = str((run.config.scoring or {}).get("embedder", ""))
    if embedder.startswith("clip"):
        hal = {
            t: [_similarity(e.score) >= HAL_THRESHOLD for e in eps if _similarity(e.score) is not None]
            for t, eps in scored.items()
        }
        parts[f"CLIP >= {HAL_THRESHOLD}"] = stats.success_estimate({t: v for t, v in hal.items() if v})
    if reference is not None and run.domain.metrics.win_rate and run.metrics.has_success:
        parts["win rate"] = stats.win_estimate(
            stats.task_means(task_values(run)), stats.task_means(task_values(reference))
        )
    return parts


def _has_part(score: Any, name: str) -> bool:
    return isinstance(score, dict) and isinstance(score.get("subscores"), dict) and name in score["subscores"]


def _similarity(score: Any) -> Any:
    value = score.get("similarity") if isinstance(score, dict) else None
    return value if isinstance(value, int | float) else None


# -- comparability ----------------------------------------------------------------------------------------------
def _scoring(run: Run) -> str:
    scoring = run.config.scoring
    if scoring is None:
        return "{}"
    return json.dumps({k: v for k, v in scoring.items() if k != "sandbox"}, sort_keys=True)


def _simulator(run: Run, key: str) -> Any:
    return getattr(run.config.simulator, key, None)


def _task_set(run: Run) -> str:
    spec = run.tasks.spec
    parts = [spec or "unnamed", f"{run.task_count} tasks" if run.task_count is not None else None]
    if run.ids_sha256:
        parts.append(f"ids {run.ids_sha256[:8]}")
    return ", ".join(p for p in parts if p)


def _vs(base: Any) -> str:
    return f"not {base}" if base is not None else "others unrecorded"


def simulator_name(run: Run) -> Any:
    """The simulated human as runs are told apart by: its model (else spec) and, where it had any, its grounding."""
    return simulator_label(_simulator(run, "model") or _simulator(run, "spec"), run.config)


def _truth_shown(run: Run) -> str:
    """What the agent saw of a reply holding a false claim: ``resample:N`` changes it; ``flag``, ``off`` and runs
    written before claims were checked all show the human's first draw."""
    policy = truth_config(run.config).policy
    return policy if policy is not None and policy.startswith("resample") else "first draw"


# (name, value, note for a row whose value differs from the baseline). A missing task set is never comparable. The
# runs of a table share their env id; a reference run of another id is named as differing in it.
_PROPERTIES: list[tuple[str, Callable[[Run], Any], Callable[[Run, Any], str]]] = [
    ("env", lambda r: r.env_id, lambda r, base: f"env {r.env_id}, {_vs(base)}"),
    (
        "task set",
        lambda r: r.ids_sha256,
        lambda r, base: f"other task set: {_task_set(r)}" if r.ids_sha256 else "task set unknown (no tasks.ids_sha256)",
    ),
    (
        "max turns",
        lambda r: r.config.max_turns,
        lambda r, base: f"max_turns {r.config.max_turns}, {_vs(base)}",
    ),
    ("agent instructions", lambda r: r.config.agent_prompt_sha256, lambda r, base: "other agent instructions"),
    ("scoring", _scoring, lambda r, base: f"scoring {_scoring(r)}, {_vs(base)}"),
    ("simulator", simulator_name, lambda r, base: f"simulator {simulator_name(r)}, {_vs(base)}"),
    ("simulator prompt", lambda r: _simulator(r, "prompt_sha256"), lambda r, base: "other simulator prompt"),
    ("leak policy", lambda r: _leaks(r, "policy"), lambda r, base: f"leak policy {_leaks(r, 'policy')}, {_vs(base)}"),
    (
        "truth policy",
        _truth_shown,
        lambda r, base: f"truth policy {_truth_shown(r)}, not {'flag or off' if base == 'first draw' else base}",
    ),
]


def _leaks(run: Run, key: str) -> Any:
    return getattr(run.config.leaks, key, None)


def _differs(name: str, value: Any, baseline: Any) -> bool:
    return value != baseline or (name == "task set" and value is None)


def _annotate(rows: Sequence[Row]) -> None:
    if len(rows) < 2:
        return
    found: list[list[str]] = [[] for _ in rows]
    for name, get, describe in _PROPERTIES:
        values = [get(row.run) for row in rows]
        counts = Counter(values)
        baseline = max(values, key=lambda v: (counts[v], -values.index(v)))
        for notes, row, value in zip(found, rows, values, strict=True):
            if _differs(name, value, baseline):
                notes.append(describe(row.run, baseline))
    for notes, row in zip(found, rows, strict=True):
        row.notes[:0] = notes


def _reference_notes(row: Row, reference: Run) -> None:
    if row.run.path.resolve() == reference.path.resolve():
        row.notes.insert(0, "reference run")
        return
    differs = [
        name
        for name, get, _ in _PROPERTIES
        if _differs(name, get(row.run), get(reference)) or _differs(name, get(reference), get(row.run))
    ]
    if differs:
        row.notes.append(f"reference run differs in {', '.join(differs)}")


def _sort_key(row: Row) -> tuple[Any, ...]:
    primary = row.primary.value
    secondary = row.secondary.value if row.secondary is not None else None
    return (
        primary is None,
        -(primary or 0.0),
        secondary is None,
        -(secondary or 0.0),
        row.label,
    )


# -- report -----------------------------------------------------------------------------------------------------
def run_labels(runs: Sequence[Run]) -> list[str]:
    """The directory name of each run; the path as given where two runs share a name."""
    names = [run.path.resolve().name or str(run.path) for run in runs]
    counts = Counter(names)
    return [name if counts[name] == 1 else str(run.path) for name, run in zip(names, runs, strict=True)]


@dataclass
class Report:
    tables: list[Table]
    costs: list[tuple[str, list[RoleCost]]]
    prices: Prices
    reference: Run | None = None
    runs: dict[str, Run] = field(default_factory=dict)
    """Each run by its label (the cost table's first column)."""

    def row_of(self, run: Run) -> Row | None:
        for table in self.tables:
            for row in table.rows:
                if row.run is run:
                    return row
        return None

    def warnings(self) -> list[str]:
        runs = [row.run for table in self.tables for row in table.rows]
        if self.reference is not None and all(r is not self.reference for r in runs):
            runs.append(self.reference)
        return [w for run in runs for w in run.warnings]


def build_report(runs: Sequence[Run], *, reference: Run | None = None, prices: Prices | None = None) -> Report:
    """Leaderboard tables (backend first), each sorted best first, and the token/cost rows of every run, priced by
    ``prices`` or, without a table, by colbench's dated list prices (as the progress line and ``--dry-run`` are)."""
    if reference is not None and not reference.domain.metrics.win_rate:
        with_win = [d.name for d in all_domains() if d.metrics.win_rate]
        raise ConfigError(
            f"--reference-run {reference.path}: a {reference.domain_name} run; win rate is a metric of "
            f"{' and '.join(with_win)} runs (pass one, e.g. GPT-4o's as in the paper)"
        )
    unique: list[Run] = []
    seen: set[Path] = set()
    for run in runs:
        if run.path.resolve() not in seen:
            seen.add(run.path.resolve())
            unique.append(run)
    labels = run_labels(unique)
    reference_label = None
    if reference is not None:
        matches = [lbl for lbl, r in zip(labels, unique, strict=True) if r.path.resolve() == reference.path.resolve()]
        reference_label = matches[0] if matches else run_labels([reference])[0]
    tables = []
    for domain in all_domains():
        against = reference if reference is not None and reference.domain_name == domain.name else None
        runs_of_domain = [
            (run, label) for run, label in zip(unique, labels, strict=True) if run.domain_name == domain.name
        ]
        for judged_by in sorted({run.judged_by for run, _ in runs_of_domain}):
            chosen = [(run, label) for run, label in runs_of_domain if run.judged_by == judged_by]
            rows = [summarize(run, label, against) for run, label in chosen]
            _annotate(rows)
            if against is not None:
                for row in rows:
                    _reference_notes(row, against)
            rows.sort(key=_sort_key)
            for rank, row in enumerate(rows, start=1):
                row.rank = rank
            reference_of = reference_label if against is not None else None
            env_id = chosen[0][0].env_id
            # the plus tests are named where they split one env id's runs: a lone v2 table keeps its usual title
            split = len({run.judged_by for run, _ in runs_of_domain if run.env_id == env_id}) > 1
            tables.append(Table(domain.name, env_id, rows, reference_of, judged_by if split else ""))
    prices = prices if prices is not None else LIST_PRICES
    costs = [(label, role_costs(run, prices)) for run, label in zip(unique, labels, strict=True)]
    return Report(tables, costs, prices, reference, dict(zip(labels, unique, strict=True)))
