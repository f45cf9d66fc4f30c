"""Disguised copies of a reference function: the positive side of the near-duplicate detector's calibration
(``bench/near_duplicates.py``, the tests). Each kind is an edit a generator model (or a person) makes when it
rewrites a task it has seen: new names, another layout, comments, independent statements swapped, a ``for`` loop
as a ``while`` loop, an if/else turned around, a literal changed, and all of the cosmetic ones at once. The copies
are syntactic: they need not behave like the original (a ``while`` loop over a non-sequence), only read like it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass

_BUILTINS = frozenset(dir(builtins))
_NEW_NAMES = ("value", "item", "result", "data", "count", "idx", "acc", "buf", "node", "entry", "temp", "part")
_COMMENTS = ("# handle the next case", "# compute the result", "# TODO: tidy up", "# keep going", "# edge case")

KINDS = (
    "renamed",
    "reformatted",
    "commented",
    "reordered",
    "loop_swapped",
    "branch_swapped",
    "literal_changed",
    "all_cosmetic",
)


@dataclass(frozen=True)
class NearCopy:
    kind: str
    code: str


def near_copies(source: str, rng: random.Random) -> list[NearCopy]:
    """Every kind of copy that applies to ``source`` (a reference that does not parse has none; a kind with nothing
    to edit, such as a loop swap without a loop, is left out)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    makers: dict[str, Callable[[ast.Module, random.Random], str | None]] = {
        "renamed": lambda t, r: ast.unparse(_renamed(t, r)),
        "reformatted": lambda t, r: _reformatted(ast.unparse(t)),
        "commented": lambda t, r: _commented(ast.unparse(_with_docstring(t)), r),
        "reordered": _reordered,
        "loop_swapped": _loop_swapped,
        "branch_swapped": _branch_swapped,
        "literal_changed": _literal_changed,
        "all_cosmetic": lambda t, r: _reformatted(_commented(ast.unparse(_with_docstring(_renamed(t, r))), r)),
    }
    copies = []
    for kind in KINDS:
        code = makers[kind](copy.deepcopy(tree), rng)
        if code is not None and code.strip() != source.strip():
            copies.append(NearCopy(kind, code))
    return copies


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code itself binds (definitions, parameters, assignment targets), not imports or builtins."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return bound - _BUILTINS


def _renamed(tree: ast.Module, rng: random.Random) -> ast.Module:
    names = {name: f"{rng.choice(_NEW_NAMES)}_{i}" for i, name in enumerate(sorted(_bound_names(tree)))}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            node.name = names.get(node.name, node.name)
        elif isinstance(node, ast.arg):
            node.arg = names.get(node.arg, node.arg)
        elif isinstance(node, ast.Name):
            node.id = names.get(node.id, node.id)
    return tree


def _reformatted(code: str) -> str:
    """Two-space indentation, a blank line after every statement, padded brackets."""
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        lines.extend(["  " * depth + stripped.replace("(", "( ").replace(")", " )"), ""])
    return "\n".join(lines)


def _with_docstring(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.body.insert(0, ast.Expr(ast.Constant("Compute what the caller asked for, step by step.")))
    return tree


def _commented(code: str, rng: random.Random) -> str:
    lines = []
    for line in code.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if line.strip() and rng.random() < 0.4:
            lines.append(indent + rng.choice(_COMMENTS))
        lines.append(line + ("  # see above" if rng.random() < 0.2 else ""))
    return "\n".join(lines)


def _reads_writes(node: ast.stmt) -> tuple[set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (writes if isinstance(sub.ctx, ast.Store) else reads).add(sub.id)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        reads.add(node.target.id)
    return reads, writes


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import, ast.ImportFrom)
    if not (isinstance(a, simple) and isinstance(b, simple)):
        return False
    (reads_a, writes_a), (reads_b, writes_b) = _reads_writes(a), _reads_writes(b)
    return not (writes_a & (reads_b | writes_b) or writes_b & reads_a)


def _reordered(tree: ast.Module, rng: random.Random) -> str | None:
    """Two adjacent statements that neither read nor write what the other writes, swapped."""
    pairs = [
        (body, i)
        for node in ast.walk(tree)
        for body in (getattr(node, "body", None),)
        if isinstance(body, list)
        for i in range(len(body) - 1)
        if _independent(body[i], body[i + 1])
    ]
    if not pairs:
        return None
    body, i = rng.choice(pairs)
    body[i], body[i + 1] = body[i + 1], body[i]
    return ast.unparse(tree)


class _LoopToWhile(ast.NodeTransformer):
    """``for v in range(a, b): body`` -> ``v = a; while v < b: body; v += 1``; ``for v in xs`` -> an index loop."""

    def __init__(self) -> None:
        self.changed = False

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if self.changed or not isinstance(node.target, ast.Name) or node.orelse:
            return node
        self.changed = True
        name = node.target.id
        it = node.iter
        ranged = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
        if ranged and isinstance(it, ast.Call) and 1 <= len(it.args) <= 2:
            start = it.args[0] if len(it.args) == 2 else ast.Constant(0)
            stop = it.args[-1]
            counter, body = name, node.body
        else:
            counter = f"{name}_index"
            item = ast.Assign([ast.Name(name, ast.Store())], ast.Subscript(it, ast.Name(counter, ast.Load())))
            start, stop, body = ast.Constant(0), ast.Call(ast.Name("len", ast.Load()), [it], []), [item, *node.body]
        step = ast.AugAssign(ast.Name(counter, ast.Store()), ast.Add(), ast.Constant(1))
        test = ast.Compare(ast.Name(counter, ast.Load()), [ast.Lt()], [stop])
        return [ast.Assign([ast.Name(counter, ast.Store())], start), ast.While(test, [*body, step], [])]


def _loop_swapped(tree: ast.Module, rng: random.Random) -> str | None:
    swap = _LoopToWhile()
    tree = ast.fix_missing_locations(swap.visit(tree))
    return ast.unparse(tree) if swap.changed else None


def _branch_swapped(tree: ast.Module, rng: random.Random) -> str | None:
    """An ``if c: A else: B`` becomes ``if not c: B else: A`` (an elif chain's first link included)."""
    branches = [node for node in ast.walk(tree) if isinstance(node, ast.If) and node.orelse]
    if not branches:
        return None
    node = rng.choice(branches)
    node.test = ast.UnaryOp(ast.Not(), node.test)
    node.body, node.orelse = node.orelse, node.body
    return ast.unparse(tree)


def _literal_changed(tree: ast.Module, rng: random.Random) -> str | None:
    literals = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, str) and node.value not in ("", 0, 1)
    ]
    if not literals:
        return None
    node = rng.choice(literals)
    value = node.value
    if isinstance(value, str):
        node.value = value + "_x"
    elif isinstance(value, int | float):
        node.value = value * 2 + 1
    return ast.unparse(tree)
