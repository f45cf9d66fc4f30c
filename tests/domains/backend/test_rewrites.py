"""The rewrite generator of the ColBench+ validity tests (tests/domains/backend/rewrites.py).

Each kind is run on small hand-written functions and the rewrite is executed in-process against the original on
thousands of inputs (mixed types, NaN, -0.0, empty and nested containers), comparing the returned value (types
included, NaN equal to NaN), the exception raised, and what the call did to its arguments. Functions where a kind
would be unsafe check that it makes nothing. On the real ColBench sample every rewrite of every reference is scored
by colbench's own backend scorer in the sandbox and must pass every test the reference passes.
"""

from __future__ import annotations

import ast
import copy
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import REPO, SHARED_DATA
from rewrites import KINDS, Rewrite, rewrites

from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits
from colbench.tasks import Task
from colbench.tasks.sources import load

SCRIPT = Path(__file__).with_name("rewrites.py")
NAN = float("nan")
SCALARS: list[Any] = [0, 1, -2, 3, 2.5, -0.0, NAN, True, None, "", "ab", "a b"]
CONTAINERS: list[Any] = [[], [1, 2, 3], [3, 0, 3, -1], [1, "a"], [0.5, NAN], [[1, 2], [0]], ("x", "yy", "zzz")]
CONTAINERS += [{"a": 1, "b": 0}, {1, 2}]
POOL = SCALARS + CONTAINERS
ELEMENTS: list[Any] = [0, 1, -2, 2.5, "a", None, True, [1]]


