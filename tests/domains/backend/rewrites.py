"""Semantics-preserving rewrites of a Python reference module, for the validity tests of ColBench+ (issue 26).

Stronger tests must never fail a correct answer that is written differently from the reference. To check that, the
validity tests score *rewrites* of each reference: the same function as another correct programmer might write it
(other local names, statements in another order, a comprehension instead of a loop, a helper function, the branches
of an ``if`` the other way round, ...). A test that fails such a rewrite tests the reference's wording, not its
behaviour.

The kinds (:data:`KINDS`): ``rename-locals`` (local, loop and comprehension variables), ``reorder-independent``
(adjacent assignments with no data dependency), ``loop-to-comprehension`` (list/set/dict building and int sums),
``loop-to-any-all`` (a searching loop), ``comprehension-to-loop``, ``extract-helper`` (a function's tail or body
moved into a top-level helper), ``if-else-swap``, ``invert-early-return``, ``conditional-expression`` (``x = a if
c else b`` and the ``if`` statement, both ways), ``inline-temp`` (``t = e; return t``) and ``fstring-to-format``.

Every rewrite is made on the ``ast``, deterministically, and is exact: it compiles, differs from the original, and
returns the same value or raises the same exception on every input. A kind applies only where its conditions are
proved from the code; where they are not, that kind makes nothing, since a rewrite that is only "usually" equal would
blame the tests for the generator's mistake. Code that can see variables by name (``locals()``, ``eval``, frames,
``global``/``nonlocal``, walrus, nested classes, ``match``) is left alone by every kind that renames, moves or
re-scopes variables.

Run as a script to write the rewrites of a task file, one JSON row ``{"task_id", "kind", "code"}`` per rewrite::

    python tests/domains/backend/rewrites.py FILE.jsonl --out OUT.jsonl
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import json
import keyword
import symtable
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rewrite:
    """One rewrite of a module: its kind (one of :data:`KINDS`) and the whole rewritten module's source."""

    kind: str
    code: str


_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

# Names (and attributes) through which code sees or changes a frame's variables by name, or that depend on the
# function's own scope (zero-argument super): renaming, moving or re-scoping a variable could change what they see.
_INTROSPECTION = frozenset(
    {
        "locals",
        "vars",
        "eval",
        "exec",
        "dir",
        "globals",
        "compile",
        "breakpoint",
        "__import__",
        "super",
        "__class__",
        "_getframe",
        "currentframe",
        "f_locals",
        "f_back",
        "tb_frame",
        "settrace",
        "setprofile",
    }
)

# Builtins without side effects on their arguments (given builtin-typed values), and methods of builtin types that
# only read their object: statements calling nothing else may move past an independent statement.
_PURE_BUILTINS = frozenset(
    {
        "abs",
        "all",
        "any",
        "bool",
        "chr",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "frozenset",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "ord",
        "pow",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
    }
)
_PURE_METHODS = frozenset(
    {
        "capitalize",
        "casefold",
        "count",
        "endswith",
        "find",
        "format",
        "get",
        "index",
        "isalnum",
        "isalpha",
        "isdigit",
        "islower",
        "isspace",
        "isupper",
        "items",
        "join",
        "keys",
        "lower",
        "lstrip",
        "replace",
        "rfind",
        "rsplit",
        "rstrip",
        "split",
        "splitlines",
        "startswith",
        "strip",
        "title",
        "upper",
        "values",
        "zfill",
    }
)


# --- scopes ----------------------------------------------------------------------------------------------------


def _arg_names(args: ast.arguments) -> list[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


def _outer_parts(scope: ast.AST) -> list[ast.AST]:
    """The parts of a scope-making node that run in the enclosing scope (defaults, decorators, the first iterable)."""
    if isinstance(scope, (*_FUNCTIONS, ast.Lambda)):
        a = scope.args
        parts: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if isinstance(scope, _FUNCTIONS):
            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]
            parts = [*scope.decorator_list, *parts, *(x.annotation for x in every if x.annotation is not None)]
            if scope.returns is not None:
                parts.append(scope.returns)
        return parts
    if isinstance(scope, ast.ClassDef):
        return [*scope.decorator_list, *scope.bases, *scope.keywords]
    if isinstance(scope, _COMPREHENSIONS):
        return [scope.generators[0].iter]
    return []


def _inner_parts(scope: ast.AST) -> list[ast.AST]:
    """The parts of a scope-making node that run in its own scope, in the order they run."""
    if isinstance(scope, (*_FUNCTIONS, ast.ClassDef)):
        return list(scope.body)
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    if isinstance(scope, _COMPREHENSIONS):
        first, *rest = scope.generators
        parts: list[ast.AST] = [first.target, *first.ifs]
        for gen in rest:
            parts += [gen.target, gen.iter, *gen.ifs]
        if isinstance(scope, ast.DictComp):
            return [*parts, scope.key, scope.value]
        return [*parts, scope.elt]
    return []


