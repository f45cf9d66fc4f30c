"""Many calls of one module judged in the sandbox, in batches (the sandbox's ``run_calls``: the runner's batched
calls run them there).

The augmenter runs a few hundred candidate calls against a reference and every one of its mutants; the audit runs
its own inputs against every surviving mutant. :func:`run_calls` sends them ``BATCH`` calls to a batch and decodes
each call's outcome into a :class:`CallOutcome`; :func:`run_sources` does it for many sources (mutants) in one
request, a process running the calls of several short ones, so the sandbox's workers are never idle between two
mutants. A process the sandbox stops as a whole (the wall-clock backstop, a crash) is run again job by job, then
call by call, so one call that hangs costs only itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from colbench.domains.backend.values import EXACT, DecodeError, decode, values_equal
from colbench.sandbox.contract import Budget, Sandbox

BATCH = 96
"""Calls per batch. A request's batches run one after another in one test process, so a larger batch costs only
what a lost batch loses (it is run again, job by job, then call by call); a task's mutants in one batch share
their compiled calls (the runner's batched calls)."""


@dataclass(frozen=True)
class CallOutcome:
    """What one call did: ``kind`` is ``value`` (then ``value`` and ``ops``), ``raised``, ``budget``, ``other``
    (a value of a type not compared here), ``opaque`` (a value the scorer holds equal to nothing, such as a
    function), ``module`` (the module failed) or ``lost`` (the sandbox stopped it)."""

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


MUTANT_SCALE = (10, 10_000, 1_000_000)
"""A mutant's work budget from its reference's: ``min(cap, factor * most + floor)``, as ``(factor, floor, cap)``
(``mutant_budget`` on the host, ``run_calls``'s ``scale`` in the sandbox)."""


def mutant_budget(reference_outcomes: Sequence[CallOutcome]) -> Budget:
    """A mutant may take ten times the reference's work on the same calls (a mutant that loops is killed)."""
    factor, floor, cap = MUTANT_SCALE
    most = max((o.ops for o in reference_outcomes if o.is_value), default=0)
    return Budget(max_ops=min(cap, factor * most + floor))


_KINDS = {"v": "value", "r": "raised", "b": "budget", "o": "other", "q": "opaque", "m": "module"}
"""The runner's one-letter kinds (``runner.py``'s ``_packed``)."""


def _job(raw: Any, n: int) -> list[CallOutcome] | None:
    """One job's ``n`` outcomes from the runner's packed claim, or None when it is not that shape (the process's
    claims are checked, never trusted: a letter it should not send is a ``lost`` call)."""
    if not (isinstance(raw, tuple) and len(raw) == 4):
        return None
    kinds, payloads, ops, covered = raw
    if not (isinstance(kinds, str) and isinstance(payloads, list) and isinstance(ops, str)):
        return None
    counts = ops.split(",") if n else []
    if not len(kinds) == len(payloads) == len(counts) == n:
        return None
    if covered is not None and not (isinstance(covered, list) and len(covered) == n):
        return None
    found = []
    for i, (letter, payload, count) in enumerate(zip(kinds, payloads, counts, strict=True)):
        kind = _KINDS.get(letter)
        if kind == "value" and count.isascii() and count.isdigit() and len(count) <= 12:
            got = covered[i] if covered is not None else None
            cover = frozenset(str(item) for item in got) if isinstance(got, list) else frozenset()
            found.append(CallOutcome("value", payload, int(count), covered=cover))
        elif kind is not None and kind != "value":
            found.append(CallOutcome(kind, detail=str(payload)))
        else:
            found.append(CallOutcome("lost", detail="malformed outcome"))
    return found


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
    retry: bool = True,
) -> list[list[CallOutcome]]:
    """``run_calls`` of each ``(source, calls)`` job, all sent in one request: each batch runs up to ``BATCH``
    calls, of one job or of several short ones (the mutants of a task share their compiled calls). Where the
    sandbox stops a batch (its backstop, a crash), each job in it runs again in a batch of its own, and a job
    stopped alone runs again one call per batch (without ``retry``, its calls are ``lost``)."""
    budget = budget or Budget()
    pieces = _pieces(jobs)
    found: list[list[CallOutcome]] = [[] for _ in jobs]
    for piece, outcomes in zip(
        pieces, _settled(sandbox, _packed(pieces), seed, budget, pool, cover, retry), strict=True
    ):
        found[piece.job] += outcomes
    return found


