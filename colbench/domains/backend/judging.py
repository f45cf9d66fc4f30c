"""What each test of a backend task judges, and the degenerate answers that check it.

A ColBench test is a call expression; its expected value is the reference's value of the same expression. Some
generated tests are written so that their value does not depend on the answer: ``print(f(x)) == 10.0`` is
``False`` for every answer (``print`` returns ``None``), so comparing it with the reference's ``False`` passes any
answer. Such a test is judged by what it means. The rules (docs/scoring.md), in order:

1. **Static.** ``print(X)`` is judged as ``X``; ``X == L`` / ``L == X`` (and ``!=``, ``is``, ``is not``) where
   ``L`` uses none of the task's code is judged as ``X``: the expected value comes from the reference, so the
   literal adds nothing, and judging the boolean is wrong both ways (where the reference fails its own literal,
   any wrong answer would match its ``False``).
2. **Probes.** The *probes* of a test are the outermost calls of the task's code in it (``f(x)`` in
   ``round(f(x), 2)``; ``Account(5).balance()`` as a whole). A test with no probe and no name of the task's code
   is **dropped**: its value is the same for any answer.
3. **Dynamic.** A test that is more than one probe (``sorted(f(x))``, ``isinstance(f(x), float)``, ``f(x) > 0``)
   is run with degenerate answers (return None, raise, constants, an argument, ...). If one of them reproduces
   the reference's value of the test while its probe values differ from the reference's, the test is judged on
   its probe values instead: a value any wrong answer can produce judges nothing.

``degenerate_answers`` is also what ``colbench tasks check`` runs against every test.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

Rules = int
"""The judging rules: 2 = colbench 0.1 (``call == literal`` judged on the call; nothing else), 3 = this module."""
CURRENT_RULES: Rules = 3
RULES = (2, 3)

DROPPED_NO_CODE = "dropped: the test uses none of the task's code, so its value is the same for any answer"


@dataclass(frozen=True)
class Plan:
    """How one test is judged: the expression compared (``judged``), the task's calls in it (``probes``), and
    ``dropped`` (a reason) when no answer can change its value."""

    name: str
    expression: str
    judged: str
    probes: tuple[str, ...] = ()
    dropped: str = ""
    note: str = ""

    @property
    def wrapped(self) -> bool:
        """More than a bare call of the task's code: its value may not follow the answer's (rule 3)."""
        return not self.dropped and self.probes != (self.judged,)

    def on_probes(self, why: str) -> Plan:
        """This test judged on its probe values (one probe: its value; several: their tuple)."""
        judged = self.probes[0] if len(self.probes) == 1 else "(" + ", ".join(self.probes) + ",)"
        return Plan(self.name, self.expression, judged, self.probes, note=why)


@lru_cache(maxsize=4096)
def task_names(reference: str) -> frozenset[str]:
    """The names the reference module defines at top level (functions, classes, assigned names)."""
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def plan(name: str, expression: str, reference: str, rules: Rules = CURRENT_RULES) -> Plan:
    """The static plan of one test (rules 1 and 2; rule 3 needs the sandbox: see ``BackendScorer``)."""
    source = expression.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        return Plan(name, expression, expression)  # run as written: it fails for the reference too
    if rules == 2:
        return Plan(name, expression, _legacy_judged(source, node))
    names = task_names(reference)
    node = _unwrap(node, names)
    judged = _segment(source, node) or expression
    probes = tuple(_segment(source, p) or "" for p in _probes(node, names))
    if not probes and not _uses(node, names):
        return Plan(name, expression, judged, dropped=DROPPED_NO_CODE)
    return Plan(name, expression, judged, probes)


def _legacy_judged(source: str, node: ast.expr) -> str:
    """colbench 0.1: ``call(...) == literal`` judged on the call, everything else as written."""
    legacy = isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
    if legacy and isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
        return ast.get_source_segment(source, node.left) or source
    return source


def _segment(source: str, node: ast.expr) -> str | None:
    """``ast.get_source_segment``, without its line splitting (a loop over every character, most of ``plan``'s
    time) when the source is one line: the node's offsets are then into that line's UTF-8 bytes."""
    if "\n" in source or "\r" in source:
        return ast.get_source_segment(source, node)
    start, end = node.col_offset, node.end_col_offset
    if end is None:
        return None
    if source.isascii():
        return source[start:end]
    return source.encode()[start:end].decode()


def _unwrap(node: ast.expr, names: frozenset[str]) -> ast.expr:
    """Rule 1, repeatedly: ``print(X)`` -> X; ``X == L`` (or ``!=``, ``is``, ``is not``) with ``L`` free of the
    task's code -> X."""
    while True:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and len(node.args) == 1
            and not isinstance(node.args[0], ast.Starred)
            and not node.keywords
        ):
            node = node.args[0]
            continue
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.Is | ast.IsNot)
        ):
            left, right = node.left, node.comparators[0]
            if _uses(left, names) and not _uses(right, names):
                node = left
                continue
            if _uses(right, names) and not _uses(left, names):
                node = right
                continue
        return node


def _uses(node: ast.AST, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _rooted(node: ast.expr, names: frozenset[str]) -> bool:
    """Whether a callee is the task's code: a name it defines, or an attribute of something rooted in one."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id in names


def _probes(node: ast.expr, names: frozenset[str]) -> list[ast.expr]:
    """The outermost calls of the task's code, in source order."""
    if isinstance(node, ast.Call) and _rooted(node.func, names):
        return [node]
    found: list[ast.expr] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            found += _probes(child, names)
        elif isinstance(child, ast.comprehension | ast.keyword):
            for grandchild in ast.iter_child_nodes(child):
                if isinstance(grandchild, ast.expr):
                    found += _probes(grandchild, names)
    return found


# -- degenerate answers --------------------------------------------------------------------------------------------

DEGENERATE_RESULTS: dict[str, str] = {
    "returns None": "None",
    "raises": "_raise()",
    "returns 0": "0",
    "returns 1": "1",
    "returns -1": "-1",
    "returns 0.0": "0.0",
    "returns True": "True",
    "returns False": "False",
    "returns ''": "''",
    "returns 'garbage'": "'garbage'",
    "returns []": "[]",
    "returns {}": "{}",
    "returns its first argument": "(args[0] if args else next(iter(kwargs.values()), None))",
    "returns its arguments": "args",
    "returns the number of its arguments": "len(args) + len(kwargs)",
}
"""What each degenerate answer's functions (and classes' methods) return, by name."""


def degenerate_answers(reference: str) -> dict[str, str]:
    """Answers that define every name of the reference and compute nothing: one module per kind of result.

    Functions take any arguments; classes take any constructor arguments and answer any method; assigned names
    get the result itself.
    """
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return {}
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    constants = sorted(task_names(reference) - set(functions) - set(classes))
    out = {}
    for label, result in DEGENERATE_RESULTS.items():
        lines = ["def _raise():", "    raise RuntimeError('degenerate answer')", ""]
        for name in functions:
            lines += [f"def {name}(*args, **kwargs):", f"    return {result}", ""]
        for name in classes:
            lines += [
                f"class {name}:",
                "    def __init__(self, *args, **kwargs):",
                "        pass",
                "    def __getattr__(self, attribute):",
                f"        return lambda *args, **kwargs: {result}",
                "",
            ]
        constant = "None" if result == "_raise()" else result  # a module that raises on import tests nothing
        for name in constants:
            lines.append(f"{name} = (lambda *args, **kwargs: {constant})()")
        out[label] = "\n".join(lines) + "\n"
    return out