def _walk_scope(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node of ``nodes`` that runs in their scope, depth first in source order: a nested scope's node is
    yielded with its outer parts, never its inside."""
    stack = list(reversed(list(nodes)))
    while stack:
        node = stack.pop()
        yield node
        children = _outer_parts(node) if isinstance(node, _SCOPES) else list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))


def _walk(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under ``nodes``, depth first in source order (``ast.walk`` is breadth first)."""
    stack = list(reversed(list(nodes)))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _binds(node: ast.AST) -> list[str]:
    """The names ``node`` itself binds in the scope it runs in."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def _scope_bindings(scope: ast.AST) -> list[str]:
    """Every name bound (or declared global/nonlocal) in ``scope``'s own scope, in order of first binding."""
    names = _arg_names(scope.args) if isinstance(scope, (*_FUNCTIONS, ast.Lambda)) else []
    for node in _walk_scope(_inner_parts(scope)):
        names += _binds(node)
    return list(dict.fromkeys(names))


def _mentions(node: ast.AST) -> set[str]:
    """Every variable name under ``node``, at any depth and in any role."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _name_counts(nodes: Iterable[ast.AST]) -> Counter[str]:
    """How often each name occurs under ``nodes``: variables, parameters, handler, import and definition names."""
    counts: Counter[str] = Counter()
    for node in _walk(nodes):
        if isinstance(node, ast.arg):
            counts[node.arg] += 1
        elif not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            counts.update(_binds(node))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            counts[node.id] += 1
    return counts


@dataclass
class _Function:
    """What the kinds need to know about one function's own scope."""

    node: ast.FunctionDef
    params: list[str]
    own: list[str]  # bound in the function's own scope, parameters included, in order of first binding
    plain: set[str]  # own names bound only by assignments and loops (no import, def, class or except binding)
    deleted: set[str]
    cells: set[str]  # every name mentioned inside a nested scope (a superset of the closure's cells)
    nested_bound: set[str]  # every name some nested scope binds or declares
    safe: bool  # none of the constructs that see or change variables by name
    generator: bool


def _analyse(fn: ast.FunctionDef) -> _Function:
    params = _arg_names(fn.args)
    own = _scope_bindings(fn)
    special: set[str] = set()
    deleted: set[str] = set()
    cells: set[str] = set()
    nested_bound: set[str] = set()
    generator = False
    for node in _walk_scope(fn.body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del):
            deleted.add(node.id)
        elif not isinstance(node, ast.Name):
            special.update(_binds(node))
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            generator = True
        if isinstance(node, _SCOPES):
            for part in _inner_parts(node):
                cells |= _mentions(part)
    safe = True
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, _SCOPES):
            nested_bound.update(_scope_bindings(node))
        if (
            isinstance(node, (ast.Global, ast.Nonlocal, ast.NamedExpr, ast.ClassDef, ast.Match))
            or (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names))
            or (isinstance(node, ast.Name) and node.id in _INTROSPECTION)
            or (isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION)
        ):
            safe = False
    plain = {n for n in own if n not in params and n not in special}
    return _Function(fn, params, own, plain, deleted, cells, nested_bound, safe, generator)


def _functions(tree: ast.Module) -> Iterator[tuple[tuple[str, ...], ast.FunctionDef]]:
    """The module's top-level functions and the methods of its top-level classes, with their qualified path."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield (node.name,), node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield (node.name, item.name), item


def _blocks(body: list[ast.stmt], guarded: bool = False) -> Iterator[tuple[list[ast.stmt], bool]]:
    """Every statement list of one scope (not entering nested functions or classes), with whether a ``try`` or
    ``with`` encloses it (there an exception half-way through can be caught and the half-done state observed)."""
    yield body, guarded
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from _blocks(stmt.body, guarded)
            yield from _blocks(stmt.orelse, guarded)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from _blocks(part, True)
        elif isinstance(stmt, ast.With):
            yield from _blocks(stmt.body, True)


def _child_blocks(stmt: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly inside one statement (any kind, nested functions and classes included)."""
    blocks = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, f, None), list)]
    blocks += [h.body for h in getattr(stmt, "handlers", [])]
    blocks += [c.body for c in getattr(stmt, "cases", [])]
    return [b for b in blocks if b and isinstance(b[0], ast.stmt)]


def _all_blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the module, outermost first."""
    return [block for node in ast.walk(tree) for block in _child_blocks(node)]


class _Module:
    """The tree being rewritten, with the names already taken (for fresh names) and bound (for builtins). The name
    sets are the original module's: every kind starts from a fresh parse of the same source."""

    def __init__(self, tree: ast.Module, names: tuple[frozenset[str], frozenset[str]]) -> None:
        self.tree = tree
        self.bound, taken = names
        self.taken = set(taken)

    @staticmethod
    def names(tree: ast.Module) -> tuple[frozenset[str], frozenset[str]]:
        """Every name some scope of ``tree`` binds, and every identifier it uses (plus builtins and keywords)."""
        bound: set[str] = set()
        taken: set[str] = set(dir(builtins)) | set(keyword.kwlist) | set(keyword.softkwlist)
        for node in ast.walk(tree):
            names = [node.arg] if isinstance(node, ast.arg) else _binds(node)
            bound.update(names)
            taken.update(names)
            if isinstance(node, ast.Name):
                taken.add(node.id)
            elif isinstance(node, ast.Attribute):
                taken.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                taken.add(node.arg)
            elif isinstance(node, ast.alias):
                taken.add(node.name.split(".")[0])
        return frozenset(bound), frozenset(taken)

    def fresh(self, base: str) -> str:
        """A name used nowhere in the module and no builtin, so it shadows nothing: ``base_1``, ``base_2``, ...
        (never one starting with two underscores, which a class would mangle)."""
        if base.startswith("__") or base == "_":
            base = base.lstrip("_") or "unused"
        n = 1
        while f"{base}_{n}" in self.taken:
            n += 1
        name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def builtin(self, name: str) -> bool:
        """Whether ``name`` surely means the builtin: no scope of the module binds it."""
        return name not in self.bound and hasattr(builtins, name)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _cannot_raise(expr: ast.expr, fn: _Function) -> bool:
    """Whether evaluating ``expr`` has no effect and cannot raise: literals of such values, and parameters (always
    bound unless deleted)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in fn.params and expr.id not in fn.deleted
    if isinstance(expr, (ast.List, ast.Tuple)):
        return all(not isinstance(e, ast.Starred) and _cannot_raise(e, fn) for e in expr.elts)
    if isinstance(expr, ast.Set):
        return all(isinstance(e, ast.Constant) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in expr.keys) and all(_cannot_raise(v, fn) for v in expr.values)
    return False


def _pure(expr: ast.expr, module: _Module) -> bool:
    """Whether ``expr`` calls only side-effect-free builtins and methods, and neither yields nor binds."""
    for node in ast.walk(expr):
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
            return False
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS and module.builtin(func.id):
                continue
            if isinstance(func, ast.Attribute) and func.attr in _PURE_METHODS:
                continue
            return False
    return True


def _negate(test: ast.expr) -> ast.expr:
    """A condition true exactly when ``test`` is false, testing ``test``'s truth just as often: ``not x`` becomes
    ``x``, ``in``/``is`` flip (defined as each other's negation); anything else is wrapped in ``not``. Comparisons
    like ``<`` never flip to ``>=`` (false both ways on NaN)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    flips: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot}
    flips[ast.IsNot] = ast.Is
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in flips:
        return ast.Compare(test.left, [flips[type(test.ops[0])]()], test.comparators)
    return ast.UnaryOp(ast.Not(), test)


