"""Single-edit mutants of a reference module: the wrong answers a test set must tell from the reference.

Each mutant changes one node of the reference's syntax tree with one operator (docs/tasks.md lists them):

* ``arithmetic``: ``+``/``-``, ``*``/``/``, ``//``/``/``, ``%``/``//``, ``**``/``*``, ``<<``/``>>``, ``&``/``|``
  swapped, in expressions and augmented assignments; a unary minus removed;
* ``comparison``: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``, ``is``/``is not`` swapped;
* ``boolean``: ``and``/``or`` swapped, a ``not`` removed;
* ``constant``: a number moved by one (a float near zero doubled), a string changed, ``True``/``False`` swapped;
* ``negate``: the condition of an ``if``, ``while``, conditional expression or comprehension filter negated;
* ``remove``: a statement that is not the body's last replaced by ``pass`` (assignments, calls, ``break``,
  ``continue``, early returns);
* ``return``: a returned expression replaced by ``None``;
* ``call``: ``min``/``max``, ``any``/``all``, ``floor``/``ceil``, ``sum`` of a sequence by its ``len`` swapped.

Mutants are made in source order, deduplicated by their code, and identical to the reference (after
``ast.unparse``) ones dropped. A task with more than ``limit`` mutants keeps an even spread chosen with its own
seed, so every task has a bounded audit cost.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial

_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_CALLS = {"min": "max", "max": "min", "any": "all", "all": "any", "floor": "ceil", "ceil": "floor", "sum": "len"}
OPERATORS = ("arithmetic", "comparison", "boolean", "constant", "negate", "remove", "return", "call")


@dataclass(frozen=True)
class Mutant:
    """One edit of the reference: ``operator`` (of ``OPERATORS``), where (``line``), what it changed
    (``before`` -> ``after``, as source) and the whole mutated module (``code``)."""

    index: int
    operator: str
    line: int
    before: str
    after: str
    code: str

    @property
    def edit(self) -> str:
        return f"line {self.line}: {self.before} -> {self.after}"


Edit = Callable[[ast.AST], ast.AST]
"""Turns a copy of a node (of the kind it was chosen for) into its mutated form in place, or returns a
replacement."""


def _points(tree: ast.Module) -> Iterator[tuple[int, str, Edit]]:
    """Every (node position in ``ast.walk`` order, operator, edit) of the tree."""
    skip = _skipped(tree)
    for position, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITH:
            yield position, "arithmetic", _swap_op
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            yield position, "arithmetic", _operand
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in _COMPARE:
                    yield position, "comparison", _swap_compare(k)
        if isinstance(node, ast.BoolOp):
            yield position, "boolean", _swap_bool
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield position, "boolean", _operand
        if isinstance(node, ast.Constant) and _changed_constant(node.value) is not None:
            yield position, "constant", _change_constant
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            yield position, "negate", _negate_test
        if isinstance(node, ast.comprehension) and node.ifs:
            yield position, "negate", _negate_first_if
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            yield position, "return", _return_none
        if isinstance(node, ast.Call) and _call_name(node) in _CALLS:
            yield position, "call", _swap_call
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) > 1:
                for k, statement in enumerate(body[:-1]):
                    if isinstance(statement, _REMOVABLE) and id(statement) not in skip:
                        yield position, "remove", _Remove(field, k)


_REMOVABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Break, ast.Continue, ast.Return, ast.If)


def _skipped(tree: ast.Module) -> set[int]:
    """Nodes no operator touches: docstrings, annotations, f-string format specs, ``__main__`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            skip |= {id(n) for n in ast.walk(body[0])}
        for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if isinstance(annotation, ast.AST):
                skip |= {id(n) for n in ast.walk(annotation)}
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            skip |= {id(n) for n in ast.walk(node.format_spec)}
        if isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values if isinstance(v, ast.Constant)}
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _call_name(node: ast.Call) -> str:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return ""


def _operand(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.UnaryOp)
    return node.operand


def _swap_op(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.BinOp | ast.AugAssign)
    node.op = _ARITH[type(node.op)]()
    return node


def _swap_compare(k: int) -> Edit:
    def edit(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.Compare)
        node.ops[k] = _COMPARE[type(node.ops[k])]()
        return node

    return edit


def _swap_bool(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.BoolOp)
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return node


def _changed_constant(value: object) -> bool | int | float | str | None:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 if 0 < abs(value) < 1 else value + 1
    if isinstance(value, str):
        return value + "X" if value else "X"
    return None


def _change_constant(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.Constant)
    node.value = _changed_constant(node.value)
    return node


def _negate_test(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.If | ast.While | ast.IfExp)
    node.test = ast.UnaryOp(ast.Not(), node.test)
    return node


def _negate_first_if(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.comprehension)
    node.ifs[0] = ast.UnaryOp(ast.Not(), node.ifs[0])
    return node


def _return_none(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.Return)
    node.value = ast.Constant(None)
    return node


def _swap_call(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.Call)
    new = _CALLS[_call_name(node)]
    if isinstance(node.func, ast.Name):
        node.func.id = new
    elif isinstance(node.func, ast.Attribute):
        node.func.attr = new
    return node


class _Remove:
    """Replaces statement ``k`` of a body by ``pass``; the removed statement is what the edit shows."""

    def __init__(self, field: str, k: int) -> None:
        self.field, self.k = field, k

    def statement(self, node: ast.AST) -> ast.stmt:
        statement: ast.stmt = getattr(node, self.field)[self.k]
        return statement

    def __call__(self, node: ast.AST) -> ast.AST:
        body = getattr(node, self.field)
        body[self.k] = ast.copy_location(ast.Pass(), body[self.k])
        return node


def _shown(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (AttributeError, ValueError, TypeError):  # a comprehension or operator alone: no source of its own
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


FIT_ONLY_LIMIT = 64
"""Wider edits the augmenter fits on per task at most (a spread chosen with the task's seed where there are more)."""


def fit_only(source: str, *, limit: int | None = None, seed: str = "") -> list[Mutant]:
    """Wider edits the augmenter also fits on, never part of the audit's or the bench's mutants (so the measured
    scores say how its tests do on faults it did not see): each number the reference holds scaled by 0.8 and by
    1.25 (a threshold written 40 for 50, a rate that no input makes matter) and, an int, moved one down and two up;
    each comparison of numbers with its boundary moved a step either way by moving its left operand (``x > 4`` as
    ``x - 1 > 4`` and ``x + 1 > 4``; in a chain, each operand: each side of each comparison must decide some test's
    value, also where ``and`` / ``or`` around it would hide it); each term of a sum or difference dropped (a term no
    input makes matter); each floor division rounded up instead; each ``min`` / ``max`` of two or more values
    replaced by each of them, each ``abs`` / ``round`` / ``int`` by its argument (a call no input makes matter);
    each string with its first or its last character dropped; each operand of an ``and`` / ``or`` dropped. An edit
    whose code is that of one of ``mutants(source)`` (the measured operators) is left out; with ``limit``, a spread
    of that many chosen with ``seed``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    skip, made = _skipped(tree), list[Mutant]()
    measured = {m.code for m in mutants(source)} | {ast.unparse(tree)}
    for position, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for edit in _wider_edits(node):
            edited = _edited(source, position, edit, measured)
            if edited is not None:
                changed, code = edited
                line = getattr(node, "lineno", 0)
                made.append(Mutant(-1 - len(made), "wider", line, _shown(node), _shown(changed), code))
    if limit is not None and len(made) > limit:
        keep = sorted(random.Random(f"wider:{seed}").sample(range(len(made)), limit))
        made = [replace(made[k], index=-1 - i) for i, k in enumerate(keep)]
    return made


def _wider_edits(node: ast.AST) -> list[Edit]:
    edits: list[Edit] = []
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        value = node.value
        if isinstance(value, int | float) and value:
            for factor in (0.8, 1.25):
                new = round(value * factor) if isinstance(value, int) else value * factor
                if new != value:
                    edits.append(partial(_constant, new))
        if isinstance(value, int):  # (up by one is the constant operator's: measured)
            edits += [partial(_constant, value - 1), partial(_constant, value + 2)]
        elif isinstance(value, str) and len(value) >= 2:
            edits.append(partial(_constant, value[:-1]))
            edits.append(partial(_constant, value[1:]))
    elif isinstance(node, ast.BoolOp):
        for k in range(len(node.values)):
            edits.append(partial(_without, k=k))
    elif isinstance(node, ast.Compare) and _numeric_comparison(node):
        step = _step(node.comparators[-1])
        for k in range(len(node.ops) + 1 if len(node.ops) > 1 else 1):  # a chain: each operand, one at a time
            edits += [partial(_moved, delta=-step, k=k), partial(_moved, delta=step, k=k)]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        edits.append(_left_only)
        if isinstance(node.op, ast.Add):
            edits.append(_right_only)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        edits.append(_ceiling)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id in ("min", "max") and len(node.args) >= 2:
            edits += [partial(_argument, k=k) for k in range(len(node.args))]
        elif node.func.id in ("abs", "round", "int") and len(node.args) >= 1:
            edits.append(partial(_argument, k=0))
    return edits


def _argument(node: ast.AST, k: int) -> ast.AST:
    """The call replaced by its argument ``k`` (does the call matter on some test?)."""
    assert isinstance(node, ast.Call)
    return node.args[k]


def _numeric_comparison(node: ast.Compare) -> bool:
    """Ordering comparisons (one, or a chain) with no string literal among the operands, or one equality with a
    number literal."""
    sides = [node.left, *node.comparators]
    if any(isinstance(s, ast.Constant) and isinstance(s.value, str | bytes) for s in sides):
        return False
    if all(isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
        return True
    return len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq) and any(_is_number(s) for s in sides)


def _is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def _step(node: ast.expr) -> int | float:
    """A step of the comparison's scale: 1, or for a float literal a tenth of its leading digit (as
    ``inputs._near``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, float) and node.value:
        return float(10 ** math.floor(math.log10(abs(node.value))) / 10)
    return 1


def _moved(node: ast.AST, delta: int | float, k: int = 0) -> ast.AST:
    """The comparison with its operand ``k`` (0: the left one) moved by ``delta``."""
    assert isinstance(node, ast.Compare)
    op = ast.Add() if delta > 0 else ast.Sub()
    if k == 0:
        node.left = ast.BinOp(node.left, op, ast.Constant(abs(delta)))
    else:
        node.comparators[k - 1] = ast.BinOp(node.comparators[k - 1], op, ast.Constant(abs(delta)))
    return node


def _ceiling(node: ast.AST) -> ast.AST:
    """``a // b`` rounded up instead of down: ``-(-a // b)``."""
    assert isinstance(node, ast.BinOp)
    negated = ast.BinOp(ast.UnaryOp(ast.USub(), node.left), ast.FloorDiv(), node.right)
    return ast.UnaryOp(ast.USub(), negated)


def _constant(value: float | str, node: ast.AST) -> ast.AST:
    return ast.copy_location(ast.Constant(value), node)


def _without(node: ast.AST, k: int) -> ast.AST:
    assert isinstance(node, ast.BoolOp)
    rest = node.values[:k] + node.values[k + 1 :]
    return rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)


def _left_only(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.BinOp)
    return node.left


def _right_only(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.BinOp)
    return node.right


def mutants(source: str, *, limit: int | None = None, seed: str = "") -> list[Mutant]:
    """The single-edit mutants of ``source`` (none when it does not parse), at most ``limit`` of them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    made: list[Mutant] = []
    seen = {ast.unparse(tree)}
    nodes = list(ast.walk(tree))
    for position, operator, edit in _points(tree):
        node = nodes[position]
        shown = edit.statement(node) if isinstance(edit, _Remove) else node
        edited = _edited(source, position, edit, seen)
        if edited is None:
            continue
        changed, code = edited
        line = getattr(shown, "lineno", 0) or _first_line(shown)
        original = _shown(shown.test if isinstance(shown, ast.If | ast.While) else shown)
        after = (
            "pass"
            if isinstance(edit, _Remove)
            else _shown(changed.test if isinstance(changed, ast.If | ast.While) else changed)
        )
        made.append(Mutant(len(made), operator, line, original, after, code))
    made = [replace(m, index=i) for i, m in enumerate(sorted(made, key=lambda m: m.line))]
    if limit is not None and len(made) > limit:
        keep = sorted(random.Random(f"mutants:{seed}").sample(range(len(made)), limit))
        made = [replace(made[k], index=i) for i, k in enumerate(keep)]
    return made


def _edited(source: str, position: int, edit: Edit, seen: set[str]) -> tuple[ast.AST, str] | None:
    """The edited node and module of ``edit`` applied to a fresh copy of ``source`` at node ``position`` (in
    ``ast.walk`` order); None where the code does not compile or is in ``seen`` (else it is added there)."""
    copy_tree = ast.parse(source)  # the same tree as a deep copy, about 4x faster to make
    node = next(n for k, n in enumerate(ast.walk(copy_tree)) if k == position)
    changed = edit(node)
    if changed is not node:
        _replace(copy_tree, node, changed)
    try:  # (ast.unparse reads no locations: the edited tree needs none filled in)
        code = ast.unparse(copy_tree)
        compile(code, "mutant.py", "exec")
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    if code in seen:
        return None
    seen.add(code)
    return changed, code


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    """Puts ``new`` where ``old`` is in ``tree`` (an edit that replaces a node rather than changing it)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[next(i for i, item in enumerate(value) if item is old)] = new
                return


def _first_line(node: ast.AST) -> int:
    return min((n.lineno for n in ast.walk(node) if hasattr(n, "lineno")), default=0)