def inputs(arity: int) -> Iterator[tuple[Any, ...]]:
    """Every combination of the pool's values; one argument also gets every list of up to three small elements."""
    yield from itertools.product(POOL, repeat=arity)
    if arity == 1:
        for n in range(4):
            yield from ((list(items),) for items in itertools.product(ELEMENTS, repeat=n))


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (bool is not int, -0.0 is not 0.0, NaN equals NaN; dict
    order counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return same(list(a), list(b)) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def call(function: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What one call did: its value or exception (type and message), and its arguments afterwards."""
    args = copy.deepcopy(args)
    try:
        result: tuple[Any, ...] = ("value", function(*args))
    except Exception as exc:
        result = ("raised", type(exc).__name__, str(exc))
    return (*result, args)


def module_function(code: str, name: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<rewrite>", "exec"), namespace)
    return namespace[name]


def assert_equivalent(original: str, rewrite: Rewrite, name: str, arity: int) -> int:
    """The rewrite's ``name`` behaves as the original's on every input; returns how many inputs were tried. Fresh
    names may show in exception messages, so those kinds compare the exception's type only."""
    before, after = module_function(original, name), module_function(rewrite.code, name)
    tried = 0
    for args in inputs(arity):
        want, got = call(before, args), call(after, args)
        if rewrite.kind in ("rename-locals", "comprehension-to-loop") and want[0] == got[0] == "raised":
            want, got = want[:2] + want[3:], got[:2] + got[3:]
        assert same(want, got), f"{rewrite.kind} of {name}{args!r}: {want!r} != {got!r}\n{rewrite.code}"
        tried += 1
    return tried


def only(kind: str, source: str) -> Rewrite:
    """The one rewrite of ``kind`` (which must apply)."""
    made = [r for r in rewrites(source) if r.kind == kind]
    assert len(made) == 1, f"{kind}: expected one rewrite, got {len(made)}"
    assert made[0].code != source
    compile(made[0].code, "<rewrite>", "exec")
    return made[0]


def kinds_of(source: str) -> set[str]:
    return {r.kind for r in rewrites(source)}


def function(code: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef) and n.name == name)


def names(code: str, name: str) -> set[str]:
    return {n.id for n in ast.walk(function(code, name)) if isinstance(n, ast.Name)}


# Hand-written functions: (source, function name, arity). Every rewrite of every one of them is checked on every
# input; the tests below say which kinds each must (or must not) get.
CASES: dict[str, tuple[str, str, int]] = {
    "rename": (
        """LIMIT = 3
total_1 = 10

def f(xs, n=2):
    total = 0
    seen = []
    for i, x in enumerate(xs):
        if i >= LIMIT:
            break
        total = total + x * n
        seen.append(x)
    squares = [v * v for v in seen]
    check = lambda k: k + total
    try:
        ratio = total / len(seen)
    except ZeroDivisionError as err:
        ratio = str(err)
    return total, squares, check(1), ratio, {u: u for u in seen}, [v for v in xs] + [total_1]
""",
        "f",
        2,
    ),
    "rename_unsafe": (
        """def f(a):
    b = a
    return sorted(locals())

def g(a):
    b = 1
    def inner():
        b = 2
        return b
    return inner() + b + a
""",
        "g",
        1,
    ),
    "reorder": (
        """def f(a, b):
    x = a * 2
    y = []
    z = b
    w = len(a)
    return x, y, z, w
""",
        "f",
        2,
    ),
    "reorder_unsafe": (
        """def f(a, b):
    x = a + 1
    a = 0
    y = a / b
    z = str(b)
    return x, y, z

def g(a):
    try:
        x = a / 2
        y = 0
    except TypeError:
        return y
    return x, y

def h(a):
    y = 0
    read = lambda v: v * y
    x = sorted(a, key=read)
    y = 1
    return x, y

def k(a):
    x = a.pop()
    y = 0
    return x, y
""",
        "g",
        1,
    ),
    "accumulate": (
        """def f(xs):
    out = []
    for x in xs:
        if x:
            out.append(x * 2)
    evens = set()
    for x2 in xs:
        evens.add(x2)
    table = {}
    for i, v in enumerate(xs):
        table[i] = v + v if i else v
    count = 0
    for y in xs:
        if y:
            count += 1
    total = 5
    for y2 in xs:
        total += len(y2) if y2 else -1
    pairs = []
    for a in xs:
        for b in xs:
            if a != b:
                pairs.append((a, b))
    flags = []
    for z in xs:
        if z:
            flags.append('yes')
        elif z is None:
            flags.append('none')
        else:
            flags.append('no')
    return out, evens, table, count, total, pairs, flags
""",
        "f",
        1,
    ),
    "accumulate_unsafe": (
        """def after(xs):
    out = []
    for x in xs:
        out.append(x)
    return out, x

def reads(xs):
    out = []
    for x in xs:
        out.append(len(out) + x)
    return out

def floats(xs):
    s = 0
    for x in xs:
        s += x
    return s

def caught(xs):
    out = []
    try:
        for x in xs:
            out.append(1 / x)
    except (ZeroDivisionError, TypeError):
        pass
    return out

def both_raise(xs, d):
    out = {}
    for x in xs:
        out[d[x]] = 1 / x
    return out

def closures(xs):
    out = []
    for x in xs:
        out.append(lambda: x)
    return [g() for g in out]

def two_steps(xs):
    out = []
    for x in xs:
        y = x
        out.append(y)
    return out
""",
        "both_raise",
        2,
    ),
    "search": (
        """def has_big(xs, limit):
    for x in xs:
        if x > limit:
            return True
    return False

def all_short(words, prefix):
    for w in words:
        if not w.startswith(prefix):
            return False
    return True

def label(xs, wanted):
    for row in xs:
        for v in row:
            if v:
                if v == wanted:
                    return 'found'
    return 'none'
""",
        "label",
        2,
    ),
    "search_unsafe": (
        """def f(xs, limit):
    for x in xs:
        if x > limit:
            return True
    print(x)
    return False
""",
        "f",
        2,
    ),
    "unroll": (
        """def f(xs, k):
    x = 5
    doubled = [x * k for x in xs if x]
    grid = [(a, b) for a in xs for b in range(a) if a > b]
    return doubled, grid, x, {v for v in xs}

def g(xs):
    return [str(x) for x in xs]
""",
        "f",
        2,
    ),
    "helper": (
        """def f(a, b=2):
    \"\"\"Doc.\"\"\"
    c = a * b
    if c > 3:
        d = c - 1
    else:
        d = c + 1
    e = [d] * 2
    return e

def g(xs, flag):
    if flag:
        y = 1
    z = y + len(xs)
    return z

def fact(n):
    return 1 if n < 2 else n * fact(n - 1)

def gen(xs):
    for x in xs:
        yield x
""",
        "f",
        2,
    ),
    "branches": (
        """def f(a, b):
    if a in b:
        r = 1
    elif a is None:
        r = 2
    else:
        r = 3
    s = 'x' if not a else 'y'
    if a < 1:
        t = 0
    else:
        t = 1
    return r, s, t
""",
        "f",
        2,
    ),
    "guards": (
        """def f(a):
    if a:
        b = [a]
        return b
    return 2

def g(xs):
    for x in xs:
        if x:
            continue
        if x == 0:
            raise ValueError(x)
        return x
    return None
""",
        "g",
        1,
    ),
    "conditionals": (
        """def f(a):
    x = 1 if a else 2
    if a == 1:
        y = 'one'
    elif a == 2:
        y = 'two'
    else:
        y = 'many'
    if a:
        return x, y
    else:
        return y, x
""",
        "f",
        1,
    ),
    "temp": (
        """def f(a):
    result = a * 2
    return result

def g(a):
    result = a
    other = result
    return result, other
""",
        "f",
        1,
    ),
    "fstrings": (
        """def f(a, b):
    return f"{a!r:>8} and {b} {{braces}} {3}", f"{a}{len(b)}"
""",
        "f",
        2,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_rewrite_of_a_hand_written_function_behaves_the_same_on_every_input(case: str) -> None:
    source, name, arity = CASES[case]
    made = rewrites(source)
    assert made, f"no rewrite of case {case}"
    for rewrite in made:
        assert rewrite.kind in KINDS and rewrite.code != source
        assert assert_equivalent(source, rewrite, name, arity) >= 400


# The cases' other functions (the tests below check which kinds each gets, or must not get).
OTHER_FUNCTIONS = [
    ("rename_unsafe", "f", 1),
    ("reorder_unsafe", "f", 2),
    ("reorder_unsafe", "h", 1),
    ("reorder_unsafe", "k", 1),
    *[("accumulate_unsafe", n, 1) for n in ("after", "reads", "floats", "caught", "closures", "two_steps")],
    ("search", "has_big", 2),
    ("search", "all_short", 2),
    ("unroll", "g", 1),
    ("helper", "g", 2),
    ("guards", "f", 1),
    ("temp", "g", 1),
]


@pytest.mark.parametrize("case, name, arity", OTHER_FUNCTIONS)
def test_the_other_functions_of_each_case_behave_the_same_too(case: str, name: str, arity: int) -> None:
    source = CASES[case][0]
    for rewrite in rewrites(source):
        assert_equivalent(source, rewrite, name, arity)


def test_rename_locals_renames_locals_loop_and_comprehension_variables_but_not_parameters_or_globals() -> None:
    source = CASES["rename"][0]
    code = only("rename-locals", source).code
    assert ast.dump(function(code, "f").args) == ast.dump(function(source, "f").args)
    assert names(code, "f") & {"total", "seen", "i", "x", "squares", "check", "ratio", "v", "u"} == set()
    # Globals, builtins, the exception name and the lambda's parameter keep theirs; fresh names avoid the names the
    # module already has (total_1 is a global).
    assert {"LIMIT", "enumerate", "len", "str", "err", "xs", "n", "k", "total_1", "total_2"} <= names(code, "f")


def test_rename_locals_leaves_functions_that_see_names_or_rebind_them_in_nested_scopes() -> None:
    assert "rename-locals" not in kinds_of(CASES["rename_unsafe"][0])


def test_reorder_swaps_independent_statements_only() -> None:
    code = only("reorder-independent", CASES["reorder"][0]).code
    order = [s.targets[0].id for s in function(code, "f").body if isinstance(s, ast.Assign)]  # type: ignore[attr-defined]
    assert order == ["y", "x", "w", "z"]
    # Data dependencies, two statements that may both raise, a try that could observe the order, a closure that
    # reads the moved name, a call with effects: no rewrite at all.
    assert "reorder-independent" not in kinds_of(CASES["reorder_unsafe"][0])


def test_loop_to_comprehension_turns_every_accumulating_loop_into_a_comprehension() -> None:
    code = only("loop-to-comprehension", CASES["accumulate"][0]).code
    body = function(code, "f")
    assert not [n for n in ast.walk(body) if isinstance(n, ast.For)]
    kinds = {type(n).__name__ for n in ast.walk(body) if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp))}
    assert kinds == {"ListComp", "SetComp", "DictComp"}
    assert "sum(" in code and "sum((len(y2) if y2 else -1 for y2 in xs), 5)" in code.replace("\n", "")


def test_loop_to_comprehension_keeps_loops_it_cannot_prove_equal() -> None:
    # The loop variable read after the loop, the accumulator read while built, a sum of possible floats (Python
    # 3.12 sums floats with compensation), a try that sees a half-built list, a dict whose key and value may both
    # raise (a comprehension evaluates the key first), closures over the loop variable, two statements per step.
    assert "loop-to-comprehension" not in kinds_of(CASES["accumulate_unsafe"][0])


def test_loop_to_any_all() -> None:
    source = CASES["search"][0]
    code = only("loop-to-any-all", source).code
    assert "return any((x > limit for x in xs))" in code
    assert "return all((w.startswith(prefix) for w in words))" in code
    assert "return 'found' if any((v == wanted for row in xs for v in row if v)) else 'none'" in code
    assert "loop-to-any-all" not in kinds_of(CASES["search_unsafe"][0])


def test_comprehension_to_loop_uses_fresh_loop_variables() -> None:
    source = CASES["unroll"][0]
    code = only("comprehension-to-loop", source).code
    comprehensions = [n for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.ListComp, ast.SetComp))]
    assert [ast.unparse(n) for n in comprehensions] == ["{v for v in xs}"]  # inside a tuple: stays
    assert "x_1" in names(code, "f")  # the comprehension's x never clobbers the function's x = 5
    assert "comprehension-to-loop" not in kinds_of("def f(xs):\n    return [lambda: x for x in xs]\n")