# --- rename-locals ----------------------------------------------------------------------------------------------


def _rename_locals(module: _Module) -> bool:
    """Local, loop and comprehension variables get fresh names; parameters, imports, nested definitions and names
    some other scope binds too keep theirs. Checked with ``symtable``: every scope's symbols are the original's,
    renamed."""
    original = ast.unparse(module.tree)
    renames: dict[tuple[str, ...], dict[str, str]] = {}
    paths = [path for path, _ in _functions(module.tree)]
    for path, node in _functions(module.tree):
        fn = _analyse(node)
        if not fn.safe or paths.count(path) > 1:
            continue
        names = [n for n in fn.own if n in fn.plain and not n.startswith("__") and n not in fn.nested_bound]
        mapping = {name: module.fresh(name) for name in names}
        for sub in _walk(node.body):
            if isinstance(sub, ast.Name) and sub.id in mapping:
                sub.id = mapping[sub.id]
        comprehension_names = _comprehension_renames(node, module)
        if mapping or comprehension_names:
            renames[path] = mapping | comprehension_names
    if not renames:
        return False
    try:
        before = symtable.symtable(original, "<original>", "exec")
        after = symtable.symtable(ast.unparse(module.tree), "<rewrite>", "exec")
    except SyntaxError:
        return False
    return _same_symbols(before, after, renames, (), {})


def _comprehension_renames(node: ast.FunctionDef, module: _Module) -> dict[str, str]:
    """Fresh names for comprehension variables, applied: a name is renamed where every occurrence of it in the
    function is inside comprehensions that bind it (none inside another, no other scope in them binding it)."""
    comprehensions = [c for c in _walk(node.body) if isinstance(c, _COMPREHENSIONS)]
    counts = _name_counts(node.body)
    mapping: dict[str, str] = {}
    for comp in comprehensions:
        for target in [n.id for g in comp.generators for n in _walk([g.target]) if isinstance(n, ast.Name)]:
            if target in mapping or target.startswith("__"):
                continue
            binding = [c for c in comprehensions if target in _comprehension_targets(c)]
            inner = [_walk(_inner_parts(c)) for c in binding]
            nested = [n for walk in inner for n in walk if n not in binding and isinstance(n, _SCOPES)]
            if any(target in _scope_bindings(n) for n in nested):
                continue
            if sum(_name_counts(_inner_parts(c))[target] for c in binding) != counts[target]:
                continue
            mapping[target] = module.fresh(target)
            for c in binding:
                for sub in _walk(_inner_parts(c)):
                    if isinstance(sub, ast.Name) and sub.id == target:
                        sub.id = mapping[target]
    return mapping


def _comprehension_targets(comp: ast.expr) -> list[str]:
    """The variables a comprehension binds."""
    generators = comp.generators  # type: ignore[attr-defined]
    return [n.id for g in generators for n in _walk([g.target]) if isinstance(n, ast.Name)]


def _symbol_flags(symbol: symtable.Symbol) -> tuple[bool, ...]:
    return (
        symbol.is_referenced(),
        symbol.is_imported(),
        symbol.is_parameter(),
        symbol.is_global(),
        symbol.is_declared_global(),
        symbol.is_local(),
        symbol.is_free(),
        symbol.is_assigned(),
        symbol.is_namespace(),
        symbol.is_nonlocal(),
        symbol.is_annotated(),
    )


def _same_symbols(
    a: symtable.SymbolTable,
    b: symtable.SymbolTable,
    renames: dict[tuple[str, ...], dict[str, str]],
    path: tuple[str, ...],
    mapping: dict[str, str],
) -> bool:
    """Whether table ``b`` is table ``a`` with ``mapping`` applied to its names, and so on for every child table."""
    if a.get_type() != b.get_type() or a.get_name() != b.get_name():
        return False
    mine = {mapping.get(s.get_name(), s.get_name()): _symbol_flags(s) for s in a.get_symbols()}
    if mine != {s.get_name(): _symbol_flags(s) for s in b.get_symbols()}:
        return False
    children_a, children_b = a.get_children(), b.get_children()
    if len(children_a) != len(children_b):
        return False
    for child_a, child_b in zip(children_a, children_b, strict=True):
        child_path = (*path, child_a.get_name())
        inherited = mapping if a.get_type() == "function" else {}
        if not _same_symbols(child_a, child_b, renames, child_path, renames.get(child_path, inherited)):
            return False
    return True


# --- reorder-independent ----------------------------------------------------------------------------------------


