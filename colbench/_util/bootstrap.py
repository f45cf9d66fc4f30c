"""The one percentile bootstrap of colbench's intervals (the leaderboard, ``colbench compare``, the simulator
training's evaluation): clusters are drawn with replacement, ``CHUNK`` resamples at a time so that memory stays
bounded for runs of 10,000 tasks; the statistic of each resample is the caller's. Drawing in chunks takes the same
numbers from the generator as drawing at once, so the chunk size never changes an interval."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

CHUNK = 1_000


def percentile_interval(
    clusters: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    resamples: int,
    seed: int,
    confidence: float,
) -> tuple[float, float]:
    """The ``confidence`` percentile interval of ``statistic`` over ``resamples`` resamples of ``clusters``
    clusters; ``statistic`` maps a ``(k, clusters)`` array of drawn cluster indices to the k resamples' values."""
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    for start in range(0, resamples, CHUNK):
        size = min(CHUNK, resamples - start)
        values[start : start + size] = statistic(rng.integers(0, clusters, size=(size, clusters)))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
