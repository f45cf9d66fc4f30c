"""pass^k: the chance that all of k trials of a task succeed (tau-bench's estimator, averaged over tasks).

Kept behind this one function so that the viewer can use ``colbench.report.stats``'s estimator once it has one,
without changing any caller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def pass_hat_k(per_task: Mapping[str, Sequence[bool]], k: int) -> float | None:
    """Mean over tasks with at least ``k`` scored trials of C(c, k) / C(n, k) (c successes of n trials); None
    when no task has ``k`` trials."""
    ratios = [
        math.comb(sum(map(bool, outcomes)), k) / math.comb(len(outcomes), k)
        for outcomes in per_task.values()
        if len(outcomes) >= k >= 1
    ]
    return math.fsum(ratios) / len(ratios) if ratios else None
