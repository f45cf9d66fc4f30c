"""Leaderboard statistics: task-level means, 95% confidence intervals, win rate and flip rate.

The unit of analysis is the **task**. With several trials per task, each task contributes the mean of its scored
trials (trials of one task are not independent: they share the task's difficulty), and every interval resamples
tasks, never single episodes (a cluster bootstrap). Infrastructure errors are not scores: they are dropped before
anything here sees the data.

- Means (tests passed, similarity) and, with more than one trial on some task, success: percentile bootstrap over
  tasks, ``BOOTSTRAP_RESAMPLES`` resamples, fixed seed ``BOOTSTRAP_SEED`` (the same input always prints the same
  interval).
- Success with exactly one scored trial per task: the Wilson score interval (a binomial proportion; unlike the
  bootstrap it does not collapse to a point at 0% or 100%).
- Win rate: the per-task outcome (1 win, 0.5 tie, 0 loss) over the tasks both runs scored, bootstrapped the same way.
- A share of items that come in clusters (the simulated human's replies: several per episode, episodes per task):
  the pooled ratio (items hit / items counted over the whole run), its interval the percentile bootstrap that
  resamples tasks with all their items (``ratio_estimate``), so replies of one episode or task are never treated as
  independent draws.
- Fewer than two tasks: no interval.
- pass^k (tau2-bench's reliability metric): per task with ``n >= k`` scored trials and ``c`` successes, the unbiased
  estimate ``C(c, k) / C(n, k)`` of "all of k fresh trials succeed", averaged over those tasks; tasks with fewer than
  ``k`` scored trials are excluded and counted, never padded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from colbench._util.bootstrap import percentile_interval
from colbench.errors import ConfigError, DataError

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval (``None`` where it cannot be computed) over ``n`` tasks."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str = ""

    @property
    def has_ci(self) -> bool:
        return self.low is not None and self.high is not None


def _estimate(value: float, ci: tuple[float, float] | None, n: int, method: str) -> Estimate:
    low, high = ci if ci is not None else (None, None)
    return Estimate(value, low, high, n, method)


def mean(values: Sequence[float]) -> float:
    """Exactly rounded mean (``math.fsum``): independent of order, so equal inputs give equal means."""
    return math.fsum(values) / len(values)


def task_means(per_task: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """The mean over each task's scored trials; tasks without any are left out."""
    return {task: mean(values) for task, values in per_task.items() if len(values)}


