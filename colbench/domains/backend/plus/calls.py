"""Many calls of one module judged in the sandbox, in batches (``calls_prelude.py`` runs them there).

The augmenter runs a few hundred candidate calls against a reference and every one of its mutants; the audit runs
its own inputs against every surviving mutant. :func:`run_calls` sends them ``BATCH`` calls to a test process and
decodes each call's outcome into a :class:`CallOutcome`; :func:`run_sources` does it for many sources (mutants) in
one request, so the sandbox's workers are never idle between two mutants. A batch the sandbox stops as a whole (the
wall-clock backstop, a crash) is run again one call per process, so one call that hangs costs only itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from colbench.domains.backend.values import EXACT, DecodeError, decode, values_equal
from colbench.sandbox.contract import Limits, Sandbox

BATCH = 24
"""Calls per test process."""


@dataclass(frozen=True)
class Budget:
    """Per-call limits that do not depend on the machine (``calls_prelude.py``), and the wall-clock backstop of a
    whole batch, set far above what the budgets allow so that a slow machine drops nothing a fast one keeps."""

    max_ops: int = 100_000
    max_depth: int = 200
    max_items: int = 10_000
    backstop_s: float = 60.0


@dataclass(frozen=True)
class CallOutcome:
    """What one call did: ``kind`` is ``value`` (then ``value`` and ``ops``), ``raised``, ``budget``, ``other``
    (a value of a type not compared here), ``module`` (the module failed) or ``lost`` (the sandbox stopped it)."""

    kind: str
    value: Any = None
    ops: int = 0
    detail: str = ""
    covered: frozenset[str] = frozenset()

    @property
    def is_value(self) -> bool:
        return self.kind == "value"

    def same(self, other: CallOutcome) -> bool:
        """Whether two outcomes of one call agree: equal values, or the same failure (kind and detail)."""
        if self.is_value and other.is_value:
            return values_equal(self.value, other.value, EXACT)
        return self.kind == other.kind and self.detail == other.detail and not self.is_value


@cache
def prelude() -> str:
    """The in-sandbox batch runner's source."""
    return Path(__file__).with_name("calls_prelude.py").read_text(encoding="utf-8")


def _expression(source: str, calls: Sequence[str], seed: int, budget: Budget, cover: bool) -> str:
    return (
        f"__colbench_calls__({source!r}, {list(calls)!r}, {seed}, {budget.max_ops}, {budget.max_depth}, "
        f"{budget.max_items}, {cover})"
    )


def _decoded(raw: Any) -> CallOutcome:
    if not isinstance(raw, tuple) or not raw or not isinstance(raw[0], str):
        return CallOutcome("lost", detail="malformed outcome")
    kind = raw[0]
    if kind == "v" and len(raw) in (3, 4) and isinstance(raw[2], int):
        covered = frozenset(str(item) for item in raw[3]) if len(raw) == 4 and isinstance(raw[3], list) else frozenset()
        return CallOutcome("value", raw[1], raw[2], covered=covered)
    if kind in ("raised", "budget", "other", "module") and len(raw) == 2:
        return CallOutcome(kind, detail=str(raw[1]))
    return CallOutcome("lost", detail="malformed outcome")


def run_calls(
    sandbox: Sandbox,
    source: str,
    calls: Sequence[str],
    *,
    seed: int = 0,
    budget: Budget | None = None,
    pool: str = "answer",
    cover: bool = False,
) -> list[CallOutcome]:
    """Each call's outcome, in order, each in a fresh module of ``source`` (with ``cover``, what each covered:
    run ``coverage.instrument(source)`` for its comparisons)."""
    return run_sources(sandbox, [(source, calls)], seed=seed, budget=budget, pool=pool, cover=cover)[0]


def run_sources(
    sandbox: Sandbox,
    jobs: Sequence[tuple[str, Sequence[str]]],
    *,
    seed: int = 0,
    budget: Budget | None = None,
    pool: str = "answer",
    cover: bool = False,
) -> list[list[CallOutcome]]:
    """``run_calls`` of each ``(source, calls)`` job, every job's batches sent in one request, so the sandbox's
    workers share the batches of many mutants (each batch names its source: the module is the runner alone)."""
    budget = budget or Budget()
    limits = Limits(timeout_s=budget.backstop_s)
    batches = [
        (j, source, list(calls[i : i + BATCH]))
        for j, (source, calls) in enumerate(jobs)
        for i in range(0, len(calls), BATCH)
    ]
    found: list[list[CallOutcome]] = [[] for _ in jobs]
    if not batches:
        return found
    expressions = [_expression(source, batch, seed, budget, cover) for _, source, batch in batches]
    outcomes = sandbox.run_tests(prelude(), expressions, limits=limits, pool=pool)
    for (j, source, batch), outcome in zip(batches, outcomes, strict=True):
        decoded = _batch(outcome.value) if outcome.outcome == "value" else None
        if decoded is not None and len(decoded) == len(batch):
            found[j] += decoded
        elif len(batch) > 1:  # stopped as a whole: each call again in a process of its own
            singles = sandbox.run_tests(
                prelude(), [_expression(source, [c], seed, budget, cover) for c in batch], limits=limits, pool=pool
            )
            for one in singles:
                again = _batch(one.value) if one.outcome == "value" else None
                found[j].append(again[0] if again else CallOutcome("lost", detail=one.outcome))
        else:
            found[j].append(CallOutcome("lost", detail=outcome.outcome))
    return found


def _batch(value: Any) -> list[CallOutcome] | None:
    try:
        items = decode(value)
    except DecodeError:
        return None
    if not isinstance(items, list):
        return None
    return [_decoded(item) for item in items]
