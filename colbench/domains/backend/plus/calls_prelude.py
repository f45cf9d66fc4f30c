# mypy: ignore-errors
# (this file is the source of a program run in the sandbox, where nothing of colbench is importable)
"""Runs in the sandbox, prepended to a job's module: many calls of one module in one test process.

The augmenter and the audit judge thousands of candidate calls against a reference and its mutants. One process
per call (how the scorer runs a test) would cost a fork each; here one test expression runs a batch of calls, each
in a fresh module (the source executed again in a new namespace, the generators seeded again), so no call sees
another's state. Each call is held to budgets that do not depend on the machine: Python line events (``max_ops``),
call depth (``max_depth``) and the size of the value (``max_items``). Every call's outcome is one of
``("v", value, ops)``, ``("raised", type)``, ``("budget", what)``, ``("other", type)`` for a value of a type the
judge cannot compare here, ``("opaque", type)`` for one the scorer holds equal to nothing (a function, a module:
``__COLBENCH_OPAQUE``), or ``("module", type)`` when the module itself fails; a job's outcomes travel packed
(``__colbench_packed``). Values are
made of built-in types only (NumPy arrays and scalars as lists and numbers), and classes, which the sandbox's
runner carries by their names.

Standard library only; nothing here is trusted by the host, which decodes the outcomes as claims.
"""

import random as __colbench_random
import sys as __colbench_sys
import types as __colbench_types

# NumPy's module name, never written whole: the sandbox's runner sends a job whose text names it to a parent that has
# preloaded it, whose forks cost about 4 ms more a request; a task that uses it names it in its own source, which
# travels in the tests, and goes there all the same.
__COLBENCH_NP = "nump" + "y"


class __ColbenchBudget(BaseException):
    """Raised into the traced code when a call goes over a budget (a BaseException: ``except Exception`` in the
    code under test does not swallow it)."""


class __ColbenchOpaque(Exception):
    """A value the scorer carries as opaque (a function, a method, a module, a bare object), equal to no value a
    test expects."""


__COLBENCH_OPAQUE = (
    __colbench_types.FunctionType,
    __colbench_types.BuiltinFunctionType,
    __colbench_types.MethodType,
    __colbench_types.ModuleType,
    object,
)


def __colbench_plain(value, room):
    """``value`` as built-in types (and classes), with ``room[0]`` items of budget left; raises TypeError for
    other types."""
    room[0] -= 1
    if room[0] < 0:
        raise __ColbenchBudget("size")
    if value is None or isinstance(value, (bool, float, complex)):
        return value
    if isinstance(value, int):
        if value.bit_length() > 4096:
            raise __ColbenchBudget("size")
        return int(value)
    if isinstance(value, (str, bytes)):
        room[0] -= len(value) // 16
        if room[0] < 0:
            raise __ColbenchBudget("size")
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [__colbench_plain(v, room) for v in value]
        return items if isinstance(value, list) else tuple(items) if isinstance(value, tuple) else set(items)
    if isinstance(value, dict):
        return {__colbench_plain(k, room): __colbench_plain(v, room) for k, v in value.items()}
    array = __colbench_sys.modules.get(__COLBENCH_NP)
    if array is not None and isinstance(value, (array.ndarray, array.generic)):
        return __colbench_plain(value.tolist(), room)
    if isinstance(value, type):  # a class: the sandbox's runner carries it by its name, as the scorer's tests do
        return value
    if any(type(value) is kind for kind in __COLBENCH_OPAQUE):
        raise __ColbenchOpaque(type(value).__name__)
    raise TypeError(type(value).__name__)


__COLBENCH_OPS = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}


def __colbench_relation(a, b, op):
    """How two compared values stand: numbers and strings, and membership in a built-in collection (other types'
    comparisons may run their code, so they are not looked at twice)."""
    kinds = (int, float, str)
    if op in ("in", "notin"):
        if type(b) in (list, tuple, dict, set, frozenset, str) and type(a) in (*kinds, bool, type(None)):
            if type(b) is str and type(a) is not str:
                return ""
            if a not in b:
                return "out"
            found = repr(a)  # which item was found: each one the code looks for is wanted once
            return "in:" + found if len(found) <= 40 else "in"
        return ""
    if type(a) in kinds and type(b) in kinds and (type(a) is str) == (type(b) is str):
        return "lt" if a < b else "eq" if a == b else "gt"
    return ""


def __colbench_compiled(call, compiled):
    """``call`` compiled as ``eval`` compiles a string (leading blanks dropped), or the error compiling raised;
    kept in ``compiled``, which the jobs of one process share: the mutants of a task are called on the same
    expressions, and compiling one cost about as much as running it."""
    found = compiled.get(call)
    if found is None:
        try:
            found = compile(call.lstrip(" \t"), "<string>", "eval")
        except BaseException as exc:
            found = exc
        compiled[call] = found
    return found