def bootstrap_ci(
    values: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (one value per task); ``None`` below two values. The
    mean is the pooled ratio of :func:`ratio_ci` with every total 1 (the same floating-point sums and division)."""
    return ratio_ci(values, [1.0] * len(values), confidence=confidence, resamples=resamples, seed=seed)


def wilson_ci(successes: int, n: int, *, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion ``successes / n``; ``None`` for ``n == 0``."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends, not 1e-17 off
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mean_estimate(per_task: Mapping[str, Sequence[float]]) -> Estimate:
    """Mean over tasks of the per-task mean, with a cluster (task-level) bootstrap interval."""
    means = list(task_means(per_task).values())
    if not means:
        return Estimate(None, method="bootstrap")
    return _estimate(mean(means), bootstrap_ci(means), len(means), "bootstrap")


def success_estimate(per_task: Mapping[str, Sequence[bool]]) -> Estimate:
    """Success rate over tasks: Wilson with one scored trial per task, else the cluster bootstrap of task means."""
    scored = {task: values for task, values in per_task.items() if len(values)}
    if not scored:
        return Estimate(None)
    if all(len(values) == 1 for values in scored.values()):
        n = len(scored)
        k = sum(bool(values[0]) for values in scored.values())
        return _estimate(k / n, wilson_ci(k, n), n, "wilson")
    return mean_estimate({task: [float(v) for v in values] for task, values in scored.items()})


def ratio_ci(
    hits: Sequence[float],
    totals: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile cluster-bootstrap interval of ``sum(hits) / sum(totals)``: clusters (tasks) are resampled with
    their counts. Every total must be positive; ``None`` below two clusters."""
    num = np.asarray(hits, dtype=float)
    den = np.asarray(totals, dtype=float)
    n = len(num)
    if n < 2:
        return None
    if len(den) != n or not (den > 0).all():
        raise ValueError("ratio_ci needs one positive total per cluster")
    return percentile_interval(
        n,
        lambda drawn: num[drawn].sum(axis=1) / den[drawn].sum(axis=1),
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )


def ratio_estimate(per_task: Mapping[str, Sequence[tuple[int, int]]]) -> Estimate:
    """The pooled share ``hits / total`` over every item of the run, from per-task ``(hits, total)`` pairs (one per
    episode), with the cluster bootstrap of :func:`ratio_ci` over the tasks that counted any item; ``n`` is the
    number of those tasks. ``Estimate(None)`` when nothing was counted."""
    sums = {task: (sum(h for h, _ in pairs), sum(t for _, t in pairs)) for task, pairs in per_task.items()}
    counted = [(h, t) for h, t in sums.values() if t > 0]
    if not counted:
        return Estimate(None, method="bootstrap")
    hits = [h for h, _ in counted]
    totals = [t for _, t in counted]
    value = math.fsum(hits) / math.fsum(totals)
    return _estimate(value, ratio_ci(hits, totals), len(counted), "bootstrap")


@dataclass(frozen=True)
class WinRate:
    """How often run ``a`` beat run ``b`` on the tasks both scored; ``rate = (wins + ties / 2) / n``."""

    rate: float
    wins: int
    ties: int
    losses: int
    n: int
    only_a: int = 0
    only_b: int = 0


def win_outcomes(
    scores: Mapping[str, float], reference: Mapping[str, float], *, tie_tolerance: float = 0.0
) -> dict[str, float]:
    """Per common task: 1.0 where ``scores`` beats ``reference``, 0.5 for a tie, 0.0 otherwise.

    A tie is exact equality by default (``tie_tolerance=0.0``): scores are deterministic for one embedder and
    renderer, and exact ties are real (both floors, or the same page); with ``tie_tolerance`` > 0, differences of at
    most that much are ties. A missing, None or NaN score on a common task (an infrastructure error) is a DataError:
    rerun or drop that task.
    """
    if not tie_tolerance >= 0.0:
        raise ConfigError(f"tie_tolerance must be >= 0, got {tie_tolerance}")
    out = {}
    for task in scores:
        if task in reference:
            x, y = _score(scores, task, "a"), _score(reference, task, "b")
            out[task] = 0.5 if abs(x - y) <= tie_tolerance else 1.0 if x > y else 0.0
    return out


def win_rate(a: Mapping[str, float], b: Mapping[str, float], *, tie_tolerance: float = 0.0) -> WinRate:
    """Share of the tasks present in both runs where ``a``'s score beats ``b``'s; ties count half (the paper's win
    rate against GPT-4o). Tasks in only one run are counted (``only_a``, ``only_b``) but not compared."""
    outcomes = win_outcomes(a, b, tie_tolerance=tie_tolerance)
    if not outcomes:
        raise DataError(f"the two runs have no task in common ({len(a)} tasks in a, {len(b)} in b)")
    values = list(outcomes.values())
    wins, ties = values.count(1.0), values.count(0.5)
    n = len(values)
    return WinRate(mean(values), wins, ties, n - wins - ties, n, only_a=len(a) - n, only_b=len(b) - n)


def _score(run: Mapping[str, float], task_id: str, label: str) -> float:
    value: object = run[task_id]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise DataError(f"task {task_id!r} has no score in run {label} ({value!r}): rerun or drop it")
    return float(value)


def win_estimate(scores: Mapping[str, float], reference: Mapping[str, float]) -> Estimate:
    """Win rate (exact ties count half) with a bootstrap interval over the common tasks. Both mappings are
    task_id -> score, the mean over trials where a run has several."""
    outcomes = list(win_outcomes(scores, reference).values())
    if not outcomes:
        return Estimate(None, method="bootstrap")
    return _estimate(mean(outcomes), bootstrap_ci(outcomes), len(outcomes), "bootstrap")


def flip_rate(per_task: Mapping[str, Sequence[bool]]) -> tuple[float | None, int]:
    """Share of the tasks with at least two scored trials whose success differs across trials, and their count."""
    repeated = [values for values in per_task.values() if len(values) >= 2]
    if not repeated:
        return None, 0
    flips = sum(1 for values in repeated if len({bool(v) for v in values}) > 1)
    return flips / len(repeated), len(repeated)


@dataclass(frozen=True)
class PassHatK:
    """pass^k over the ``n`` tasks with at least ``k`` scored trials; ``excluded`` tasks had fewer."""

    k: int
    value: float | None
    n: int
    excluded: int


def pass_hat_k(per_task: Mapping[str, Sequence[bool]], k: int) -> PassHatK:
    """tau2-bench's unbiased pass^k: the mean over tasks of ``C(c, k) / C(n, k)`` (``c`` successes of ``n`` trials).

    Unlike ``success ** k`` it uses each task's own trials, so a task that always succeeds scores 1 for every k and
    a flaky one decays; it is unbiased for the chance that k fresh trials of the task all succeed."""
    if k < 1:
        raise ConfigError(f"pass^k needs k >= 1, got {k}")
    eligible = [values for values in per_task.values() if len(values) >= k]
    excluded = sum(1 for values in per_task.values() if 0 < len(values) < k)
    if not eligible:
        return PassHatK(k, None, 0, excluded)
    ratios = [math.comb(sum(map(bool, values)), k) / math.comb(len(values), k) for values in eligible]
    return PassHatK(k, mean(ratios), len(eligible), excluded)