def _assigned(stmt: ast.stmt) -> set[str] | None:
    """The names an assignment to plain names (tuples of them included) writes; ``None`` for any other statement."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    if not isinstance(stmt, ast.Assign):
        return None
    names: set[str] = set()
    for target in stmt.targets:
        for node in ast.walk(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                return None
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def _quiet_assignment(stmt: ast.stmt, fn: _Function) -> bool:
    """An assignment to plain names of a value that cannot raise: running it earlier or later changes nothing else."""
    return (
        isinstance(stmt, ast.Assign)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
        and _cannot_raise(stmt.value, fn)
    )


def _independent(a: ast.stmt, b: ast.stmt, fn: _Function, module: _Module) -> bool:
    """Whether adjacent ``a; b`` may run as ``b; a``: plain assignments, neither writing a name the other mentions
    nor one a nested scope may read, calling only pure builtins, and one of them unable to raise (so which of them
    raises first never depends on the order; none of this runs under ``try`` or ``with``)."""
    wa, wb = _assigned(a), _assigned(b)
    if wa is None or wb is None or wa & _mentions(b) or wb & _mentions(a) or (wa | wb) & fn.cells:
        return False
    if not (_quiet_assignment(a, fn) or _quiet_assignment(b, fn)):
        return False
    return _pure(a.value, module) and _pure(b.value, module)  # type: ignore[attr-defined]


def _open_blocks(module: _Module) -> Iterator[tuple[ast.FunctionDef, list[ast.stmt]]]:
    """Each statement list of each safe function that no ``try`` / ``with`` guards, with its function."""
    for _, node in _functions(module.tree):
        if _analyse(node).safe:
            for block, guarded in _blocks(node.body):
                if not guarded:
                    yield node, block


def _reorder_independent(module: _Module) -> bool:
    changed = False
    for node, block in _open_blocks(module):
        fn, i = _analyse(node), 0
        while i + 1 < len(block):
            if _independent(block[i], block[i + 1], fn, module):
                block[i], block[i + 1] = block[i + 1], block[i]
                changed = True
                i += 2
            else:
                i += 1
    return changed


# --- loop-to-comprehension --------------------------------------------------------------------------------------


def _plain_target(target: ast.expr) -> bool:
    """A loop target made of names only (no attribute or subscript stores)."""
    return all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store)) for n in ast.walk(target))


def _int_valued(expr: ast.expr, module: _Module) -> bool:
    """Whether ``expr`` is an ``int`` (or ``bool``) on every input: int literals, ``len``/``int``/``ord`` calls, and
    integer arithmetic on those. ``sum`` adds those exactly as ``+=`` does; floats it may add differently (Python
    3.12 sums them with compensation), so anything not provably an int is left as a loop."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int)
    if isinstance(expr, ast.Call):
        func = expr.func
        return isinstance(func, ast.Name) and func.id in {"len", "int", "ord"} and module.builtin(func.id)
    if isinstance(expr, ast.BinOp):
        ops = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd)
        return isinstance(expr.op, ops) and _int_valued(expr.left, module) and _int_valued(expr.right, module)
    if isinstance(expr, ast.UnaryOp):
        return isinstance(expr.op, (ast.USub, ast.UAdd, ast.Invert)) and _int_valued(expr.operand, module)
    if isinstance(expr, ast.IfExp):
        return _int_valued(expr.body, module) and _int_valued(expr.orelse, module)
    return False


def _accumulator(value: ast.expr, module: _Module) -> str | None:
    """What an initial value starts: an empty list, dict or set, or an int sum."""
    if isinstance(value, ast.List) and not value.elts:
        return "list"
    if isinstance(value, ast.Dict) and not value.keys:
        return "dict"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "set":
        return "set" if not value.args and not value.keywords and module.builtin("set") else None
    if isinstance(value, ast.Constant) and type(value.value) is int and module.builtin("sum"):
        return "sum"
    return None


