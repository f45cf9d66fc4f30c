"""The bootstrap intervals of the leaderboard, of ``colbench compare`` and of the simulator training's evaluation
come from one resampler; these are the intervals each gave for a fixed seed before they shared it (numbers recorded
from the three resamplers they replaced), compared exactly: one resampler must not move a published figure."""

from __future__ import annotations

from colbench.report import stats
from colbench.simtrain.evaluation import paired_difference

VALUES = [0.774, 0.439, 0.859, 0.697, 0.094, 0.976, 0.761, 0.786, 0.128, 0.45, 0.371, 0.927, 0.644, 0.823, 0.443,
          0.227, 0.555, 0.064, 0.828, 0.632, 0.758, 0.355, 0.971, 0.893, 0.778, 0.195, 0.467, 0.044, 0.154, 0.683,
          0.745, 0.968, 0.326, 0.37, 0.47, 0.189, 0.13]  # fmt: skip
HITS, TOTALS = [3, 0, 2, 5, 1, 4, 0], [4, 2, 2, 9, 1, 6, 3]


def test_the_mean_interval_is_the_one_published_before() -> None:
    assert stats.bootstrap_ci(VALUES) == (0.4438635135135136, 0.6332432432432432)
    assert stats.bootstrap_ci(VALUES[:5], confidence=0.9, resamples=2500, seed=7) == (0.36532999999999966, 0.775)
    assert stats.bootstrap_ci(VALUES[:1]) is None


def test_the_pooled_ratio_interval_is_the_one_published_before() -> None:
    assert stats.ratio_ci(HITS, TOTALS) == (0.3181818181818182, 0.7391304347826086)
    assert stats.ratio_ci(HITS, TOTALS, resamples=1500, seed=3) == (0.30593645484949844, 0.7456018518518506)


def test_the_paired_difference_interval_is_the_one_published_before() -> None:
    base = {f"p{i}": v for i, v in enumerate(VALUES[:12])}
    trained = {f"p{i}": v for i, v in enumerate(VALUES[12:24])}
    weights = {f"p{i}": 1.0 + i % 3 for i in range(12)}
    assert paired_difference(base, trained, weights) == {
        "base": 0.6138333333333333,
        "trained": 0.6037499999999999,
        "diff": -0.010083333333333444,
        "low": -0.32417571214392804,
        "high": 0.30618616071428534,
    }
    groups = {f"p{i}": f"g{i // 3}" for i in range(12)}
    assert paired_difference(base, trained, weights, groups=groups, n_boot=2500, seed=5, level=0.9) == {
        "base": 0.6138333333333333,
        "trained": 0.60375,
        "diff": -0.010083333333333333,
        "low": -0.24116666666666667,
        "high": 0.19408333333333347,
    }
