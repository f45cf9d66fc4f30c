"""The calls a ``truth`` probe asks about, and the values it states (docs/human-quality.md, "The probe").

A truth probe asks the human what test-like calls of the task's function return: the task's own test calls
(``task.test_cases``) and its ColBench+ calls (``task.plus.cases``, when the row carries them). Only literal calls
are used (every argument a Python literal: the claims checker can run exactly those), as the claims checker reads
them (``claim_calls.calls_in``), deduplicated in the tests' order.

Each probe takes its calls in an order of its own that depends only on the task and the probe (the calls sorted by
the SHA-256 of ``task_id``, probe id and call), so two probes of one task tend to ask about different calls and a
resumed probe asks the same ones. A probe that states a value (``$right``, ``$wrong``) takes the first call in its
order whose reference value a Python literal can state (``literal``), and states that value or a deterministic
wrong one (``wrong``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from colbench.domains.backend.claim_calls import calls_in, function_names, normal_call
from colbench.types.task import Task

MAX_STATED = 160
"""The longest value (as a literal) a probe states: a person asks about a value they can read at a glance."""


def task_calls(task: Task, source: str = "any") -> list[str]:
    """The literal calls of the task's function in its tests (``tests``), its plus tests (``plus``) or both."""
    tests = tuple(expr for _, expr in task.test_cases)
    plus = tuple(expr for _, expr in task.plus.cases) if task.plus is not None else ()
    exprs = {"tests": tests, "plus": plus, "any": tests + plus}[source]
    names, _ = function_names(task.ground_truth, tests, task.problem_description)
    calls = [normal_call(c.text) for expr in exprs for c in calls_in(expr, names) if c.literal]
    return list(dict.fromkeys(calls))


def ordered_calls(task: Task, probe_id: str, source: str = "any") -> list[str]:
    """``task_calls`` in the probe's own deterministic order (module docstring)."""

    def rank(call: str) -> str:
        return hashlib.sha256(f"{task.task_id}\0{probe_id}\0{call}".encode()).hexdigest()

    return sorted(task_calls(task, source), key=rank)


def literal(value: Any, depth: int = 0) -> str | None:
    """``value`` written as a Python literal a person would state (``[1, 2]``, ``'yes'``, ``{'a': 1}``), or None
    when none states it (an object, a set, NaN, a very deep value)."""
    if depth > 8:
        return None
    if value is None or isinstance(value, bool | int | str):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        parts = [literal(v, depth + 1) for v in value]
        items = [p for p in parts if p is not None]
        if len(items) < len(parts):
            return None
        if isinstance(value, tuple):
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        return f"[{', '.join(items)}]"
    if isinstance(value, dict):
        pairs = [(literal(k, depth + 1), literal(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return None


def wrong(value: Any) -> Any:
    """A value that is plainly not ``value``, of the same kind where one exists: a bool negated, a number plus one
    (its negative where adding one changes nothing), a string emptied (an empty one: ``'none'``), None as 0, a list,
    tuple or dict without its last item (an empty one with one item added)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        moved = value + 1.0
        return moved if moved != value else -value
    if isinstance(value, str):
        return "" if value.strip() else "none"
    if value is None:
        return 0
    if isinstance(value, list | tuple):
        return value[:-1] if value else type(value)([0])
    if isinstance(value, dict):
        return dict(list(value.items())[:-1]) if value else {"key": 0}
    return None


def statable(value: Any) -> bool:
    """Whether a probe can state ``value`` and a wrong one (both as short literals)."""
    right, other = literal(value), literal(wrong(value))
    return right is not None and other is not None and len(right) <= MAX_STATED and len(other) <= MAX_STATED


def stated_values(scorer: object, task: Task, calls: Sequence[str]) -> Mapping[str, Any]:
    """The reference's values on ``calls`` that a probe can state, by call (one sandbox request for them all;
    nothing for a scorer that runs no reference)."""
    run = getattr(scorer, "reference_values", None)
    if run is None or not calls:
        return {}
    found = run(task, list(calls))
    return {call: e.value for call, e in zip(calls, found, strict=True) if e.judgeable and statable(e.value)}