def test_extract_helper_moves_a_tail_with_its_inputs_as_parameters() -> None:
    source = CASES["helper"][0]
    code = only("extract-helper", source).code
    tree = ast.parse(code)
    helpers = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")]
    assert helpers == ["_f_rest_1", "_g_rest_1"]
    f = function(code, "f")
    assert ast.get_docstring(f) == "Doc." and ast.unparse(f.body[-1]) == "return _f_rest_1(c)"
    # y is maybe bound before ``z = ...``: passing it would raise earlier, so g's whole body moves instead.
    assert ast.unparse(function(code, "g").body[-1]) == "return _g_rest_1(xs, flag)"
    # Recursive functions (the stack would double) and generators stay as they are.
    assert ast.unparse(function(code, "fact")) == ast.unparse(function(source, "fact"))
    assert ast.unparse(function(code, "gen")) == ast.unparse(function(source, "gen"))


def test_if_else_swap_never_flips_an_ordering_comparison() -> None:
    code = only("if-else-swap", CASES["branches"][0]).code
    assert "a not in b" in code and "a is not None" in code and "s = 'y' if a else 'x'" in code
    assert "not a < 1" in code and ">=" not in code  # NaN: a < 1 and a >= 1 are both false


def test_invert_early_return() -> None:
    code = only("invert-early-return", CASES["guards"][0]).code
    assert "if not a:\n        return 2\n    else:" in code
    assert "if not x == 0:\n            return x\n        else:\n            raise ValueError(x)" in code