def _method_call(stmt: ast.stmt, obj: str, method: str) -> ast.expr | None:
    """The argument of ``obj.method(arg)`` as a statement, else ``None``."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == method and isinstance(func.value, ast.Name)):
        return None
    if func.value.id != obj or len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return None
    return call.args[0]


def _accumulation(
    init: ast.stmt, loop: ast.stmt, node: ast.FunctionDef, fn: _Function, module: _Module
) -> ast.stmt | None:
    """``r = []; for x in xs: [if c:] r.append(e)`` (or ``r[k] = v``, ``r.add(e)``, ``r += e``, over nested loops
    and ifs) as one comprehension, where that is exact: the accumulator is not read while it is built, the loop
    variables are used nowhere else (a comprehension's do not outlive it), nothing yields, binds or makes a closure
    inside, and (for dicts, whose comprehension evaluates the key first) key or value is a bound name or literal."""
    if not (isinstance(init, ast.Assign) and len(init.targets) == 1 and isinstance(init.targets[0], ast.Name)):
        return None
    acc, shape = init.targets[0].id, _accumulator(init.value, module)
    if shape is None or not isinstance(loop, ast.For) or acc in fn.cells:
        return None
    generators: list[ast.comprehension] = []
    body: list[ast.stmt] = [loop]
    while len(body) == 1:
        stmt = body[0]
        if isinstance(stmt, ast.For) and not stmt.orelse and _plain_target(stmt.target):
            generators.append(ast.comprehension(target=stmt.target, iter=stmt.iter, ifs=[], is_async=0))
            body = stmt.body
        elif isinstance(stmt, ast.If) and not stmt.orelse and generators:
            generators[-1].ifs.append(stmt.test)
            body = stmt.body
        else:
            break
    if not generators:
        return None
    loop_names = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    inside, everywhere = _name_counts([loop]), _name_counts(node.body)
    if any(inside[n] != everywhere[n] or n in fn.params for n in loop_names):
        return None
    banned = (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr, ast.Lambda, *_FUNCTIONS, ast.ClassDef)
    if len(body) != 1 or any(isinstance(n, banned) for n in ast.walk(loop)):
        return None
    found = _element(body[0], acc, shape, module)
    if found is None or inside[acc] != found[1]:  # the accumulator is mentioned by its updates only
        return None
    element = found[0]
    value: ast.expr
    if isinstance(element, tuple):
        key, item = element

        def bound(e: ast.expr) -> bool:
            if isinstance(e, ast.Tuple):
                return all(bound(x) for x in e.elts)
            if isinstance(e, ast.Name):
                return e.id in loop_names or (e.id in fn.params and e.id not in fn.deleted)
            return isinstance(e, ast.Constant)

        if not (bound(key) or bound(item)):
            return None
        value = ast.DictComp(key, item, generators)
    elif shape == "list":
        value = ast.ListComp(element, generators)
    elif shape == "set":
        value = ast.SetComp(element, generators)
    else:
        start = init.value.value  # type: ignore[attr-defined]
        args: list[ast.expr] = [ast.GeneratorExp(element, generators)]
        value = ast.Call(ast.Name("sum", ast.Load()), args + ([ast.Constant(start)] if start != 0 else []), [])
    return ast.copy_location(ast.Assign([ast.Name(acc, ast.Store())], value), init)


_Element = ast.expr | tuple[ast.expr, ast.expr]


def _element(stmt: ast.stmt, acc: str, shape: str, module: _Module) -> tuple[_Element, int] | None:
    """What one loop step adds to the accumulator, and how many updates name it: ``r.append(e)`` gives ``e``,
    ``r[k] = v`` gives ``(k, v)``, ``r += e`` (``e`` an int) gives ``e``; ``if c: <update a> else: <update b>``
    (through ``elif``) gives ``a if c else b`` (for dicts, where both updates store the same key)."""
    if isinstance(stmt, ast.If):
        if len(stmt.body) != 1 or len(stmt.orelse) != 1:
            return None
        first, other = _element(stmt.body[0], acc, shape, module), _element(stmt.orelse[0], acc, shape, module)
        if first is None or other is None:
            return None
        (a, m), (b, n) = first, other
        if isinstance(a, tuple) and isinstance(b, tuple):
            if ast.dump(a[0]) != ast.dump(b[0]):
                return None
            return (a[0], ast.IfExp(stmt.test, a[1], b[1])), m + n
        if isinstance(a, tuple) or isinstance(b, tuple):
            return None
        return ast.IfExp(stmt.test, a, b), m + n
    if shape in ("list", "set"):
        elt = _method_call(stmt, acc, "append" if shape == "list" else "add")
        return None if elt is None else (elt, 1)
    if shape == "dict":
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)):
            return None
        target = stmt.targets[0]
        if not (isinstance(target.value, ast.Name) and target.value.id == acc) or isinstance(target.slice, ast.Slice):
            return None
        return (target.slice, stmt.value), 1
    if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name)):
        return None
    if stmt.target.id != acc or not _int_valued(stmt.value, module):
        return None
    return stmt.value, 1


def _loop_to_comprehension(module: _Module) -> bool:
    changed = False
    for node, block in _open_blocks(module):
        fn, i = _analyse(node), 0
        while i + 1 < len(block):
            new = _accumulation(block[i], block[i + 1], node, fn, module)
            if new is not None:
                block[i : i + 2] = [new]
                changed = True
                fn = _analyse(node)
            i += 1
    return changed


def _search(loop: ast.stmt, last: ast.stmt, node: ast.FunctionDef, fn: _Function, module: _Module) -> ast.stmt | None:
    """``for x in xs: [if f:] if c: return A`` then ``return B`` (``A``, ``B`` literals) as ``return A if any(c for
    x in xs [if f]) else B``: ``any`` stops at the first true ``c`` as the loop returns there, testing each ``c``
    once; ``True``/``False`` need no conditional, and ``if not c: return False ... return True`` is ``all(c ...)``.
    The loop variables must be used nowhere else (they no longer outlive the search)."""
    if not (isinstance(loop, ast.For) and isinstance(last, ast.Return) and isinstance(last.value, ast.Constant)):
        return None
    if not (module.builtin("any") and module.builtin("all")):
        return None
    generators: list[ast.comprehension] = []
    body: list[ast.stmt] = [loop]
    while len(body) == 1 and isinstance(body[0], (ast.For, ast.If)) and not body[0].orelse:
        stmt = body[0]
        if isinstance(stmt, ast.For):
            if not _plain_target(stmt.target):
                return None
            generators.append(ast.comprehension(target=stmt.target, iter=stmt.iter, ifs=[], is_async=0))
        else:
            generators[-1].ifs.append(stmt.test)
        body = stmt.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Constant):
        return None
    if not generators[-1].ifs:
        return None
    test = generators[-1].ifs.pop()
    found, otherwise = body[0].value.value, last.value.value
    loop_names = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    inside, everywhere = _name_counts([loop]), _name_counts(node.body)
    if any(inside[n] != everywhere[n] or n in fn.params or n in fn.cells for n in loop_names):
        return None
    banned = (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr, ast.Lambda, *_FUNCTIONS, ast.ClassDef)
    if any(isinstance(n, banned) for n in ast.walk(loop)) or found is otherwise:
        return None
    value: ast.expr
    if found is False and otherwise is True and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = ast.Call(ast.Name("all", ast.Load()), [ast.GeneratorExp(test.operand, generators)], [])
    else:
        search = ast.Call(ast.Name("any", ast.Load()), [ast.GeneratorExp(test, generators)], [])
        if found is True and otherwise is False:
            value = search
        elif found is False and otherwise is True:
            value = ast.UnaryOp(ast.Not(), search)
        else:
            value = ast.IfExp(search, ast.Constant(found), ast.Constant(otherwise))
    return ast.copy_location(ast.Return(value), loop)


def _loop_to_any_all(module: _Module) -> bool:
    changed = False
    for _, node in _functions(module.tree):
        fn = _analyse(node)
        if not fn.safe:
            continue
        for block, _ in _blocks(node.body):
            for i in reversed(range(len(block) - 1)):
                new = _search(block[i], block[i + 1], node, fn, module)
                if new is not None:
                    block[i : i + 2] = [new]
                    changed = True
                    fn = _analyse(node)
    return changed


# --- comprehension-to-loop --------------------------------------------------------------------------------------


def _comprehension_loop(stmt: ast.stmt, fn: _Function, guarded: bool, module: _Module) -> list[ast.stmt] | None:
    """``t = [e for x in xs if c]`` (or ``return [...]``, or a set) as the loop that builds it, the loop variables
    renamed to fresh names (a comprehension's variables never touch the function's). An assignment builds into
    ``t`` itself, so only where ``t`` is not read inside nor by closures, and no ``try`` could see it half-built."""
    comp = stmt.value if isinstance(stmt, (ast.Assign, ast.Return)) else None
    if not isinstance(comp, (ast.ListComp, ast.SetComp)) or any(g.is_async for g in comp.generators):
        return None
    if isinstance(comp, ast.SetComp) and not module.builtin("set"):
        return None
    banned = (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr, ast.Lambda)
    if any(isinstance(n, banned) for n in ast.walk(comp)) or not all(_plain_target(g.target) for g in comp.generators):
        return None
    targets = list(dict.fromkeys(n.id for g in comp.generators for n in _walk([g.target]) if isinstance(n, ast.Name)))
    if any(set(targets) & set(_scope_bindings(n)) for n in ast.walk(comp) if n is not comp and isinstance(n, _SCOPES)):
        return None
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or guarded:
            return None
        acc = stmt.targets[0].id
        if acc in _mentions(comp) or acc in fn.cells:
            return None
    else:
        acc = module.fresh("items" if isinstance(comp, ast.ListComp) else "seen")
    mapping = {name: module.fresh(name) for name in targets}

    def renamed(expr: ast.expr) -> ast.expr:
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id in mapping:
                n.id = mapping[n.id]
        return expr

    method = "append" if isinstance(comp, ast.ListComp) else "add"
    call = ast.Call(ast.Attribute(ast.Name(acc, ast.Load()), method, ast.Load()), [renamed(comp.elt)], [])
    inner: list[ast.stmt] = [ast.Expr(call)]
    for index, gen in reversed(list(enumerate(comp.generators))):
        for test in reversed(gen.ifs):
            inner = [ast.If(renamed(test), inner, [])]
        iterable = gen.iter if index == 0 else renamed(gen.iter)
        inner = [ast.For(renamed(gen.target), iterable, inner, [])]
    empty = ast.List([], ast.Load()) if method == "append" else ast.Call(ast.Name("set", ast.Load()), [], [])
    out = [ast.Assign([ast.Name(acc, ast.Store())], empty), *inner]
    if isinstance(stmt, ast.Return):
        out.append(ast.Return(ast.Name(acc, ast.Load())))
    return [ast.copy_location(s, stmt) for s in out]


def _comprehension_to_loop(module: _Module) -> bool:
    changed = False
    for _, node in _functions(module.tree):
        fn = _analyse(node)
        if not fn.safe:
            continue
        for block, guarded in list(_blocks(node.body)):
            for i in reversed(range(len(block))):
                new = _comprehension_loop(block[i], fn, guarded, module)
                if new is not None:
                    block[i : i + 1] = new
                    changed = True
    return changed


# --- extract-helper ---------------------------------------------------------------------------------------------


def _definitely_binds(stmt: ast.stmt) -> set[str]:
    """Names bound once ``stmt`` (a statement of the function's top level) has run to its end."""
    if isinstance(stmt, ast.Assign):
        return {n.id for t in stmt.targets for n in _target_names(t)}
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id} if not isinstance(stmt, ast.AnnAssign) or stmt.value is not None else set()
    if isinstance(stmt, (ast.Import, ast.ImportFrom, *_FUNCTIONS, ast.ClassDef)):
        return set(_binds(stmt))
    return set()


def _target_names(target: ast.expr) -> list[ast.Name]:
    """The names an assignment target binds (not those read inside an attribute or subscript target)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _helper_parameters(node: ast.FunctionDef, fn: _Function, k: int) -> list[str] | None:
    """The parameters a helper running ``node.body[k:]`` needs: the function's variables the block mentions that
    are surely bound before it (parameters, top-level assignments). ``None`` where the block mentions one that is
    only maybe bound there (passing it would raise earlier than the original does) or rebinds one a closure reads."""
    prefix, suffix = node.body[:k], node.body[k:]
    definite = set(fn.params)
    maybe: set[str] = set()
    for stmt in prefix:
        definite |= _definitely_binds(stmt)
        for sub in _walk_scope([stmt]):
            maybe.update(_binds(sub))
    definite -= fn.deleted
    written = {name for sub in _walk_scope(suffix) for name in _binds(sub)}
    if written & fn.cells:
        return None
    own = set(fn.own)
    needed: list[str] = []
    for name in dict.fromkeys(n.id for n in _walk(suffix) if isinstance(n, ast.Name) and n.id in own):
        if name in definite:
            needed.append(name)
        elif name in maybe:
            return None
    # The function's parameters first, in its order; then its variables, in the order the block mentions them.
    return [p for p in fn.params if p in needed] + [n for n in needed if n not in fn.params]


def _trivial(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Return) and (stmt.value is None or isinstance(stmt.value, (ast.Name, ast.Constant)))


def _extract_helper(module: _Module) -> bool:
    """The tail of each top-level function's body (the shortest one worth moving, else the whole body) moves into a
    new top-level helper taking the variables it needs and returning what the tail returned. Not for generators,
    methods (zero-argument super), or functions any function calls (were that recursion, the helper would double
    the stack depth per call)."""
    tree = module.tree
    changed = False
    called_inside = {
        n.id
        for f in ast.walk(tree)
        if isinstance(f, _SCOPES)
        for part in _inner_parts(f)
        for n in ast.walk(part)
        if isinstance(n, ast.Name)
    }
    for node in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
        fn = _analyse(node)
        if not fn.safe or fn.generator or node.name in called_inside:
            continue
        start = 1 if node.body and _is_docstring(node.body[0]) else 0
        plan: tuple[int, list[str]] | None = None
        for k in [*range(start + 1, len(node.body)), start]:
            if k < len(node.body) and (k == start or not all(_trivial(s) for s in node.body[k:])):
                params = _helper_parameters(node, fn, k)
                if params is not None:
                    plan = (k, params)
                    break
        if plan is None:
            continue
        k, params = plan
        name = module.fresh(f"_{node.name.strip('_')}_rest")
        arguments = ast.arguments(
            posonlyargs=[], args=[ast.arg(p) for p in params], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        helper = ast.FunctionDef(name, arguments, node.body[k:], [], None, None)
        call = ast.Call(ast.Name(name, ast.Load()), [ast.Name(p, ast.Load()) for p in params], [])
        node.body = [*node.body[:k], ast.Return(call)]
        tree.body.insert(tree.body.index(node), helper)
        changed = True
    return changed


# --- if-else-swap, invert-early-return, conditional-expression ---------------------------------------------------


def _if_else_swap(module: _Module) -> bool:
    """``if c: A else: B`` as ``if not c: B else: A``, and ``a if c else b`` as ``b if not c else a``, everywhere."""
    changed = False
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.If, ast.IfExp)) and (isinstance(node, ast.IfExp) or node.orelse):
            node.test, node.body, node.orelse = _negate(node.test), node.orelse, node.body
            changed = True
    return changed


def _invert_early_return(module: _Module) -> bool:
    """``if c: ...; return a`` followed by a last ``return b`` (or ``raise``) as ``if not c: return b else: ...;
    return a``: the ``if`` body never falls through, so the last statement ran exactly when ``c`` was false."""
    changed = False
    for block in _all_blocks(module.tree):
        if len(block) < 2 or not isinstance(block[-1], (ast.Return, ast.Raise)):
            continue
        guard = block[-2]
        if isinstance(guard, ast.If) and not guard.orelse and isinstance(guard.body[-1], (ast.Return, ast.Raise)):
            block[-2:] = [ast.copy_location(ast.If(_negate(guard.test), [block[-1]], guard.body), guard)]
            changed = True
    return changed


def _collapse(stmt: ast.stmt) -> ast.stmt | None:
    """``if c: x = a else: x = b`` (or ``return a``/``return b``, through ``elif``) as one conditional expression."""
    if not (isinstance(stmt, ast.If) and len(stmt.body) == 1 and len(stmt.orelse) == 1):
        return None
    first = stmt.body[0]
    other = _collapse(stmt.orelse[0]) or stmt.orelse[0]
    if isinstance(first, ast.Return) and isinstance(other, ast.Return) and first.value and other.value:
        return ast.copy_location(ast.Return(ast.IfExp(stmt.test, first.value, other.value)), stmt)
    if not (isinstance(first, ast.Assign) and isinstance(other, ast.Assign)):
        return None
    if len(first.targets) != 1 or len(other.targets) != 1 or first.type_comment or other.type_comment:
        return None
    x, y = first.targets[0], other.targets[0]
    if not (isinstance(x, ast.Name) and isinstance(y, ast.Name) and x.id == y.id):
        return None
    return ast.copy_location(ast.Assign([x], ast.IfExp(stmt.test, first.value, other.value)), stmt)


def _expand(stmt: ast.stmt) -> ast.stmt | None:
    """``x = a if c else b`` (or ``return a if c else b``) as an ``if`` statement."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Return)) else None
    if not isinstance(value, ast.IfExp):
        return None
    if isinstance(stmt, ast.Return):
        return ast.copy_location(ast.If(value.test, [ast.Return(value.body)], [ast.Return(value.orelse)]), stmt)
    assert isinstance(stmt, ast.Assign)
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or stmt.type_comment:
        return None
    target = stmt.targets[0]
    body, orelse = ast.Assign([target], value.body), ast.Assign([copy.deepcopy(target)], value.orelse)
    return ast.copy_location(ast.If(value.test, [body], [orelse]), stmt)


def _conditional_expression(module: _Module) -> bool:
    """Conditional expressions as ``if`` statements and back, in every block."""

    def rewrite(block: list[ast.stmt]) -> bool:
        changed = False
        for i, stmt in enumerate(block):
            new = _expand(stmt) or _collapse(stmt)
            if new is not None:
                block[i] = new
                changed = True
            else:
                for child in _child_blocks(stmt):
                    changed |= rewrite(child)
        return changed

    return rewrite(module.tree.body)


# --- inline-temp, fstring-to-format -----------------------------------------------------------------------------


def _inline_temp(module: _Module) -> bool:
    """``t = e; return t`` as ``return e`` where ``t`` is used nowhere else in the function."""
    changed = False
    for _, node in _functions(module.tree):
        fn = _analyse(node)
        if not fn.safe:
            continue
        counts = _name_counts(node.body)
        for block, _ in _blocks(node.body):
            for i in reversed(range(len(block) - 1)):
                first, then = block[i], block[i + 1]
                if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(then, ast.Return)):
                    continue
                t, r = first.targets[0], then.value
                if not (isinstance(t, ast.Name) and isinstance(r, ast.Name) and t.id == r.id):
                    continue
                if t.id in fn.plain and counts[t.id] == 2:
                    block[i : i + 2] = [ast.copy_location(ast.Return(first.value), first)]
                    changed = True
    return changed


