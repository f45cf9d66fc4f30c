"""The backend claims checker: a human's claims about what the task's function returns, settled by running the
reference in the sandbox (never on the host) and comparing with the scorer's own equality (``values``).

Finding claims is ``claim_finder``'s (host only, nothing runs). Settling, per task: every literal call of every
reply goes to the sandbox in one request (``BackendScorer.reference_values``: run as the reference's tests are,
so a nondeterministic call is not judged), then each claim is compared:

- ``true`` when the reference's value equals the stated one by the scorer's equality, or when it does as people
  write values: a float stated with fewer decimals than computed ("3.33" for 3.333..., equal when rounded to the
  decimals written), a hedged number ("about 3") within half a unit of its last digit or 2%, a list written for a
  tuple (or a set), ``10%`` for 0.1;
- ``false`` when it differs even so;
- ``unchecked`` when the call is not literal, the reference raised, timed out or differs between runs there, or it
  returns a value no literal can state (an object, a dataclass, an enum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from colbench.domains.backend.claim_calls import calls_in, function_names, normal_call
from colbench.domains.backend.claim_finder import Found, find_claims, proposals
from colbench.domains.backend.scorer import BackendScorer
from colbench.domains.backend.stated_values import Stated, approx_decimals
from colbench.domains.backend.values import Array, Opaque, Record, short_repr, values_equal
from colbench.errors import ConfigError
from colbench.types.claims import GROUNDED_CALLS, Claim, Grounded, Verdict

if TYPE_CHECKING:
    from colbench.domains.backend.scorer import Expected
    from colbench.types.task import Task

CHECKER = "exec-claims/2"
"""What names this checker in run.json: bump it when verdicts change."""


class BackendClaimChecker:
    """Finds a reply's claims on the host and settles them with the reference run by ``scorer`` (its sandbox, its
    limits, its seed; given as a function where making it would start a sandbox that a reply without claims never
    needs): see the module docstring."""

    name = CHECKER

    def __init__(self, scorer: object) -> None:
        self._scorer = scorer

    @property
    def scorer(self) -> BackendScorer:
        scorer = self._scorer() if callable(self._scorer) else self._scorer
        if not isinstance(scorer, BackendScorer):
            raise ConfigError(f"claims are settled by running the reference: {type(scorer).__name__} runs none")
        return scorer

    def find(self, task: Task, reply: str, question: str | None = None) -> list[Found]:
        names, single = _names(task)
        return find_claims(reply, names, single, question)

    def settle(self, task: Task, found: Sequence[Sequence[object]]) -> list[tuple[Claim, ...]]:
        items = [[f for f in group if isinstance(f, Found)] for group in found]
        calls = list(dict.fromkeys(f.call for group in items for f in group if f.literal))
        expected = dict(zip(calls, self.scorer.reference_values(task, calls), strict=True)) if calls else {}
        return [tuple(_settled(f, expected.get(f.call)) for f in group) for group in items]

    def ground(self, task: Task, agent_text: str) -> tuple[Grounded, ...]:
        """The reference's results on the first ``GROUNDED_CALLS`` literal calls of the agent's turn and, where the
        agent states what one gives ("I believe f(2) returns 5, right?"), whether that is so: a human asked to
        confirm a value needs the verdict more than the value."""
        names, _ = _names(task)
        calls = list(dict.fromkeys(normal_call(c.text) for c in calls_in(agent_text, names) if c.literal))
        calls = calls[:GROUNDED_CALLS]
        if not calls:
            return ()
        said = proposals(agent_text, names)
        results = self.scorer.reference_values(task, calls)
        grounded = []
        for call, expected in zip(calls, results, strict=True):
            stated = said.get(call)
            if stated is None or not expected.judgeable or not _statable(expected.value):
                grounded.append(Grounded(call, _told(expected)))
            else:
                right, _ = agreement(stated, expected.value)
                grounded.append(Grounded(call, _told(expected), stated.shown(), right))
        return tuple(grounded)


def _names(task: Task) -> tuple[tuple[str, ...], int | None]:
    return function_names(task.ground_truth, tuple(e for _, e in task.test_cases), task.problem_description)


def _told(expected: Expected) -> str:
    """A result as a grounded human is told it."""
    if expected.judgeable:
        return f"returns {short_repr(expected.value, 300)}"
    reason = expected.reason
    if "nondeterministic" in reason:
        return "gives different results on different runs"
    if "timeout" in reason:
        return "does not finish in time"
    if "raised" in reason:
        return "raises an error: " + reason.split(":", 1)[-1].strip().removeprefix("builtins.")[:120]
    return "gives no usable result"


def _settled(found: Found, expected: Expected | None) -> Claim:
    stated = found.stated.shown()

    def claim(verdict: Verdict, actual: str | None, why: str) -> Claim:
        return Claim(found.span, found.call, stated, actual, verdict, why)

    if not found.literal:
        return claim("unchecked", None, "the call's arguments are not literal values")
    if expected is None:
        return claim("unchecked", None, "not run")
    if not expected.judgeable:
        return claim("unchecked", None, expected.reason)
    actual = expected.value
    if not _statable(actual):
        return claim("unchecked", short_repr(actual), "the reference returns a value no literal can state")
    agrees, how = agreement(found.stated, actual)
    if found.stated.negated:
        agrees, how = not agrees, "the reference gives another value" if not agrees else ""
    if agrees:
        return claim("true", short_repr(actual), how)
    return claim("false", short_repr(actual), "the reference gives another value")


def _statable(value: Any, depth: int = 0) -> bool:
    if depth > 50 or isinstance(value, Opaque | Record):
        return False
    if isinstance(value, list | tuple | frozenset):
        return all(_statable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_statable(k, depth + 1) and _statable(v, depth + 1) for k, v in value.items())
    if isinstance(value, Array):
        return all(_statable(v, depth + 1) for v in value.items)
    return isinstance(value, int | float | complex | str | bytes | Fraction | Decimal) or value is None


def agreement(stated: Stated, actual: Any) -> tuple[bool, str]:
    """Whether ``actual`` is what was stated, and how, when not by the scorer's equality (module docstring)."""
    if values_equal(actual, stated.value):
        return True, ""
    candidates = [(stated.value, "")]
    if stated.percent and _number(stated.value):
        candidates.append((stated.value / 100, f"{stated.text} read as {stated.value / 100!r}"))
    if isinstance(stated.value, str) and stated.value.endswith(".") and " " in stated.value.strip():
        # a sentence's full stop written inside the quotes, as American English puts it: "It is done." for a
        # sentence-like 'It is done' (a single word keeps its stop: 'Hello.' is not 'Hello')
        candidates.append((stated.value[:-1], "the full stop inside the quotes read as the sentence's"))
    for value, how in candidates:
        if values_equal(actual, value):
            return True, how
        if _near(value, actual, stated.approx):
            return True, how or _how_near(value, stated.approx)
    return False, ""


