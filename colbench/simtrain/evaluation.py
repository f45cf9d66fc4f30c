"""Static evaluation: the human's K draws on held-out prefixes, per prefix, and base against trained with intervals.

Per prefix (:func:`draw_metrics`, over its K judged draws):

- ``leak``: the share of draws the domain's leak detector flags;
- ``untrue``: the share of draws holding a false claim (the claims checker's verdict; over all draws, so a prefix
  whose draws make no claim counts 0, unlike the probe's untrue rate, which divides by replies with a checked
  claim);
- ``over_release``: the mean count of reference tokens a draw newly reveals;
- ``empty_or_refusal``: the share of draws that are empty (no letter or digit) or a refusal (the probe's rule);
- ``unique_per_k``: how many different texts the K draws are (whitespace collapsed, as the probe counts them).

:func:`paired_difference` compares two such figures over the same prefixes, each prefix weighted by how often it
occurs (its ``weight``): the weighted means, their difference (trained minus base) and a percentile bootstrap
interval, resampling **groups** of prefixes (by default each prefix its own group; pass :func:`prefix_groups` to
resample the prefixes of one task, or of tasks sharing a reference, together: their figures are not independent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from colbench._util.bootstrap import percentile_interval
from colbench.errors import ConfigError
from colbench.probe.draws import distinct
from colbench.simtrain.prefixes import Prefix, groups_by_reference
from colbench.simtrain.selection import Judged, is_empty, is_refusal

METRICS = ("leak", "untrue", "over_release", "empty_or_refusal", "unique_per_k")


def draw_metrics(judged_by_prefix: Mapping[str, Sequence[Judged]]) -> dict[str, dict[str, float]]:
    """Each prefix's figures (module docstring), by prefix key; a prefix with no draws is a ConfigError."""
    out: dict[str, dict[str, float]] = {}
    for key, judged in judged_by_prefix.items():
        n = len(judged)
        if not n:
            raise ConfigError(f"prefix {key}: no judged draws")
        out[key] = {
            "leak": sum(j.leaked for j in judged) / n,
            "untrue": sum(j.false_claims > 0 for j in judged) / n,
            "over_release": sum(j.over_release for j in judged) / n,
            "empty_or_refusal": sum(is_empty(j.candidate.text) or is_refusal(j.candidate.text) for j in judged) / n,
            "unique_per_k": float(distinct([j.candidate.text for j in judged])),
        }
    return out


def prefix_groups(prefixes: Sequence[Prefix]) -> dict[str, str]:
    """Each prefix key's group for the bootstrap: prefixes sharing a task id or a reference are one group (as
    :func:`~colbench.simtrain.prefixes.split_by_reference` keeps them)."""
    return {p.key(): name for name, members in groups_by_reference(prefixes).items() for p in members}


def paired_difference(
    base: Mapping[str, float],
    trained: Mapping[str, float],
    weights: Mapping[str, float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    groups: Mapping[str, str] | None = None,
    level: float = 0.95,
) -> dict[str, float]:
    """``base``, ``trained`` (weighted means over the prefixes both hold: the same keys, or a ConfigError),
    ``diff`` (trained - base) and the ``level`` percentile bootstrap interval ``low``..``high`` of ``diff``
    (``n_boot`` resamples of the groups, with replacement; ``groups``: prefix key -> group, default one group per
    prefix; ``seed`` makes it reproducible)."""
    keys = sorted(base)
    if set(trained) != set(keys):
        missing = sorted(set(keys) ^ set(trained))
        raise ConfigError(f"paired difference: base and trained differ in prefixes (e.g. {missing[0]})")
    if not keys:
        raise ConfigError("paired difference: no prefixes")
    if n_boot < 1 or not 0 < level < 1:
        raise ConfigError(f"paired difference: n_boot must be >= 1 and level in (0, 1), got {n_boot}, {level}")
    for key in keys:
        w = weights.get(key)
        if w is None or isinstance(w, bool) or not math.isfinite(w) or w <= 0:
            raise ConfigError(f"paired difference: prefix {key}: weight must be a number > 0, got {w!r}")
        if not (math.isfinite(base[key]) and math.isfinite(trained[key])):
            raise ConfigError(f"paired difference: prefix {key}: figures must be finite numbers")
    names = [groups.get(key, key) if groups is not None else key for key in keys]
    index = {name: i for i, name in enumerate(dict.fromkeys(names))}
    size = len(index)
    w_g, b_g, t_g = np.zeros(size), np.zeros(size), np.zeros(size)
    for key, name in zip(keys, names, strict=True):
        g, w = index[name], float(weights[key])
        w_g[g] += w
        b_g[g] += w * base[key]
        t_g[g] += w * trained[key]
    total = w_g.sum()
    mean_base, mean_trained = float(b_g.sum() / total), float(t_g.sum() / total)
    low, high = percentile_interval(
        size,
        lambda picks: (t_g[picks].sum(axis=1) - b_g[picks].sum(axis=1)) / w_g[picks].sum(axis=1),
        resamples=n_boot,
        seed=seed,
        confidence=level,
    )
    return {
        "base": mean_base,
        "trained": mean_trained,
        "diff": mean_trained - mean_base,
        "low": low,
        "high": high,
    }


def compare(
    base_judged: Mapping[str, Sequence[Judged]],
    trained_judged: Mapping[str, Sequence[Judged]],
    weights: Mapping[str, float],
    *,
    groups: Mapping[str, str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Every metric's :func:`paired_difference` of the base and the trained human's draws on the same prefixes."""
    base, trained = draw_metrics(base_judged), draw_metrics(trained_judged)
    return {
        metric: paired_difference(
            {k: v[metric] for k, v in base.items()},
            {k: v[metric] for k, v in trained.items()},
            weights,
            n_boot=n_boot,
            seed=seed,
            groups=groups,
        )
        for metric in METRICS
    }