def _format_string(joined: ast.JoinedStr) -> str | None:
    """The ``str.format`` template of an f-string whose format specs are plain text, else ``None``."""
    parts: list[str] = []
    for value in joined.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value.replace("{", "{{").replace("}", "}}"))
            continue
        if not isinstance(value, ast.FormattedValue):
            return None
        field = "" if value.conversion == -1 else "!" + chr(value.conversion)
        if value.format_spec is not None:
            spec = value.format_spec
            if not isinstance(spec, ast.JoinedStr) or not all(isinstance(v, ast.Constant) for v in spec.values):
                return None
            text = "".join(str(v.value) for v in spec.values)  # type: ignore[attr-defined]
            if "{" in text or "}" in text:
                return None
            field += ":" + text
        parts.append("{" + field + "}")
    return "".join(parts)


def _fstring_to_format(module: _Module) -> bool:
    """``f"a{x!r:>4}b{y}"`` as ``'a{!r:>4}b{}'.format(x, y)``. An f-string formats each value before evaluating the
    next; ``format`` evaluates all first: so every value after the first must be a literal or a parameter (no
    effect, cannot raise)."""
    chosen: dict[int, ast.expr] = {}
    for _, node in _functions(module.tree):
        fn = _analyse(node)
        specs = {id(n.format_spec) for n in _walk_scope(node.body) if isinstance(n, ast.FormattedValue)}
        for joined in _walk_scope(node.body):
            if not isinstance(joined, ast.JoinedStr) or id(joined) in specs:
                continue
            values = [v.value for v in joined.values if isinstance(v, ast.FormattedValue)]
            template = _format_string(joined)
            if template is None or not values or not all(_cannot_raise(v, fn) for v in values[1:]):
                continue
            method = ast.Attribute(ast.Constant(template), "format", ast.Load())
            chosen[id(joined)] = ast.copy_location(ast.Call(method, values, []), joined)

    class Replace(ast.NodeTransformer):
        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
            return chosen.get(id(node), node)

    if chosen:
        Replace().visit(module.tree)
    return bool(chosen)