def _how_near(stated: Any, approx: bool) -> str:
    if approx:
        return "equal within the hedge of the value stated"
    if _number(stated) or isinstance(stated, list | tuple | dict):
        return "equal as written (rounded to the decimals stated, or a list for a tuple or set)"
    return ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float | Fraction | Decimal) and not isinstance(value, bool)


def _near(stated: Any, actual: Any, approx: bool, depth: int = 0) -> bool:
    """Equal as people write values (module docstring), recursively."""
    if depth > 50:
        return False
    if _number(stated) and _number(actual):
        s, a = float(stated), float(actual)
        if math.isnan(s) or math.isnan(a):
            return math.isnan(s) and math.isnan(a)
        decimals = approx_decimals(stated)
        if decimals is not None and isinstance(stated, float) and abs(a - s) <= 0.5 * 10.0**-decimals * (1 + 1e-9):
            return True
        if approx:
            unit = 0.5 * 10.0 ** -(decimals or 0)
            return abs(a - s) <= max(unit, 0.02 * abs(s))
        return values_equal(actual, stated)
    if isinstance(actual, Array):
        return _near(stated, _nested(actual), approx, depth + 1)
    if isinstance(actual, frozenset) and isinstance(stated, list | tuple):
        return (
            len(stated) == len(actual)
            and all(any(_near(s, a, approx, depth + 1) for a in actual) for s in stated)
            and len(set(map(repr, stated))) == len(stated)
        )
    if isinstance(stated, list | tuple) and isinstance(actual, list | tuple):
        return len(stated) == len(actual) and all(
            _near(s, a, approx, depth + 1) for s, a in zip(stated, actual, strict=True)
        )
    if isinstance(stated, dict) and isinstance(actual, dict):
        if len(stated) != len(actual):
            return False
        for key, value in stated.items():
            match = next((k for k in actual if values_equal(k, key) or (isinstance(k, str) and k == str(key))), None)
            if match is None or not _near(value, actual[match], approx, depth + 1):
                return False
        return True
    return values_equal(actual, stated)


def _nested(array: Array) -> Any:
    items = list(array.items)
    for size in reversed(array.shape[1:]):
        items = [items[i : i + size] for i in range(0, len(items), size)]
    return items
