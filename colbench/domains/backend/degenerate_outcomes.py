"""What a degenerate answer (``judging.degenerate_answers``) gives on a call, worked out on the host where nothing
but colbench's own code would run.

The degenerate gate asks a dozen answers that compute nothing for their outcome on each of a candidate's calls;
in the batch runner that is a sandbox request of its own, about a seventh of a candidate's gates. But such an
answer's function ignores its arguments or hands them back, and 294 of the 300 test-sample tasks call their
function only as ``name(literal, ...)``: there the outcome is known without running anything of the task. A call
is worked out here only when it is one of the reference's module-level functions called with literal arguments
(``ast.literal_eval``, so no code of the task runs on the host) small enough that no budget of the batch runner
could be met; anything else (a class, a name, an expression, an unpacked argument) goes to the sandbox as before.
The outcomes are the batch runner's to the type (a set comes back as a frozenset, as the sandbox's values are
decoded), but for the work counted (``ops``), which nothing reads off a degenerate answer;
``tests/domains/backend/test_degenerate_outcomes.py`` holds the two to each other on every answer.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import cache
from types import CodeType
from typing import Any

from colbench.domains.backend.judging import DEGENERATE_RESULTS
from colbench.domains.backend.plus.calls import CallOutcome

LARGEST_ARGUMENT = 1000
"""Characters of an argument's repr: far below every size budget of the batch runner (10,000 items, an int of
4,096 bits), so a value worked out here is one the runner would have carried."""
DEEPEST_ARGUMENT = 50
"""Nesting of an argument: far below the depth the sandbox's runner encodes (a short repr can nest deep)."""
_HELPERS = {"len": len, "next": next, "iter": iter}
"""All the built-ins the results of ``DEGENERATE_RESULTS`` use."""


def literal_arguments(call: str, functions: frozenset[str]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of ``call`` when it is ``name(literal, ..., key=literal)`` for a name in ``functions``, else
    None."""
    text = call.lstrip(" \t")
    try:
        compile(text, "<string>", "eval")  # what the parser lets through and the compiler does not (a repeated key)
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    try:
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    values = (*args, *kwargs.values())
    if any(len(repr(v)) > LARGEST_ARGUMENT or _depth(v) > DEEPEST_ARGUMENT for v in values):
        return None
    return args, kwargs


def _depth(value: Any) -> int:
    """How deep ``value``'s containers nest (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max((max(_depth(k), _depth(v)) for k, v in value.items()), default=0)
    if isinstance(value, list | tuple | set | frozenset):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def module_functions(reference: str) -> frozenset[str]:
    """The names a degenerate answer defines as functions (those of the reference's top-level ``def``s)."""
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return frozenset()
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def outcomes(reference: str, labels: Sequence[str], calls: Sequence[str]) -> list[list[CallOutcome]] | None:
    """Each degenerate answer's (by its ``DEGENERATE_RESULTS`` label) outcome on each call, as the batch runner
    reports it (kind, value, detail; the work it counts, ``ops``, is left at 0: only a reference's is ever read);
    None unless every call can be worked out here."""
    functions = module_functions(reference)
    found = [item for item in (literal_arguments(call, functions) for call in calls) if item is not None]
    if len(found) < len(calls):
        return None
    return [[_outcome(DEGENERATE_RESULTS[label], args, kwargs) for args, kwargs in found] for label in labels]


def _outcome(result: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallOutcome:
    """What ``def name(*args, **kwargs): return <result>`` gives: ``result`` is colbench's own expression, the
    arguments plain data."""
    if result == "_raise()":
        return CallOutcome("raised", detail="RuntimeError")
    value = eval(_compiled(result), {"__builtins__": _HELPERS}, {"args": args, "kwargs": kwargs})
    return CallOutcome("value", _as_decoded(value))


@cache
def _compiled(result: str) -> CodeType:
    return compile(result, "<degenerate>", "eval")


def _as_decoded(value: Any) -> Any:
    """``value`` as the host decodes the sandbox's copy of it: sets as frozensets, all the way down."""
    if isinstance(value, list):
        return [_as_decoded(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_as_decoded(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(_as_decoded(v) for v in value)
    if isinstance(value, dict):
        return {_as_decoded(k): _as_decoded(v) for k, v in value.items()}
    return value