# --- driver -----------------------------------------------------------------------------------------------------

_TRANSFORMS: dict[str, Callable[[_Module], bool]] = {
    "rename-locals": _rename_locals,
    "reorder-independent": _reorder_independent,
    "loop-to-comprehension": _loop_to_comprehension,
    "loop-to-any-all": _loop_to_any_all,
    "comprehension-to-loop": _comprehension_to_loop,
    "extract-helper": _extract_helper,
    "if-else-swap": _if_else_swap,
    "invert-early-return": _invert_early_return,
    "conditional-expression": _conditional_expression,
    "inline-temp": _inline_temp,
    "fstring-to-format": _fstring_to_format,
}
KINDS: tuple[str, ...] = tuple(_TRANSFORMS)


def _finish(kind: str, original: str, tree: ast.Module) -> Rewrite | None:
    """The rewrite's source, if it differs from the original (``original`` is its ``ast.dump``) and survives
    ``unparse`` unchanged (so the source is exactly the tree that was reasoned about) and compiles."""
    ast.fix_missing_locations(tree)
    dumped = ast.dump(tree)
    if dumped == original:
        return None
    try:
        code = ast.unparse(tree)
        if ast.dump(ast.parse(code)) != dumped:
            return None
        compile(code, f"<{kind}>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    return Rewrite(kind, code + "\n")


def rewrites(source: str, kinds: Iterable[str] = KINDS) -> list[Rewrite]:
    """At most one rewrite of ``source`` per kind (in :data:`KINDS` order), each applying its kind wherever it
    applies; none for a kind that applies nowhere, and none at all for source that does not parse."""
    try:
        original = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    dumped, names = ast.dump(original), _Module.names(original)
    out: list[Rewrite] = []
    for kind in kinds:
        tree = ast.parse(source)  # a fresh tree per kind (several times faster than a deep copy)
        try:
            if not _TRANSFORMS[kind](_Module(tree, names)):
                continue
        except RecursionError:
            continue
        rewrite = _finish(kind, dumped, tree)
        if rewrite is not None:
            out.append(rewrite)
    return out


def main(argv: list[str] | None = None) -> int:
    """Write every rewrite of every task's reference: ``{"task_id", "kind", "code"}`` per line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("tasks", help="a task file (JSONL) or any task source colbench.tasks.sources.load takes")
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    args = parser.parse_args(argv)

    from colbench.tasks.sources import load

    tasks = load(args.tasks)
    counts: Counter[str] = Counter()
    with args.out.open("w", encoding="utf-8") as out:
        for task in tasks:
            for rewrite in rewrites(task.ground_truth):
                out.write(json.dumps({"task_id": task.task_id, "kind": rewrite.kind, "code": rewrite.code}) + "\n")
                counts[rewrite.kind] += 1
    summary = ", ".join(f"{kind} {counts[kind]}" for kind in KINDS)
    print(f"{sum(counts.values())} rewrites of {len(tasks)} tasks: {summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    _repo = str(Path(__file__).resolve().parents[3])
    if _repo not in sys.path:  # run as a script from a checkout: colbench is the repository's own
        sys.path.insert(0, _repo)
    raise SystemExit(main())