def run_beside(
    sandbox: Sandbox,
    reference: str,
    calls: Sequence[str],
    jobs: Sequence[tuple[str, Sequence[str]]],
    *,
    seed: int = 0,
    budget: Budget,
    pool: str = "reference",
) -> tuple[list[CallOutcome], list[list[CallOutcome]]] | None:
    """The reference's outcomes on ``calls`` (under ``budget``) and each job's, in one request where
    ``run_calls`` then ``run_sources`` would make two: every batch runs the reference first, then up to ``BATCH``
    calls of the jobs under the budget its work sets (``mutant_budget``), in the same process. Only for jobs of the
    reference's own trust (its mutants, answers that compute nothing). None where the sandbox lost a batch: the
    caller runs them apart, as the two calls would."""
    packs = _packed(_pieces(jobs)) or [[]]
    first = [(reference, list(calls))]
    batches = [first + [(p.source, p.calls) for p in pack] for pack in packs]
    outcomes = sandbox.run_calls(batches, budget=budget, seed=seed, pool=pool, scale=MUTANT_SCALE)
    found: list[list[CallOutcome]] = [[] for _ in jobs]
    references: list[list[CallOutcome]] = []
    for pack, outcome in zip(packs, outcomes, strict=True):
        sizes = [len(calls), *(len(p.calls) for p in pack)]
        decoded = _pack(outcome.value, sizes) if outcome.outcome == "value" else None
        if decoded is None:
            return None
        references.append(decoded[0])
        for piece, got in zip(pack, decoded[1:], strict=True):
            found[piece.job] += got
    for other in references[1:]:
        if not all(a.same(b) and a.ops == b.ops for a, b in zip(references[0], other, strict=True)):
            return None  # the reference did not do the same in every batch, so neither did the budgets
    return references[0], found


@dataclass(frozen=True)
class _Piece:
    """Up to ``BATCH`` consecutive calls of one job."""

    job: int
    source: str
    calls: list[str]


def _settled(
    sandbox: Sandbox,
    packs: list[list[_Piece]],
    seed: int,
    budget: Budget,
    pool: str,
    cover: bool,
    retry: bool,
) -> list[list[CallOutcome]]:
    """Each piece's outcomes, the packs' pieces in order; the pieces of a lost process run again as the docstring
    of ``run_sources`` says."""
    if not packs:
        return []
    batches = [[(p.source, p.calls) for p in pack] for pack in packs]
    outcomes = sandbox.run_calls(batches, budget=budget, seed=seed, pool=pool, cover=cover)
    found: list[list[CallOutcome]] = []
    for pack, outcome in zip(packs, outcomes, strict=True):
        decoded = _pack(outcome.value, [len(p.calls) for p in pack]) if outcome.outcome == "value" else None
        if decoded is not None:
            found += decoded
        elif len(pack) > 1:  # one of its jobs stopped it: each job alone
            found += _settled(sandbox, [[p] for p in pack], seed, budget, pool, cover, retry)
        elif retry and len(pack[0].calls) > 1:  # one of its calls stopped it: each call alone
            piece = pack[0]
            singles = [[_Piece(piece.job, piece.source, [c])] for c in piece.calls]
            found.append([o for got in _settled(sandbox, singles, seed, budget, pool, cover, retry) for o in got])
        else:
            found.append([CallOutcome("lost", detail=outcome.outcome) for _ in pack[0].calls])
    return found


def _pieces(jobs: Sequence[tuple[str, Sequence[str]]]) -> list[_Piece]:
    """Each job's calls, ``BATCH`` at a time."""
    return [
        _Piece(j, source, list(calls[i : i + BATCH]))
        for j, (source, calls) in enumerate(jobs)
        for i in range(0, len(calls), BATCH)
    ]


def _packed(pieces: list[_Piece]) -> list[list[_Piece]]:
    """Consecutive pieces grouped so that no group has more than ``BATCH`` calls (a full piece is a group)."""
    packs: list[list[_Piece]] = []
    size = BATCH
    for piece in pieces:
        if size + len(piece.calls) > BATCH:
            packs.append([])
            size = 0
        packs[-1].append(piece)
        size += len(piece.calls)
    return packs


def _pack(value: Any, sizes: Sequence[int]) -> list[list[CallOutcome]] | None:
    """A process's outcomes, one list per job of the sizes asked for, or None when they are not that."""
    try:
        items = decode(value)
    except DecodeError:
        return None
    if not isinstance(items, list) or len(items) != len(sizes):
        return None
    jobs = []
    for job, n in zip(items, sizes, strict=True):
        outcomes = _job(job, n)
        if outcomes is None:
            return None
        jobs.append(outcomes)
    return jobs