def __colbench_calls__(source, calls, seed, max_ops, max_depth, max_items, cover=False, compiled=None):
    """The outcome of each call expression in ``calls``, each evaluated in a fresh module of ``source``. With
    ``cover``, a value's outcome also lists what the call covered: the lines of the task's code it ran (``L7``)
    and how the operands of each instrumented comparison stood (``C3:eq``; see ``coverage.instrument``).
    ``compiled``: the calls compiled so far in this process."""
    compiled = {} if compiled is None else compiled
    try:
        code = compile(source, "task.py", "exec")
    except BaseException as exc:  # the module cannot run: as a module that raises, for every call
        return __colbench_packed([("module", type(exc).__name__) for _ in calls], cover)
    results = []
    __colbench_random.seed(seed)
    seeded = __colbench_random.getstate()  # restoring it is half the cost of seeding again, the same state
    for call in calls:
        __colbench_random.setstate(seeded)
        array = __colbench_sys.modules.get(__COLBENCH_NP)
        if array is not None:
            array.random.seed(seed)
        module = __colbench_types.ModuleType("solution")
        module.__file__ = "solution.py"  # as the scorer's module has one
        __colbench_sys.modules["solution"] = module
        covered = set()

        def compare(i, a, b, op, covered=covered):
            relation = __colbench_relation(a, b, op)
            if relation:
                covered.add(f"C{i}:{relation}")
            return __COLBENCH_OPS[op](a, b)

        module.__dict__["__colbench_cmp__"] = compare
        try:
            exec(code, module.__dict__)
        except BaseException as exc:
            results.append(("module", type(exc).__name__))
            continue
        state = {"ops": 0, "depth": 0, "over": ""}

        def local(frame, event, arg, state=state, covered=covered):
            if event == "line":
                state["ops"] += 1
                if cover and frame.f_code.co_filename == "task.py":
                    covered.add(f"L{frame.f_lineno}")
                if state["ops"] > max_ops:
                    state["over"] = state["over"] or "ops"
                    raise __ColbenchBudget("ops")
            elif event == "return":
                state["depth"] -= 1
            return local

        def on_call(frame, event, arg, state=state):
            if event != "call":
                return None
            state["depth"] += 1
            if state["depth"] > max_depth:
                state["over"] = state["over"] or "depth"
                raise __ColbenchBudget("depth")
            return local

        expression = __colbench_compiled(call, compiled)
        if isinstance(expression, BaseException):  # as ``eval`` raises it
            results.append(("raised", type(expression).__name__))
            continue
        try:
            __colbench_sys.settrace(on_call)
            try:
                value = eval(expression, module.__dict__)
            finally:
                __colbench_sys.settrace(None)
        except BaseException as exc:
            results.append(("budget", state["over"]) if state["over"] else ("raised", type(exc).__name__))
            continue
        if state["over"]:  # the code caught the budget's exception and went on
            results.append(("budget", state["over"]))
            continue
        try:
            plain = __colbench_plain(value, [max_items])
            results.append(("v", plain, state["ops"], sorted(covered)) if cover else ("v", plain, state["ops"]))
        except __ColbenchBudget:
            results.append(("budget", "size"))
        except __ColbenchOpaque as exc:
            results.append(("opaque", str(exc)))
        except BaseException as exc:
            results.append(("other", str(exc) or type(exc).__name__))
    return __colbench_packed(results, cover)


__COLBENCH_KINDS = {"v": "v", "raised": "r", "budget": "b", "other": "o", "opaque": "q", "module": "m"}


def __colbench_packed(results, cover):
    """One job's outcomes as the host reads them (``calls._job``): a string of kinds, the payloads (a value, or what
    went wrong), the work counted as one string, and with ``cover`` what each call covered. Four nodes a job and one
    a call, where a tuple a call cost four: the sandbox's encoder and the host's decoder walk every node."""
    kinds = "".join(__COLBENCH_KINDS[r[0]] for r in results)
    payloads = [r[1] for r in results]
    ops = ",".join(str(r[2]) if r[0] == "v" else "0" for r in results)
    covered = [r[3] if r[0] == "v" else [] for r in results] if cover else None
    return (kinds, payloads, ops, covered)


def __colbench_jobs__(jobs, seed, max_ops, max_depth, max_items, cover=False, scale=None):
    """``__colbench_calls__`` of each ``(source, calls)`` job, one list each, in one process: the few calls of each
    of many short jobs (mutants, degenerate answers) share a fork instead of paying one each. With ``scale``, a
    ``(factor, floor, cap)``, job 0 is a reference run under ``max_ops`` and the others under ``min(cap, factor *
    most + floor)``, ``most`` the most work one of its calls that returned did (``calls.mutant_budget``)."""
    # Kept on the sys module, which outlives this module: a request's test expressions all run in one process, and
    # its jobs are of one trust (one task's mutants, say), so the survivors of a task run on the same inputs in
    # expressions of their own share one compile of each call.
    compiled = __colbench_sys.__dict__.setdefault("__colbench_compiled__", {})
    found = []
    for s, c in jobs:
        found.append(__colbench_calls__(s, c, seed, max_ops, max_depth, max_items, cover, compiled))
        if scale is not None and len(found) == 1:
            factor, floor, cap = scale
            kinds, _, ops, _ = found[0]
            # (no calls: ops is "", one empty count, and no kind)
            most = max([int(n) for kind, n in zip(kinds, ops.split(","), strict=False) if kind == "v"], default=0)
            max_ops = min(cap, factor * most + floor)
    return found