def test_conditional_expression_goes_both_ways() -> None:
    code = only("conditional-expression", CASES["conditionals"][0]).code
    assert "if a:\n        x = 1\n    else:\n        x = 2" in code
    assert "y = 'one' if a == 1 else 'two' if a == 2 else 'many'" in code
    assert "return (x, y) if a else (y, x)" in code


def test_inline_temp_only_for_a_temporary_used_once() -> None:
    code = only("inline-temp", CASES["temp"][0]).code
    assert ast.unparse(function(code, "f").body[0]) == "return a * 2"
    assert ast.unparse(function(code, "g")) == ast.unparse(function(CASES["temp"][0], "g"))


def test_fstring_to_format_only_where_evaluation_order_cannot_show() -> None:
    code = only("fstring-to-format", CASES["fstrings"][0]).code
    assert "'{!r:>8} and {} {{braces}} {}'.format(a, b, 3)" in code
    assert "f'{a}{len(b)}'" in code  # format() would evaluate len(b) before formatting a


def test_no_rewrite_of_code_that_does_not_parse_or_has_nothing_to_rewrite() -> None:
    assert rewrites("def f(:\n") == []
    assert [r.kind for r in rewrites("def f(a):\n    return a\n")] == ["extract-helper"]
    assert rewrites("X = 1\n") == []


