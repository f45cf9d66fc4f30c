"""The task's function as a backend human's reply may call it: the names a claim may call, and their calls in a reply
(literal or not), found on the host without running anything.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from colbench.domains.backend.stated_values import QUOTES, closing, depth_ok

MAX_SCAN = 20_000
"""Characters of a reply (or question) searched for claims: a longer reply is searched in its first part only."""
MAX_CANDIDATES = 200
"""Calls (and, for prose, places an argument may be named) looked at in one reply at most: a reply is read in
bounded time whatever it holds."""


# -- the task's function names ----------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def function_names(ground_truth: str, tests: tuple[str, ...], description: str) -> tuple[tuple[str, ...], int | None]:
    """The names a claim may call (the reference's top-level functions the tests call, else all of them, else the
    signature's), and how many arguments the entry function takes when it takes exactly one (else None)."""
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    try:
        tree = ast.parse(ground_truth)
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    called: list[str] = []
    for test in tests:
        try:
            for node in ast.walk(ast.parse(test, mode="eval")):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs:
                    called.append(node.func.id)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    names = list(dict.fromkeys(called)) or list(defs)
    if not names:
        match = re.search(r"def\s+([A-Za-z_]\w*)\s*\(", description)
        names = [match.group(1)] if match else []
    single = None
    if names and names[0] in defs:
        args = defs[names[0]].args
        positional = [*args.posonlyargs, *args.args]
        required = len(positional) - len(args.defaults)
        if len(positional) == 1 or (required == 1 and not args.vararg):
            single = 1
    return tuple(names), single


# -- finding calls ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallAt:
    start: int
    end: int  # one past the closing parenthesis
    text: str
    literal: bool


def calls_in(text: str, names: Sequence[str]) -> Iterator[CallAt]:
    """The calls of ``names`` in ``text`` (not definitions: ``def f(...)``), literal or not, in order."""
    if not names:
        return
    pattern = _name_pattern(tuple(names))
    for match in pattern.finditer(text, 0, MAX_SCAN):
        start = match.start()
        before = text[max(0, start - 6) : start]
        if re.search(r"\bdef\s+$", before):
            continue
        open_at = match.end() - 1
        close = closing(text, open_at)
        if close < 0:
            continue
        raw = text[start : close + 1]
        yield CallAt(start, close + 1, " ".join(raw.split()), _is_literal_call(raw))


@lru_cache(maxsize=4096)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(n) for n in names) + r")\s*\(")


def _is_literal_call(raw: str) -> bool:
    if not depth_ok(raw):
        return False
    try:
        node = ast.parse(raw.translate(QUOTES).strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return False
    try:
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            ast.literal_eval(arg)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def normal_call(raw: str) -> str:
    """A literal call as it will run: typographic quotes made ASCII, blanks collapsed."""
    return " ".join(raw.translate(QUOTES).split())
