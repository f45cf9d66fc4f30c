"""``colbench compare``: is one run really better than another, and do rankings survive a change of human?

Two runs on the same tasks are compared **paired**: per task, the difference of the task's mean score over trials
(the second run minus the first), its mean over the common tasks with a paired bootstrap interval (tasks resampled
together, so the task's difficulty cancels), win / loss / tie counts, and for success the exact McNemar test on the
(task, trial) episodes both runs scored (only discordant pairs carry information; two-sided binomial test at 1/2).

Runs of different env ids (a run and its ``colbench rescore`` under other rules, say) are compared all the same, but
labelled as not comparable across versions: the difference is the change of rules as much as of the agent, so each
task whose score changed is listed.

Simulator swap: when the runs hold the same agents under two simulated humans (told apart by run.json's simulator
model, or spec), each agent's score change from the first simulator to the second gets its paired interval, and the
agents' ranks under the two are compared with Spearman's rho and Kendall's tau (tau-b). A benchmark whose ranking of
agents changes with the human says more about the human than about the agents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from colbench.errors import DataError
from colbench.report import stats
from colbench.report.html_pages import render_page
from colbench.report.leaderboard import run_labels, simulator_name, task_values
from colbench.report.tables import text_table
from colbench.runs import Run


@dataclass(frozen=True)
class Paired:
    """Run ``b`` against run ``a`` on their common tasks."""

    a: str
    b: str
    metric: str
    tasks: int
    mean_a: float
    mean_b: float
    diff: stats.Estimate
    wins: int  # tasks where b scores higher
    losses: int
    ties: int
    b_only: int  # (task, trial) episodes b solved and a did not
    a_only: int
    mcnemar_p: float | None
    only_a: int = 0  # tasks scored in one run only (not compared)
    only_b: int = 0
    env_a: str = ""
    env_b: str = ""
    changed: tuple[tuple[str, float, float], ...] = ()  # other env ids: (task, mean a, mean b) where they differ

    @property
    def across_versions(self) -> bool:
        """The runs are of different env ids, or of other plus tests: their scores come from different rules or
        tests (``Run.judged_by``)."""
        return self.env_a != self.env_b


@dataclass(frozen=True)
class SimulatorSwap:
    """The same agents under two simulated humans."""

    first: str
    second: str
    agents: tuple[str, ...]
    scores_first: tuple[float, ...]
    scores_second: tuple[float, ...]
    changes: tuple[stats.Estimate, ...]
    spearman: float | None
    kendall: float | None


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, ...]
    pairs: tuple[Paired, ...]
    swaps: tuple[SimulatorSwap, ...]

    def text(self) -> str:
        return _text(self)

    def html(self) -> str:
        return _html(self)


def mcnemar_exact(b_only: int, a_only: int) -> float | None:
    """Two-sided exact McNemar p-value: the binomial test of ``b_only`` successes in ``b_only + a_only`` at 1/2."""
    n = b_only + a_only
    if n == 0:
        return None
    k = min(b_only, a_only)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def paired(a: Run, b: Run, label_a: str, label_b: str) -> Paired:
    """``b`` against ``a``; a DataError when the runs are of different domains or share no scored task."""
    if a.domain_name != b.domain_name:
        raise DataError(
            f"{label_a} is a {a.domain_name} run and {label_b} a {b.domain_name} run: compare runs of one domain"
        )
    means_a, means_b = stats.task_means(task_values(a)), stats.task_means(task_values(b))
    common = sorted(set(means_a) & set(means_b))
    if not common:
        raise DataError(f"{label_a} and {label_b} have no scored task in common")
    diffs = [means_b[t] - means_a[t] for t in common]
    low, high = stats.bootstrap_ci(diffs) or (None, None)
    diff = stats.Estimate(stats.mean(diffs), low, high, len(diffs), "paired bootstrap")
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    episodes_a = _episode_success(a)
    episodes_b = _episode_success(b)
    # runs are named by their env ids, and by their plus tests too where only those differ
    plus_alike = a.env_id != b.env_id or a.judged_by == b.judged_by
    both = set(episodes_a) & set(episodes_b)
    b_only = sum(episodes_b[k] and not episodes_a[k] for k in both)
    a_only = sum(episodes_a[k] and not episodes_b[k] for k in both)
    return Paired(
        a=label_a,
        b=label_b,
        metric=a.metrics.reward_name,
        tasks=len(common),
        mean_a=stats.mean([means_a[t] for t in common]),
        mean_b=stats.mean([means_b[t] for t in common]),
        diff=diff,
        wins=wins,
        losses=losses,
        ties=len(diffs) - wins - losses,
        b_only=b_only,
        a_only=a_only,
        mcnemar_p=mcnemar_exact(b_only, a_only),
        only_a=len(means_a) - len(common),
        only_b=len(means_b) - len(common),
        env_a=a.env_id if plus_alike else a.judged_by,
        env_b=b.env_id if plus_alike else b.judged_by,
        changed=tuple((t, means_a[t], means_b[t]) for t in common if means_a[t] != means_b[t])
        if a.judged_by != b.judged_by
        else (),
    )


def _episode_success(run: Run) -> dict[tuple[str, int], bool]:
    domain = run.domain
    return {
        key: domain.success_of(e.reward or 0.0, e.success, run.env_id)
        for key, e in run.episodes.items()
        if e.ok and e.reward is not None
    }


def _agent_name(run: Run) -> str:
    agent = run.config.agent
    return str(agent.name or agent.spec) if agent is not None else "None"


def simulator_swaps(runs: Sequence[Run], labels: Sequence[str]) -> list[SimulatorSwap]:
    """For every two simulators that saw the same two or more agents: score changes and rank correlations."""
    by_sim: dict[str, dict[str, Run]] = {}
    for run in runs:
        by_sim.setdefault(str(simulator_name(run)), {})[_agent_name(run)] = run
    swaps = []
    for first, second in combinations(by_sim, 2):
        agents = sorted(set(by_sim[first]) & set(by_sim[second]))
        if len(agents) < 2:
            continue
        changes, s1, s2 = [], [], []
        for agent in agents:
            p = paired(by_sim[first][agent], by_sim[second][agent], f"{agent} @ {first}", f"{agent} @ {second}")
            changes.append(p.diff)
            s1.append(p.mean_a)
            s2.append(p.mean_b)
        swaps.append(
            SimulatorSwap(
                first, second, tuple(agents), tuple(s1), tuple(s2), tuple(changes), *_rank_correlations(s1, s2)
            )
        )
    return swaps


def _ranks(values: Sequence[float]) -> np.ndarray:
    """Average ranks (ties share the mean of their positions)."""
    data = np.asarray(values, dtype=float)
    order = data.argsort(kind="stable")
    ranks = np.empty(len(data))
    ranks[order] = np.arange(1, len(data) + 1)
    for value in np.unique(data):
        tied = data == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def _rank_correlations(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """Spearman's rho (Pearson on average ranks) and Kendall's tau-b; None where a side has no variation."""
    rx, ry = _ranks(x), _ranks(y)
    spearman = None
    if rx.std() > 0 and ry.std() > 0:
        spearman = float(np.corrcoef(rx, ry)[0, 1])
    concordant = discordant = ties_x = ties_y = 0
    for i, j in combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif dx == dy:
            concordant += 1
        else:
            discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    kendall = (concordant - discordant) / denominator if denominator else None
    return spearman, kendall


def compare(runs: Sequence[Run]) -> Comparison:
    """The first run against each other run, and every simulator swap the runs contain."""
    if len(runs) < 2:
        raise DataError("compare needs at least two run directories")
    labels = run_labels(runs)
    pairs = tuple(paired(runs[0], run, labels[0], label) for run, label in zip(runs[1:], labels[1:], strict=True))
    return Comparison(tuple(labels), pairs, tuple(simulator_swaps(runs, labels)))


# -- output ------------------------------------------------------------------------------------------------------


def _signed(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _interval(est: stats.Estimate) -> str:
    if not est.has_ci:
        return _signed(est.value)
    return f"{_signed(est.value)} [{est.low:+.3f}, {est.high:+.3f}]"


def _p(value: float | None) -> str:
    return "-" if value is None else (f"{value:.2g}" if value < 0.001 else f"{value:.3f}")


def _pair_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    header = [
        "run",
        "vs",
        "tasks",
        "mean",
        "vs mean",
        "diff [95% CI]",
        "W/L/T",
        "solved only here / only there",
        "McNemar p",
    ]
    body = [
        [
            p.b,
            p.a,
            str(p.tasks),
            f"{p.mean_b:.3f}",
            f"{p.mean_a:.3f}",
            _interval(p.diff),
            f"{p.wins}/{p.losses}/{p.ties}",
            f"{p.b_only} / {p.a_only}",
            _p(p.mcnemar_p),
        ]
        for p in comparison.pairs
    ]
    return header, body


def _version_line(pair: Paired) -> str:
    return (
        f"{pair.b} ({pair.env_b}) vs {pair.a} ({pair.env_a}): not comparable across versions (other env ids, or "
        f"other plus tests, judge by other rules); per-task changes: {len(pair.changed)} of {pair.tasks} tasks changed"
    )


def _change_rows(pair: Paired) -> tuple[list[str], list[list[str]]]:
    header = ["task", f"{pair.a} ({pair.env_a})", f"{pair.b} ({pair.env_b})", "change"]
    body = [[task, f"{a:.3f}", f"{b:.3f}", _signed(b - a)] for task, a, b in pair.changed]
    return header, body


def _swap_rows(swap: SimulatorSwap) -> tuple[list[str], list[list[str]]]:
    header = ["agent", f"under {swap.first}", f"under {swap.second}", "change [95% CI]"]
    body = [
        [agent, f"{s1:.3f}", f"{s2:.3f}", _interval(change)]
        for agent, s1, s2, change in zip(swap.agents, swap.scores_first, swap.scores_second, swap.changes, strict=True)
    ]
    return header, body


def _swap_line(swap: SimulatorSwap) -> str:
    return (
        f"rank correlation across {len(swap.agents)} agents: Spearman {_signed(swap.spearman, 2)}, "
        f"Kendall tau-b {_signed(swap.kendall, 2)}"
    )


def _sections(comparison: Comparison) -> list[tuple[str, Any]]:
    """What follows the heading, in either output, in order: the pairs' table, each pair across versions with its
    changed tasks, each simulator swap with its table and rank correlations; as ``("table", (header, body))``,
    ``("version", line)``, ``("swap", swap)`` and ``("line", line)``."""
    parts: list[tuple[str, Any]] = [("table", _pair_rows(comparison))]
    for pair in comparison.pairs:
        if pair.across_versions:
            parts.append(("version", _version_line(pair)))
            if pair.changed:
                parts.append(("table", _change_rows(pair)))
    for swap in comparison.swaps:
        parts += [("swap", swap), ("table", _swap_rows(swap)), ("line", _swap_line(swap))]
    return parts


_TEXT: dict[str, Callable[[Any], str]] = {
    "table": lambda table: text_table(*table, left=table[0]) + "\n",
    "version": lambda line: f"\n{line}\n",
    "swap": lambda swap: f"\nsimulator swap: {swap.first} -> {swap.second}\n",
    "line": lambda line: line + "\n",
}


def _text(comparison: Comparison) -> str:
    metric = comparison.pairs[0].metric
    head = f"{metric}, paired against {comparison.labels[0]} (per task: mean over trials; diff = run - vs)\n"
    return "".join([head, *(_TEXT[kind](value) for kind, value in _sections(comparison))])


def _html(comparison: Comparison) -> str:
    return render_page("compare.html", first=comparison.labels[0], sections=_sections(comparison))
