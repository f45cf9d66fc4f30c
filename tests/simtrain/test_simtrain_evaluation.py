"""Static evaluation (colbench.simtrain.evaluation): per-prefix figures from judged draws, and paired differences
whose intervals exclude or include 0 as the data were built to, with weights and groups honoured."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from colbench.errors import ConfigError
from colbench.simtrain.evaluation import METRICS, compare, draw_metrics, paired_difference, prefix_groups
from colbench.simtrain.prefixes import Prefix
from colbench.simtrain.sampling import Candidate
from colbench.simtrain.selection import Judged
from colbench.tasks import load_split
from colbench.types.dialogue import Turn


def _judged(key: str, draw: int, text: str, *, leaked: bool = False, false: int = 0, over: int = 0) -> Judged:
    return Judged(Candidate(key, draw, text), leaked, false, 0, over, False)


def test_draw_metrics_per_prefix() -> None:
    draws = [
        _judged("p", 0, "It takes a list.", leaked=True, over=3),
        _judged("p", 1, "It  takes a list.", false=2, over=1),  # the same text, whitespace aside
        _judged("p", 2, "I don't know."),  # a refusal, by the probe's rule
        _judged("p", 3, " ... "),  # empty
    ]
    figures = draw_metrics({"p": draws})["p"]
    assert figures == {"leak": 0.25, "untrue": 0.25, "over_release": 1.0, "empty_or_refusal": 0.5, "unique_per_k": 3.0}
    assert set(figures) == set(METRICS)
    with pytest.raises(ConfigError, match="no judged draws"):
        draw_metrics({"q": []})


def test_a_constructed_improvement_excludes_zero_and_no_change_includes_it() -> None:
    rng = random.Random(0)
    keys = [f"k{i}" for i in range(40)]
    base = {k: 0.5 + rng.uniform(-0.1, 0.1) for k in keys}
    weights = dict.fromkeys(keys, 1.0)
    trained = {k: v - 0.2 + rng.uniform(-0.05, 0.05) for k, v in base.items()}
    better = paired_difference(base, trained, weights)
    assert better["high"] < 0 and better["low"] < better["diff"] < better["high"]
    assert better["diff"] == pytest.approx(better["trained"] - better["base"])
    # half the prefixes up by 0.2, half down by 0.2: no change on the whole
    same = paired_difference(base, {k: v + (0.2 if i % 2 else -0.2) for i, (k, v) in enumerate(base.items())}, weights)
    assert same["diff"] == pytest.approx(0.0, abs=1e-12) and same["low"] < 0 < same["high"]
    assert paired_difference(base, trained, weights) == better  # reproducible: the seed fixes the resamples
    assert paired_difference(base, trained, weights, seed=1)["low"] != better["low"]
    assert paired_difference(base, base, weights, seed=1)["diff"] == 0.0


def test_weights_are_honoured() -> None:
    base, trained = {"a": 0.0, "b": 1.0}, {"a": 0.0, "b": 0.0}
    heavy_a = paired_difference(base, trained, {"a": 3.0, "b": 1.0})
    heavy_b = paired_difference(base, trained, {"a": 1.0, "b": 3.0})
    assert heavy_a["base"] == pytest.approx(0.25) and heavy_a["diff"] == pytest.approx(-0.25)
    assert heavy_b["base"] == pytest.approx(0.75) and heavy_b["diff"] == pytest.approx(-0.75)
    for bad, says in (({"a": 1.0}, "prefix b: weight"), ({"a": 1.0, "b": 0.0}, "weight must be")):
        with pytest.raises(ConfigError, match=says):
            paired_difference(base, trained, bad)
    with pytest.raises(ConfigError, match="differ in prefixes"):
        paired_difference(base, {"a": 0.0}, {"a": 1.0, "b": 1.0})


def test_groups_are_resampled_together() -> None:
    """Ten prefixes of one task all got worse, ten of another all got better: twenty independent prefixes would give
    a narrow interval, but they are two tasks, and the interval by task is as wide as the two tasks' difference."""
    keys = [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    base = dict.fromkeys(keys, 0.5)
    trained = {k: 0.5 + (0.4 if k.startswith("a") else -0.2) for k in keys}
    weights = dict.fromkeys(keys, 1.0)
    alone = paired_difference(base, trained, weights)
    by_task = paired_difference(base, trained, weights, groups={k: k[0] for k in keys})
    assert alone["diff"] == pytest.approx(by_task["diff"]) == pytest.approx(0.1)
    assert by_task["low"] == pytest.approx(-0.2) and by_task["high"] == pytest.approx(0.4)
    assert by_task["high"] - by_task["low"] > 2 * (alone["high"] - alone["low"])


def test_compare_gives_every_metric_and_groups_follow_the_reference() -> None:
    task = load_split("backend-sample")[0]
    twin = replace(task, task_id="twin", problem_description=task.problem_description + " Please.")  # same reference
    other = load_split("backend-sample")[1]
    prefixes = [Prefix(t, (Turn("agent", q),), "test") for t in (task, twin, other) for q in ("What?", "Why?")]
    groups = prefix_groups(prefixes)
    assert len(groups) == 6 and len(set(groups.values())) == 2
    assert groups[prefixes[0].key()] == groups[prefixes[2].key()] != groups[prefixes[4].key()]
    base = {p.key(): [_judged(p.key(), d, f"leak {d}", leaked=True) for d in range(2)] for p in prefixes}
    trained = {p.key(): [_judged(p.key(), d, "Fine.") for d in range(2)] for p in prefixes}
    result = compare(base, trained, {p.key(): p.weight for p in prefixes}, groups=groups)
    assert set(result) == set(METRICS)
    assert result["leak"] == {"base": 1.0, "trained": 0.0, "diff": -1.0, "low": -1.0, "high": -1.0}
    assert result["unique_per_k"]["diff"] == -1.0