# --- the real ColBench sample ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_tasks() -> list[Task]:
    path = SHARED_DATA / "backend_test_sample.jsonl"
    if not path.exists():
        pytest.skip(f"the ColBench sample is not present at {path} (../shared is only on development machines)")
    return load(str(path))


def answer(code: str) -> str:
    return "I WANT TO ANSWER:\n```python\n" + code + "\n```\n"


@pytest.fixture(scope="module")
def sample_rewrites(sample_tasks: list[Task]) -> list[tuple[Task, list[Rewrite]]]:
    return [(task, rewrites(task.ground_truth)) for task in sample_tasks]


def test_rewrites_of_the_real_references_differ_and_every_kind_applies_somewhere(
    sample_rewrites: list[tuple[Task, list[Rewrite]]],
) -> None:
    made: dict[str, int] = dict.fromkeys(KINDS, 0)
    for task, made_here in sample_rewrites:
        assert [r.kind for r in made_here] == [k for k in KINDS if k in {r.kind for r in made_here}]
        for rewrite in made_here:
            assert ast.dump(ast.parse(rewrite.code)) != ast.dump(ast.parse(task.ground_truth))
            made[rewrite.kind] += 1
    assert all(made.values()), made


@pytest.mark.slow
def test_every_rewrite_of_every_real_reference_passes_every_test_the_reference_passes(
    bwrap_sandbox: BwrapSandbox, sample_rewrites: list[tuple[Task, list[Rewrite]]]
) -> None:
    """All 300 references and their rewrites (about 1,150 answers) under the v1 rules, in about 20 seconds."""
    scorer = BackendScorer(bwrap_sandbox, limits=Limits(timeout_s=3.0), rules=3)
    pairs = [(task, task.ground_truth, "reference") for task, _ in sample_rewrites]
    pairs += [(task, r.code, r.kind) for task, made in sample_rewrites for r in made]
    scores = scorer.score_many([(task, answer(code)) for task, code, _ in pairs])
    passed = [{t.name for t in score.tests if t.passed} for score in scores]
    reference = {
        task.task_id: tests for (task, _, kind), tests in zip(pairs, passed, strict=True) if kind == "reference"
    }
    failures = [
        (task.task_id, kind, sorted(reference[task.task_id] - tests))
        for (task, _, kind), tests in zip(pairs, passed, strict=True)
        if not reference[task.task_id] <= tests
    ]
    assert failures == []
    assert len(reference) == len(sample_rewrites) and len(pairs) > 3 * len(sample_rewrites)


# --- the script ---------------------------------------------------------------------------------------------------


def test_the_script_writes_every_rewrite_with_colbench_task_ids_the_same_under_any_hash_seed(tmp_path: Path) -> None:
    tasks_file = REPO / "tasks" / "samples" / "backend-sample.jsonl"
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"rewrites-{seed}.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(tasks_file), "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "rewrites of 20 tasks" in done.stderr
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    rows = [json.loads(line) for line in outputs[0].splitlines()]
    expected = [
        {"task_id": task.task_id, "kind": r.kind, "code": r.code}
        for task in load(str(tasks_file))
        for r in rewrites(task.ground_truth)
    ]
    assert rows == expected and len(rows) > 20


def test_same_compares_types_nan_and_order() -> None:
    assert same([NAN, 1], [NAN, 1]) and not same(1, True) and not same(0.0, -0.0)
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1}) and same({1, 2}, {2, 1})
