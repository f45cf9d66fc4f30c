"""In-sandbox test runner: standard library only, runs inside the sandbox (bubblewrap or Docker).

Trust model. This process is trusted until it forks; every forked child runs untrusted code (an agent answer or a
task reference) and is treated as hostile. The runner therefore:

* runs each child as a uid of its own when started as root (``--child-uid``; the runner keeps root only as its
  saved uid, to switch children and clean up), so a child can neither signal nor inspect the runner;
* makes itself non-dumpable, so even a child of the same uid (non-root mode) can neither ptrace it nor open
  ``/proc/<pid>/mem`` or ``/proc/<pid>/fd/*``;
* gives each test a fresh child (fork), an empty working directory, rlimits, and a private pipe: the child's only
  way out is that pipe, and the runner knows which test a pipe belongs to, so a child cannot report for another
  test; whatever a child writes is only a *claim about its own return value*, decoded and compared by the host;
* closes every other descriptor in the child, so agent output cannot reach the runner's protocol stream;
* enforces the wall-clock limit with SIGKILL from outside, then (with ``--sandboxed`` only, i.e. inside its own
  PID namespace with a private /tmp) kills every other process in the namespace (``kill(-1)``), wipes the scratch
  directories and SysV IPC objects, so nothing a test started or wrote survives into the next test or job.

Two parents. Where the tests have a uid of their own, the runner imports the standard library only and forks the
tests of most jobs itself (a small process forks, and its children fault, faster); a second, "fat" parent that
has also imported numpy and bs4 (``_Zygote``) runs the jobs whose code names them. Each parent kills leftover
test processes by the tests' uid (``_kill_tests``), so neither parent's clean-up reaches the other.

Protocol (JSON lines). stdin: one job per line ``{"id", "code", "tests": [expr...], "timeout", "memory_mb",
"seed"}``, optionally ``"repeat": N`` (run the whole list N times, each run in a fresh child after a full clean-up,
as N jobs would; outcome ``i`` is test ``i % len(tests)`` of run ``i // len(tests)``), ``"shared_process": true``
(the N runs in one child instead, each test still in a fresh module, directory and seeding), ``"calls": {"max_ops",
"max_depth", "max_items", "cover", "scale"}`` (each test is a batch of calls of sources of one trust, run by the
runner's own ``_batch`` in the child: see "batched calls" below) and ``"batch": true``.
stdout: ``{"ready": true}`` once, after preloading and before any untrusted code; then per job one
``{"id", "i", ...outcome}`` per test and ``{"id", "done": true}``. An outcome is ``{"outcome", "error", "seconds"}``
and, for a value, ``"value_json"``: the test process's JSON text of its type-tagged return value, passed on as a
string for the host to decode (``_parse``). With ``batch`` the outcomes travel together,
``{"id", "results": [{"i", ...outcome}, ...]}``, the last ones in the ``done`` message: the runner holds an outcome
back only while the child is answering (at most ``BATCH_IDLE_S`` of silence, ``BATCH_MAX_AGE_S`` in all, and
``BATCH_MAX_BYTES``), so the host still hears from a working runner well within every test's limit. (A fat parent's
job ends with its ``results`` alone; the lean runner then sends ``done``.)
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import contextlib
import ctypes
import datetime
import enum
import gc
import json
import math
import os
import random
import resource
import select
import signal
import sys
import time
import types

# Imported by the "fat" parent only (see main()): they make the runner twice the size (44 MB resident instead of
# 22 MB), and every fork and every copy-on-write fault of a child costs more with them, for the few tasks that
# use them.
PRELOAD_FAT = ("numpy", "numpy.random", "bs4")
# A job whose code or tests name one of these runs in the fat parent (anything else that imports numpy, say
# through another library, still works in the lean one: numpy is then imported, and seeded, on demand).
FAT_WORDS = ("numpy", "bs4", "pandas", "scipy")
# The fat parent's uid is the runner's plus this (far above any worker's: slots take two uids each), so that each
# parent's clean-up, sent with the tests' uid, reaches neither the other parent nor, through its real uid, itself.
PARENT_UID_OFFSET = 100_000
# Imported by the lean parent before any job, so a test that imports them finds them loaded: the modules answers
# commonly use that cost little memory. Every fork and every exit of a test process costs in proportion to the
# parent's memory, so a module stays out when importing it in the few test processes that use it costs less than
# the memory costs all the others: sqlite3, urllib.parse, hashlib, uuid, statistics, dataclasses, decimal and
# fractions (none imported by more than one reference in 300; 0.1 to 1 MB and 0.5 to 6 ms each) are imported on
# demand, and the runner itself looks for their types only once a test has imported them (``_loaded``).
PRELOAD = (
    "re",
    "math",
    "json",
    "collections",
    "itertools",
    "functools",
    "datetime",
    "string",
    "heapq",
    "bisect",
    "typing",
    "operator",
    "copy",
    "io",
    "enum",
    "time",
)
CHILD_OUTCOMES = ("value", "raised", "unserializable")
CHILD_UID = None  # set by --child-uid: tests run as this uid, never as the runner's
MAX_DEPTH = 100
MAX_ITEMS = 100_000  # items taken from a view, iterator or generator before it is refused as too long
# Values Python compares by content only through their own types (or not at all, for dict_values and iterators):
# materialized into the plain container they stand for, so a reference returning one can be judged.
_DICT_KEYS = type({}.keys())
_DICT_VALUES = type({}.values())
_DICT_ITEMS = type({}.items())
MAX_ERROR = 300
SCRATCH_ROOTS = ("/tmp", "/dev/shm")
BATCH_IDLE_S = 0.05  # batched outcomes are sent once the child has been silent this long...
BATCH_MAX_AGE_S = 1.0  # ...or the oldest of them is this old (the host declares a worker silent for timeout + 5 s dead)
BATCH_MAX_BYTES = 1 << 20  # ...or they hold this much of the children's lines (the host reads lines up to 4 MB)
# SysV IPC: the *_INFO commands (shmctl SHM_INFO, semctl SEM_INFO, msgctl MSG_INFO) and where the count of objects
# in use sits in the struct each fills (shm_info.used_ids, seminfo.semusz, msginfo.msgpool): a cheap check that
# spares the /proc/sysvipc scan when a test left nothing behind.
_SHM_INFO, _SEM_INFO, _MSG_INFO = 14, 19, 12
_LIBC = None  # libc through ctypes, loaded once by main()
# Descriptors main() opens once, so a job looks up no path through "/" (in Docker the root is FUSE-mounted, and a
# lookup by an unprivileged uid costs an ACL round trip to its daemon): /dev/null for the children's stdio, the
# scratch root in which each test makes its directory, and the runner's own statm.
_DEVNULL = _SCRATCH = _STATM = -1
_SCRATCH_ID = (-1, -1)  # (st_dev, st_ino) of the scratch root, to notice a test that replaced the descriptor
_SIZE_COUNTS_ENTRIES = False  # whether a test's empty working directory may be handed on to the next (main() probes)
# The generator behind the random module's functions, and the span of its object that holds its state (after the
# object header), once main() has checked that the span tells a used generator from a freshly seeded one.
_RANDOM = random._inst
_RANDOM_SPAN = 0
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Unserializable(Exception):
    pass


def _type_name(t: type) -> str:
    return f"{type.__getattribute__(t, '__module__')}.{type.__getattribute__(t, '__qualname__')}"


def encode(v, depth=0):
    """Type-tagged JSON. Exact type checks and base-class methods only: a subclass's overrides never run here."""
    if depth > MAX_DEPTH:
        raise Unserializable(f"value nested deeper than {MAX_DEPTH}")
    t = type(v)
    d = depth + 1
    if v is None:
        return {"t": "none"}
    if t is bool:
        return {"t": "bool", "v": bool(v)}
    if isinstance(v, bool):
        return {"t": "bool", "v": int.__bool__(v)}
    if isinstance(v, int):  # IntEnum and IntFlag members too: they equal their value
        # Hex: the host's int() limits decimal strings to 4300 digits, not hexadecimal ones.
        return {"t": "int", "v": int.__format__(v, "x")}
    if isinstance(v, enum.Enum):
        return {"t": "enum", "type": _type_name(t), "v": object.__getattribute__(v, "_name_")}
    if isinstance(v, float):
        return {"t": "float", "v": float.__repr__(v)}
    if isinstance(v, complex):
        return {"t": "complex", "v": [float.__repr__(complex.real.__get__(v)), float.__repr__(complex.imag.__get__(v))]}
    if isinstance(v, str):
        return {"t": "str", "v": str.__getitem__(v, slice(None))}
    if isinstance(v, (bytes, bytearray)):
        return {"t": "bytes", "v": (bytes.hex if isinstance(v, bytes) else bytearray.hex)(v)}
    if isinstance(v, tuple):
        return {"t": "tuple", "v": [encode(x, d) for x in tuple.__iter__(v)]}
    if isinstance(v, list):
        return {"t": "list", "v": [encode(x, d) for x in list.__iter__(v)]}
    if isinstance(v, dict):
        return {"t": "dict", "v": [[encode(k, d), encode(x, d)] for k, x in dict.items(v)]}
    if isinstance(v, (set, frozenset)):
        return {
            "t": "set",
            "v": [encode(x, d) for x in (set.__iter__ if isinstance(v, set) else frozenset.__iter__)(v)],
        }
    if t is _loaded("fractions", "Fraction"):
        return {"t": "fraction", "v": [int.__format__(v.numerator, "x"), int.__format__(v.denominator, "x")]}
    if t is _loaded("decimal", "Decimal"):
        return {"t": "decimal", "v": t.__str__(v)}
    if t in (datetime.datetime, datetime.date, datetime.time):
        return {"t": t.__name__, "v": t.isoformat(v)}
    if t is datetime.timedelta:
        return {"t": "timedelta", "v": [v.days, v.seconds, v.microseconds]}
    if t is _DICT_KEYS:  # set-like: compared as a set
        return {"t": "set", "v": [encode(x, d) for x in _taken(v)]}
    if t is _DICT_ITEMS:  # set-like pairs with unique keys: compared as the dict they view
        return {"t": "dict", "v": [[encode(k, d), encode(x, d)] for k, x in _taken(v)]}
    if t in (_DICT_VALUES, range, collections.deque) or isinstance(v, (collections.abc.Iterator, types.GeneratorType)):
        return {"t": "list", "v": [encode(x, d) for x in _taken(v)]}
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in "biufcUSO":
                raise Unserializable(f"numpy array of dtype {v.dtype}")
            return {"t": "ndarray", "shape": list(v.shape), "v": [encode(x, d) for x in v.ravel().tolist()]}
        if isinstance(v, np.generic):
            return encode(v.item(), d)
    if isinstance(v, type):
        return {"t": "type", "v": _type_name(v)}
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None and dataclasses.is_dataclass(v):
        fields = [[f.name, encode(object.__getattribute__(v, f.name), d)] for f in dataclasses.fields(v) if f.compare]
        return {"t": "record", "type": _type_name(t), "v": fields}
    return {"t": "opaque", "type": _type_name(t)}


def _loaded(module, name):
    """A type of a module the test has imported, else None: a module's values exist only once it is imported, and
    importing one just in case would cost every test process (see ``PRELOAD``)."""
    return getattr(sys.modules.get(module), name, None)


def _taken(iterable):
    """The items of a view, lazy sequence or iterator, at most MAX_ITEMS (an endless generator is refused)."""
    items = []
    for item in iterable:
        if len(items) == MAX_ITEMS:
            raise Unserializable(f"{_type_name(type(iterable))} yields more than {MAX_ITEMS} items")
        items.append(item)
    return items


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _pick_fork():
    """``os.fork``, or fork(2) straight from libc where that is equivalent.

    ``os.fork`` runs Python's at-fork hooks in every child: threading's bookkeeping of other threads, random's
    re-seeding, logging's locks. They exist for processes with several threads; in the runner, which never has
    more than one, they only make each child copy about a hundred more pages (a fifth of what a job's child
    touches). With a single thread, libc's fork is the same fork: the thread keeps the GIL across the call (PyDLL),
    no lock can be held by another thread, and the child re-seeds random before every test anyway. Falls back to
    ``os.fork`` whenever that is not certain.
    """
    try:
        if (
            sys.implementation.name != "cpython"
            or not getattr(sys, "_is_gil_enabled", lambda: True)()
            or len(os.listdir("/proc/self/task")) != 1
        ):
            return os.fork
        fork = ctypes.PyDLL(None, use_errno=True).fork
    except (OSError, AttributeError):
        return os.fork
    fork.argtypes, fork.restype = [], ctypes.c_int

    def libc_fork():
        pid = fork()
        if pid < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return pid

    return libc_fork


_fork = os.fork  # main() picks the fork to use once the runner is set up


def _emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _wipe_scratch():
    for root in SCRATCH_ROOTS:
        try:
            with os.scandir(root) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    try:
                        os.rmdir(entry.path)  # a test's working directory is mostly left empty: one system call
                    except OSError:
                        import shutil  # a tree left by a test, seldom: not in every test process's parent

                        shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _sysv_ipc_in_use(libc):
    """Whether the IPC namespace may hold SysV objects: False only when all three kinds report none."""
    buf = ctypes.create_string_buffer(64)
    for call, args, at in (
        (libc.shmctl, (0, _SHM_INFO, buf), 0),
        (libc.semctl, (0, 0, _SEM_INFO, buf), 28),
        (libc.msgctl, (0, _MSG_INFO, buf), 0),
    ):
        if call(*args) < 0 or ctypes.c_int.from_buffer(buf, at).value != 0:
            return True  # objects, or no answer: scan /proc/sysvipc
    return False


def _remove_sysv_ipc():
    """SysV IPC objects outlive their creator: remove any a test left so the next one starts clean.

    Removing an object takes its owner's or creator's uid, or CAP_SYS_ADMIN (which a Docker worker lacks): so the
    runner removes them as the tests' uid first (every object was created by a test), then as itself.
    """
    libc = _LIBC
    if libc is None or not _sysv_ipc_in_use(libc):
        return
    as_tests = CHILD_UID is not None and os.geteuid() == 0
    if as_tests:
        os.seteuid(CHILD_UID)
    try:
        _remove_sysv_ipc_as(libc)
    finally:
        if as_tests:
            os.seteuid(0)
    if as_tests and _sysv_ipc_in_use(libc):
        _remove_sysv_ipc_as(libc)


def _remove_sysv_ipc_as(libc):
    for kind, ctl in (("shm", libc.shmctl), ("sem", None), ("msg", libc.msgctl)):
        try:
            with open("/proc/sysvipc/" + kind) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            ident = int(row.split()[1])
            if ctl is None:
                libc.semctl(ident, 0, 0)  # IPC_RMID
            else:
                ctl(ident, 0, None)


def _kill_tests():
    """SIGKILL every process a test left (PID namespace only; called with effective root when tests have a uid).

    ``kill(-1)`` reaches, at once however fast they fork, every process the caller may signal, but itself and
    PID 1. When the tests have a uid of their own (``CHILD_UID``), it is sent with that effective uid and without
    capabilities: it then reaches the processes whose real or saved uid is the tests' or the caller's real uid,
    that is every process of the tests (which cannot change uid) and no other parent of tests (the fat parent has
    a real uid of its own, ``PARENT_UID_OFFSET``; both keep root as their saved uid). No uid of the runner's ever
    becomes the tests', so a test can signal neither parent.
    """
    as_tests = CHILD_UID is not None and os.geteuid() == 0
    if as_tests:
        os.seteuid(CHILD_UID)
    try:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
    finally:
        if as_tests:
            os.seteuid(0)


def _reap_all(kill_all):
    """Reap every child; with ``kill_all`` (PID namespace only) first kill whatever a test left running."""
    if kill_all:
        _kill_tests()
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if kill_all else os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return


class _SeedingLoader:
    """Runs ``numpy.random``'s own loader, then seeds its global generator, as a parent that had preloaded it
    would have done before the test."""

    def __init__(self, loader, seed):
        self.loader, self.seed = loader, seed

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        seed = module.__dict__.get("seed")
        if callable(seed):
            seed(self.seed)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _SeedOnImport:
    """A finder that seeds ``numpy.random`` when a test imports it (a child of the lean parent has not).

    Only this child's own determinism depends on it: code that removes it harms nobody but itself.
    """

    def __init__(self, seed):
        self.seed = seed

    def find_spec(self, name, path=None, target=None):
        if name != "numpy.random":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _SeedingLoader(spec.loader, self.seed)
        return spec


def _dir_state():
    """What a test could change of its working directory: which one it is and its path, whether it is still empty
    (where a directory's size counts its entries), its mode, owner and times. A test that changed none of it leaves
    the next test an empty directory no different from a new one, so the next test starts there: making and
    removing a directory per test was about a twentieth of all scoring CPU."""
    try:
        st = os.stat(".")
        return (
            os.getcwd(),
            st.st_ino,
            st.st_dev,
            st.st_nlink,
            st.st_size,
            st.st_mode,
            st.st_uid,
            st.st_gid,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )
    except OSError:
        return None  # removed, or out of reach: never the state a test began with


def _random_state(span):
    return ctypes.string_at(id(_RANDOM) + object.__basicsize__, span)


def _random_state_span():
    """How many bytes of the random module's generator after its object header hold its state (the C part: index
    and the Mersenne Twister's words), provided that reading them tells a drawn-from generator from a reseeded
    one; else 0.

    Seeding was a tenth of a test process's CPU. A test that drew nothing leaves the state as seeding made it, so
    the next test need not seed again: comparing the state costs a tenth of seeding it."""
    span = type(_RANDOM).__mro__[1].__basicsize__ - object.__basicsize__
    random.seed(12345)
    seeded = _random_state(span)
    random.random()
    drawn = _random_state(span)
    random.seed(12345)
    ok = seeded != drawn and _random_state(span) == seeded and _RANDOM.gauss_next is None
    return span if ok else 0


def _size_counts_entries(root):
    """Whether an empty directory's size under ``root`` tells it from one with entries (tmpfs: 20 bytes each)."""
    probe = f"{root}/.probe-{os.getpid()}"
    os.mkdir(probe, 0o700)
    try:
        empty = os.stat(probe).st_size
        os.close(os.open(os.path.join(probe, "x"), os.O_CREAT | os.O_WRONLY, 0o600))
        return os.stat(probe).st_size != empty
    finally:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(probe, "x"))
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def _compiled_tests(tests):
    """Each test expression compiled, or the error compiling it raised (raised again by the test that runs it).

    Compiled by the parent, once per job rather than once per child: compiling was about a tenth of the tests'
    CPU. The expressions come with the task, never from the answer, and the host has already parsed every one of
    them (``judging.py``), so compiling them here exposes this process to nothing new; an answer's code, which
    the policy writes, is compiled only in the child.
    """
    exprs = []
    for text in tests:
        try:
            exprs.append(compile(text, "<test>", "eval"))
        except Exception as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
            exprs.append(exc)
    return exprs


# -- batched calls ------------------------------------------------------------------------------------------------
# A ``calls`` job (the audit, the augmenter, the generation gates) runs many calls of sources of one trust (a task's
# reference and its mutants, answers that compute nothing) in one test process: each of its tests is a batch, a list
# of ``[source, [call, ...]]``, and each call runs in a fresh module of its source, generators seeded again, held to
# budgets that do not depend on the machine: Python line events (``max_ops``), call depth (``max_depth``) and the
# value's size (``max_items``). A call's outcome is one of ``("v", value, ops[, covered])``, ``("raised", type)``,
# ``("budget", what)``, ``("other", type)`` for a value of a type not compared there, ``("opaque", type)`` for one
# the scorer holds equal to nothing (a function, a module), or ``("module", type)`` when the module fails; a batch's
# outcomes travel packed (``_packed``) as the test's value, encoded by ``encode`` like any other: the host decodes
# them as claims (colbench/domains/backend/plus/calls.py). Values are built-in types and classes only.


class _Budget(BaseException):
    """Raised into traced code over a budget (a BaseException: ``except Exception`` there does not swallow it)."""


class _Opaque(Exception):
    """A value the scorer carries as opaque (a function, a method, a module, a bare object)."""


_OPAQUE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, object)
_OPS = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}
_PACKED_KINDS = {"v": "v", "raised": "r", "budget": "b", "other": "o", "opaque": "q", "module": "m"}


def _plain(value, room):
    """``value`` as built-in types (and classes), with ``room[0]`` items of budget left; TypeError for others."""
    room[0] -= 1
    if room[0] < 0:
        raise _Budget("size")
    if value is None or isinstance(value, (bool, float, complex)):
        return value
    if isinstance(value, int):
        if value.bit_length() > 4096:
            raise _Budget("size")
        return int(value)
    if isinstance(value, (str, bytes)):
        room[0] -= len(value) // 16
        if room[0] < 0:
            raise _Budget("size")
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v, room) for v in value]
        return items if isinstance(value, list) else tuple(items) if isinstance(value, tuple) else set(items)
    if isinstance(value, dict):
        return {_plain(k, room): _plain(v, room) for k, v in value.items()}
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        return _plain(value.tolist(), room)
    if isinstance(value, type):  # a class: carried by its name, as the scorer's tests carry it
        return value
    if any(type(value) is kind for kind in _OPAQUE):
        raise _Opaque(type(value).__name__)
    raise TypeError(type(value).__name__)


def _relation(a, b, op):
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


def _compiled_call(call, compiled):
    """``call`` compiled as ``eval`` compiles a string (leading blanks dropped), or the error compiling raised; the
    batches of one process share ``compiled`` (a task's mutants are called on the same expressions)."""
    found = compiled.get(call)
    if found is None:
        try:
            found = compile(call.lstrip(" \t"), "<string>", "eval")
        except BaseException as exc:
            found = exc
        compiled[call] = found
    return found


def _calls(source, calls, seed, budget, compiled):
    """The outcome of each call in ``calls``, each evaluated in a fresh module of ``source``. With ``cover``, a
    value's outcome also lists what the call covered: the lines of the task's code it ran (``L7``) and how the
    operands of each instrumented comparison stood (``C3:eq``; colbench/domains/backend/plus/coverage.py)."""
    max_ops, max_depth, max_items, cover = budget
    try:
        code = compile(source, "task.py", "exec")
    except BaseException as exc:  # the module cannot run: as a module that raises, for every call
        return _packed([("module", type(exc).__name__) for _ in calls], cover)
    results = []
    random.seed(seed)
    seeded = random.getstate()  # restoring it is half the cost of seeding again, the same state
    for call in calls:
        random.setstate(seeded)
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed(seed)
        module = types.ModuleType("solution")
        module.__file__ = "solution.py"  # as the scorer's module has one
        sys.modules["solution"] = module
        covered = set()

        def compare(i, a, b, op, covered=covered):
            relation = _relation(a, b, op)
            if relation:
                covered.add(f"C{i}:{relation}")
            return _OPS[op](a, b)

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
                    raise _Budget("ops")
            elif event == "return":
                state["depth"] -= 1
            return local

        def on_call(frame, event, arg, state=state):
            if event != "call":
                return None
            state["depth"] += 1
            if state["depth"] > max_depth:
                state["over"] = state["over"] or "depth"
                raise _Budget("depth")
            return local

        expression = _compiled_call(call, compiled)
        if isinstance(expression, BaseException):  # as ``eval`` raises it
            results.append(("raised", type(expression).__name__))
            continue
        try:
            sys.settrace(on_call)
            try:
                value = eval(expression, module.__dict__)
            finally:
                sys.settrace(None)
        except BaseException as exc:
            results.append(("budget", state["over"]) if state["over"] else ("raised", type(exc).__name__))
            continue
        if state["over"]:  # the code caught the budget's exception and went on
            results.append(("budget", state["over"]))
            continue
        try:
            plain = _plain(value, [max_items])
            results.append(("v", plain, state["ops"], sorted(covered)) if cover else ("v", plain, state["ops"]))
        except _Budget:
            results.append(("budget", "size"))
        except _Opaque as exc:
            results.append(("opaque", str(exc)))
        except BaseException as exc:
            results.append(("other", str(exc) or type(exc).__name__))
    return _packed(results, cover)


def _packed(results, cover):
    """One source's outcomes as the host reads them: a string of kinds, the payloads (a value, or what went wrong),
    the work counted as one string, and with ``cover`` what each call covered. Four nodes a source and one a call,
    where a tuple a call cost four: the encoder and the host's decoder walk every node."""
    kinds = "".join(_PACKED_KINDS[r[0]] for r in results)
    payloads = [r[1] for r in results]
    ops = ",".join(str(r[2]) if r[0] == "v" else "0" for r in results)
    covered = [r[3] if r[0] == "v" else [] for r in results] if cover else None
    return (kinds, payloads, ops, covered)


_BATCH_COMPILED = {}  # a child's compiled calls, shared by the batches it runs (see _compiled_call)


def _batch(sources, options, seed):
    """``_calls`` of each ``[source, calls]`` of one batch, a packed list each. With ``scale``, a ``(factor, floor,
    cap)``, source 0 is a reference run under ``max_ops`` and the others under ``min(cap, factor * most + floor)``,
    ``most`` the most work one of its calls that returned did."""
    max_ops = int(options["max_ops"])
    rest = (int(options["max_depth"]), int(options["max_items"]), bool(options.get("cover")))
    scale = options.get("scale")
    found = []
    for source, calls in sources:
        found.append(_calls(source, calls, seed, (max_ops, *rest), _BATCH_COMPILED))
        if scale is not None and len(found) == 1:
            factor, floor, cap = scale
            kinds, _, ops, _ = found[0]
            # (no calls: ops is "", one empty count, and no kind)
            most = max([int(n) for kind, n in zip(kinds, ops.split(","), strict=False) if kind == "v"], default=0)
            max_ops = min(cap, factor * most + floor)
    return found


def _child(job, start, end, wfd, mapped, exprs):
    """Runs in the forked child, untrusted from the first line of ``code`` on: outcomes ``start`` to ``end`` (the end
    of their run or, ``shared_process``, of the job) in order; outcome ``i`` is test ``i % len(tests)``.

    Each test gets a fresh module (the code re-executed in a new namespace), a fresh working directory and
    re-seeded generators; its result goes to the runner as one JSON line. The runner times each test from the
    previous line, so a test that hangs, crashes or exits is stopped and charged alone, and the remaining tests
    continue in a new child. ``mapped`` is the runner's address-space size at the fork (the child's too), measured
    by the runner: the memory limit is what a test may add to it. A ``calls`` job's tests are batches
    (``_batch``), each run whole as one test.
    """
    try:
        devnull = _DEVNULL if _DEVNULL >= 0 else os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        low = 3
        for keep in sorted(fd for fd in (wfd, _SCRATCH) if fd >= low):
            os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, 65536)
        if CHILD_UID is not None:
            # Regain root through the saved uid only to give it up for good: the tests run as a uid that can
            # neither signal nor inspect the runner (whose real uid differs and whose saved uid is root).
            os.seteuid(0)
            os.setgroups([])
            os.setresgid(CHILD_UID, CHILD_UID, CHILD_UID)
            os.setresuid(CHILD_UID, CHILD_UID, CHILD_UID)
        os.setsid()
        count = len(exprs)
        timeout = float(job["timeout"])
        cpu = math.ceil((end - start) * (timeout + 1))  # a backstop: the runner's wall clock rules
        for lim, val in (
            (resource.RLIMIT_CPU, cpu),
            (resource.RLIMIT_AS, mapped + int(job["memory_mb"]) * 1024 * 1024),
            (resource.RLIMIT_FSIZE, 16 * 1024 * 1024),
            (resource.RLIMIT_NOFILE, 64),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NPROC, int(job.get("max_processes", 64))),
        ):
            resource.setrlimit(lim, (val, val))
        seed = int(job.get("seed", 0))
        if "numpy.random" not in sys.modules:
            sys.meta_path.insert(0, _SeedOnImport(seed))
        random.seed(seed)
        seeded = _random_state(_RANDOM_SPAN) if _RANDOM_SPAN else None
        pid = os.getpid()
        code, calls = None, job.get("calls")
        workdir, left = None, None  # the working directory and its _dir_state, where it may be handed on
        for i in range(start, end):
            if left is None or _dir_state() != left:
                name = f"test-{pid}-{i}"
                workdir = f"{SCRATCH_ROOTS[0]}/{name}"
                try:
                    held = os.fstat(_SCRATCH)
                    scratch = (held.st_dev, held.st_ino) == _SCRATCH_ID
                except OSError:
                    scratch = False  # an earlier test of this child closed or replaced it: go by the path
                if scratch:
                    os.mkdir(name, 0o700, dir_fd=_SCRATCH)
                    os.fchdir(_SCRATCH)
                    os.chdir(name)
                else:
                    os.mkdir(workdir, 0o700)
                    os.chdir(workdir)
                left = _dir_state() if _SIZE_COUNTS_ENTRIES else None
            if seeded is None or _RANDOM.gauss_next is not None or _random_state(_RANDOM_SPAN) != seeded:
                random.seed(seed)
            np = sys.modules.get("numpy")
            if np is not None:
                np.random.seed(seed)
            module = types.ModuleType("solution")
            module.__dict__["__builtins__"] = builtins
            module.__file__ = os.path.join(workdir, "solution.py")
            sys.modules["solution"] = module
            try:
                if calls is not None:
                    value = _batch(exprs[i % count], calls, seed)
                else:
                    if code is None:
                        code = compile(job["code"], "solution.py", "exec")
                    if isinstance(code, Exception):
                        raise code
                    exec(code, module.__dict__)
                    expr = exprs[i % count]
                    if isinstance(expr, Exception):
                        raise expr
                    value = eval(expr, module.__dict__)
                out, text = {"outcome": "value"}, json.dumps(encode(value))
            except Unserializable as exc:
                out, text = {"outcome": "unserializable", "error": str(exc)[:MAX_ERROR]}, ""
            except BaseException as exc:  # SystemExit and KeyboardInterrupt included: a test outcome, not a crash
                name = _type_name(type(exc))
                try:
                    msg = str(exc)[:MAX_ERROR]
                except BaseException:
                    msg = ""
                out, text = {"outcome": "raised", "error": (name + ": " + msg) if msg else name}, ""
            view = memoryview((json.dumps(out) + "\t" + text + "\n").encode("utf-8"))
            while view:
                n = os.write(wfd, view)
                view = view[n:]
    finally:
        os._exit(0)


class _Lines:
    """Newline-delimited messages from one child, read against deadlines, each line capped in size."""

    def __init__(self, fd, max_bytes):
        self.fd, self.max_bytes, self.buf, self.eof = fd, max_bytes, b"", False

    def next(self, deadline, idle=None):
        """A line (bytes), or one of "timeout", "too_large", "eof". ``idle`` is called once if the child stays
        silent for ``BATCH_IDLE_S`` (the moment to send held-back outcomes)."""
        while b"\n" not in self.buf:
            if self.eof:
                return "eof"
            if len(self.buf) > self.max_bytes:
                return "too_large"
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self.fd], [], [], left if idle is None else min(left, BATCH_IDLE_S))
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                self.eof = not chunk
                self.buf += chunk
            elif idle is not None:
                idle()
                idle = None
        line, self.buf = self.buf.split(b"\n", 1)
        return "too_large" if len(line) > self.max_bytes else line


def _parse(line, elapsed):
    """A child's line, ``HEAD<tab>VALUE``, is untrusted. Of HEAD (a JSON object) only the fields a test may report
    are kept, so it cannot smuggle protocol keys ("done", another test's index) into what the runner sends to the
    host. VALUE, the return value's JSON text, travels on as a string, decoded by the host alone: the runner never
    builds a value, so a large one leaves no grown heap behind in the process every later test is forked from."""
    head, tab, text = line.partition(b"\t")
    try:
        out = json.loads(head.decode("utf-8"))
        text = text.decode("ascii")
    except ValueError:
        out = None
    if not tab or not isinstance(out, dict) or out.get("outcome") not in CHILD_OUTCOMES:
        return {"outcome": "crashed", "error": "test process sent an invalid result", "seconds": elapsed}
    clean = {"outcome": out["outcome"], "error": str(out.get("error", ""))[:MAX_ERROR], "seconds": elapsed}
    if out["outcome"] == "value":
        clean["value_json"] = text
    return clean


def _failure(why, status, job, elapsed):
    """The outcome of the test a child was running when it stopped answering."""
    if why == "timeout":
        return {"outcome": "timeout", "error": f"exceeded {float(job['timeout']):.1f}s", "seconds": elapsed}
    if why == "too_large":
        return {"outcome": "too_large", "error": "return value too large", "seconds": elapsed}
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) == signal.SIGXCPU:
            return {"outcome": "timeout", "error": "CPU time limit", "seconds": elapsed}
        cause = f"killed by signal {os.WTERMSIG(status)}"
    else:
        cause = f"exited with status {os.WEXITSTATUS(status)}"
    return {"outcome": "crashed", "error": f"test process {cause} before returning", "seconds": elapsed}


class _Report:
    """A job's outcomes on their way to the host: one line each, or (``batch``) held back while the child is busy
    answering and sent together (see the module docstring). A child's line is decoded only when it is sent: the
    runner does as little as it can while a child shares its memory (every page it writes then is copied)."""

    def __init__(self, job, told=-1):
        self.id, self.batch = job["id"], bool(job.get("batch"))
        self.pending, self.since, self.finished, self.size = [], 0.0, False, 0
        self.told = told  # the fat parent's pipe to the lean runner: it hears when every outcome is sent

    def line(self, i, line, elapsed):
        """Test ``i``'s line from its child, which took ``elapsed`` seconds."""
        self.add(i, (line, elapsed))

    def add(self, i, result):
        """Test ``i``'s outcome: a dict, or a child's ``(line, elapsed)`` still to decode."""
        if not self.batch:
            _emit({**_outcome(result), "id": self.id, "i": i})
            return
        if not self.pending:
            self.since = time.monotonic()
        self.pending.append((i, result))
        self.size += len(result[0]) if isinstance(result, tuple) else 0
        if self.size >= BATCH_MAX_BYTES or time.monotonic() - self.since >= BATCH_MAX_AGE_S:
            self.flush()

    def _results(self):
        results = [{**_outcome(result), "i": i} for i, result in self.pending]
        self.pending, self.size = [], 0
        return results

    def flush(self):
        if self.pending:
            _emit({"id": self.id, "results": self._results()})

    def done(self):
        if not self.finished:
            self.finished = True
            if self.told >= 0:  # the lean runner says "done": once the host has it, no death of ours is the job's
                self.flush()
                os.write(self.told, b"o")
            elif self.batch:
                _emit({"id": self.id, "done": True, "results": self._results()})
            else:
                _emit({"id": self.id, "done": True})


def _outcome(result):
    return _parse(*result) if isinstance(result, tuple) else result


def _mapped_bytes():
    """This process's address-space size (what a child forked now starts with)."""
    if _STATM < 0:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * _PAGE
    return int(os.pread(_STATM, 256, 0).split()[0]) * _PAGE


def run_job(job, sandboxed, report):
    """Run every test of ``job`` (``repeat`` times), passing each outcome to ``report`` as it finishes.

    One child per uninterrupted run of tests; every run of a repeated job starts in a child of its own, unless the
    job asks for ``shared_process`` (all its runs in one child, each test still in a fresh module, directory and
    seeding). After each child the runner kills whatever is left and cleans up, exactly as between jobs. Once the
    last outcome is in, the host hears ``done`` before that final clean-up: the next job is read only after it.
    """
    tests, timeout = job["tests"], float(job["timeout"])
    max_bytes = int(job.get("max_bytes", 1_000_000))
    n = len(tests)
    total = n * max(1, int(job.get("repeat", 1)))
    shared = bool(job.get("shared_process"))
    exprs = tests if job.get("calls") is not None else _compiled_tests(tests)
    i = 0
    while i < total:
        run_end = total if shared else i - i % n + n  # a shared_process job's runs all go on in one child
        mapped = _mapped_bytes()
        rfd, wfd = os.pipe()
        pid = _fork()
        if pid == 0:
            os.close(rfd)
            _child(job, i, run_end, wfd, mapped, exprs)
        os.close(wfd)
        lines = _Lines(rfd, max_bytes)
        why = None
        try:
            while i < run_end:
                started = time.monotonic()
                line = lines.next(started + timeout, report.flush if report.pending else None)
                if isinstance(line, str):
                    why = line
                    break
                report.line(i, line, time.monotonic() - started)
                i += 1
        finally:
            os.close(rfd)
        if i == total:
            report.done()  # every outcome is in: the host can go on while the child exits and the runner cleans up
        with _privileged():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            _reap_all(sandboxed)
            if sandboxed:
                _wipe_scratch()
                _remove_sysv_ipc()
        if why is not None:
            report.add(i, _failure(why, status, job, time.monotonic() - started))
            i += 1
            if i == total:
                report.done()
    report.done()


def _drop_privileges(uid, keep_saved_root=False):
    """Become an unprivileged uid of our own, so RLIMIT_NPROC is counted for this worker alone.

    With ``keep_saved_root`` the saved uid stays 0: the runner can briefly become root again to switch its
    children to another uid and to clean up after them, while running as ``uid`` the rest of the time.
    """
    saved = 0 if keep_saved_root else uid
    os.setgroups([])
    os.setresgid(uid, uid, saved)
    os.setresuid(uid, uid, saved)


class _privileged:
    """Effective root for a cleanup step, when the runner keeps a saved root uid (a no-op otherwise)."""

    def __enter__(self):
        self.uid = os.geteuid()
        if CHILD_UID is not None:
            os.seteuid(0)

    def __exit__(self, *exc):
        if CHILD_UID is not None:
            os.seteuid(self.uid)


def _read_header():
    """One JSON line read byte by byte, leaving the rest of stdin untouched for the program."""
    buf = bytearray()
    while True:
        b = os.read(0, 1)
        if not b or b == b"\n":
            return json.loads(bytes(buf).decode("utf-8"))
        buf += b


def program_mode(uid):
    """Run one untrusted program as ``__main__`` with limits; stdout/stderr go straight to the host's capped pipes."""
    header = _read_header()
    with open("/tmp/main.py", "w", encoding="utf-8") as handle:
        handle.write(header["source"])
    if uid is not None:
        _drop_privileges(uid)
    timeout = float(header["timeout"])
    for lim, val in (
        (resource.RLIMIT_CPU, math.ceil(timeout) + 1),
        (resource.RLIMIT_AS, int(header["memory_mb"]) * 1024 * 1024),
        (resource.RLIMIT_FSIZE, 16 * 1024 * 1024),
        (resource.RLIMIT_NPROC, int(header["max_processes"])),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(lim, (val, val))
    os.chdir("/tmp")
    os.execv(sys.executable, [sys.executable, "-s", "-P", "/tmp/main.py"])


def _add_site_dirs():
    """The interpreter's package directories on ``sys.path``, as its start-up would have put them there.

    The runner starts with ``-S``: the site module's start-up would also run every ``.pth`` file there, each
    importing modules into the process every test process is forked from; forking and exiting cost in proportion
    to its memory. Only the directories are wanted (the task environment's own: ``taskenv_probe.py`` lists the
    libraries on exactly this path).
    """
    import site

    sys.path.extend(d for d in site.getsitepackages() if d not in sys.path)


def _import_fat():
    for name in PRELOAD_FAT:
        with contextlib.suppress(Exception):
            __import__(name)


def _fat(job):
    """Whether a job's code or tests (a ``calls`` job's sources and calls) name a module of ``PRELOAD_FAT`` (or a
    library that imports one)."""
    texts = [job["code"]]
    for test in job["tests"]:
        texts += [test] if isinstance(test, str) else [text for source, calls in test for text in (source, *calls)]
    return any(word in text for text in texts for word in FAT_WORDS)


def _set_up_parent():
    """What a parent of test processes needs before it forks any: its own statm, orphans reaped by it, the fork
    to use, and its objects out of the collector's reach (a child's collections would otherwise walk them all and
    copy every page they lie on)."""
    global _STATM, _fork
    if _STATM >= 0:
        os.close(_STATM)
    _STATM = os.open("/proc/self/statm", os.O_RDONLY)
    if _LIBC is not None:
        _LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0 (again: a change of uid resets it)
        _LIBC.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us to be reaped
    _fork = _pick_fork()
    gc.collect()
    gc.freeze()


class _Zygote:
    """The fat parent: a second runner process, started by the first job that needs it (between jobs, when no test
    process is left and the runner has run no untrusted code itself), that has imported ``PRELOAD_FAT`` and runs
    the jobs that name those modules (``_fat``), while the lean runner runs every other job.

    It is started by a double fork, with the runner not a subreaper for that moment, so it is orphaned to the
    sandbox's init, not to the runner (which waits for all of its children after each job), and the lean runner
    is not its parent. It runs as a uid of its own (the saved uid root, as
    the runner's), and tests' processes are killed by uid (``_kill_tests``), so each parent's clean-up spares the
    other. It writes its jobs' outcomes to the host itself (the runner's stdout, which it shares) and tells the
    runner on a private pipe when a job, clean-up included, is over; the runner reads the next job only then. If
    it dies, the runner exits: the host treats that as a dead worker, as if the job had killed it. If it cannot
    start, the runner imports everything itself instead.
    """

    def __init__(self, sandboxed):
        job_r, job_w = os.pipe()
        done_r, done_w = os.pipe()
        _LIBC.prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER off: the orphan goes to init, not to this runner
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    if os.fork() == 0:
                        os.close(job_w)
                        os.close(done_r)
                        self._serve(job_r, done_w, sandboxed)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)  # the middle process has exited: its child is init's now
        finally:
            _LIBC.prctl(36, 1, 0, 0, 0)
        os.close(job_r)
        os.close(done_w)
        self.jobs, self.done = job_w, done_r
        if not self.wait():
            os.close(job_w)
            os.close(done_r)
            raise OSError("the fat parent did not start")

    @staticmethod
    def _serve(job_r, done_w, sandboxed):
        try:
            os.dup2(_DEVNULL, 0)  # the host's jobs are the lean runner's to read
            os.seteuid(0)
            _drop_privileges(os.getuid() + PARENT_UID_OFFSET, keep_saved_root=True)
            _import_fat()
            _set_up_parent()
            os.write(done_w, b"r")
            with os.fdopen(job_r, "rb") as jobs:
                for line in jobs:
                    job = json.loads(line)
                    run_job(job, sandboxed, _Report(job, done_w))
                    os.write(done_w, b"d")
        finally:
            os._exit(0)

    def run(self, line, job_id, sandboxed):
        """Have the fat parent run one job (a line of the host's); return once it is over: True, or False when the
        fat parent died after it had sent every outcome of the job (in its clean-up), which this runner then does
        itself. Where it died before, the runner exits: the host treats it as a dead worker, whose tests run again.
        The runner, not the fat parent, tells the host the job is done, so the host never holds a finished job
        whose fat parent's death the runner takes for one in the middle of it."""
        view = memoryview(line.encode("utf-8") if line.endswith("\n") else (line + "\n").encode("utf-8"))
        while view:
            view = view[os.write(self.jobs, view) :]
        if os.read(self.done, 1) != b"o":
            sys.exit("sandbox runner: the fat parent exited")
        _emit({"id": job_id, "done": True})
        if self.wait():
            return True
        os.close(self.jobs)
        os.close(self.done)
        with _privileged():
            _reap_all(sandboxed)
            if sandboxed:
                _wipe_scratch()
                _remove_sysv_ipc()
        return False

    def wait(self):
        """Whether the fat parent said it is ready, or done with a job (False: it exited)."""
        return bool(os.read(self.done, 1))

    def alive(self):
        """Whether the fat parent is still there between jobs (it says nothing then: its pipe is readable only once
        it has exited). One that died after its last job (killed from outside the sandbox, say) must not take the
        next job, an innocent one, down with the runner."""
        if not select.select([self.done], [], [], 0)[0] or os.read(self.done, 1):
            return True
        os.close(self.jobs)
        os.close(self.done)
        return False


def main():
    args = sys.argv[1:]
    uid = int(args[args.index("--drop-to") + 1]) if "--drop-to" in args else None
    if "--program" in args:
        program_mode(uid)
        return
    # Only inside a sandbox of its own (PID namespace, private /tmp) may the runner kill every other process and
    # wipe the scratch directories; run elsewhere (tests, debugging) it leaves the machine alone.
    sandboxed = "--sandboxed" in args
    if sys.flags.no_site:
        _add_site_dirs()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.set_int_max_str_digits(0)
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)
    global CHILD_UID
    if uid is not None:
        CHILD_UID = int(args[args.index("--child-uid") + 1]) if "--child-uid" in args else None
        _drop_privileges(uid, keep_saved_root=CHILD_UID is not None)
    global _LIBC, _DEVNULL, _SCRATCH, _SCRATCH_ID, _SIZE_COUNTS_ENTRIES, _RANDOM_SPAN
    _DEVNULL = os.open(os.devnull, os.O_RDWR)
    _SCRATCH = os.open(SCRATCH_ROOTS[0], os.O_RDONLY | os.O_DIRECTORY)
    _SCRATCH_ID = (os.fstat(_SCRATCH).st_dev, os.fstat(_SCRATCH).st_ino)
    with contextlib.suppress(OSError):
        _SIZE_COUNTS_ENTRIES = _size_counts_entries(SCRATCH_ROOTS[0])
    _RANDOM_SPAN = _random_state_span()
    _LIBC = libc = _libc()
    if libc is not None:
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0: no ptrace or /proc/<pid>/{mem,fd} from our children
    # A lean runner and a fat parent where the tests have a uid of their own (each parent's clean-up must spare
    # the other), the fat parent started by the first job that needs it: most workers never run one, and its
    # imports were most of a worker's start-up; elsewhere one runner that has imported everything.
    two_parents = sandboxed and CHILD_UID is not None and libc is not None
    if not two_parents:
        _import_fat()
    _set_up_parent()
    _emit({"ready": True})
    zygote = None
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        fat = two_parents and _fat(job)
        if fat and zygote is not None and not zygote.alive():
            zygote = None  # started again below, between jobs, as the first time
        if fat and zygote is None:
            try:
                zygote = _Zygote(sandboxed)
            except OSError:  # it cannot start: from now on this runner imports everything and runs every job
                two_parents = fat = False
                _import_fat()
                gc.freeze()
        if fat:
            if not zygote.run(line, job["id"], sandboxed):
                zygote = None  # it died in its clean-up: started again by the next job that needs one
        else:
            run_job(job, sandboxed, _Report(job))


if __name__ == "__main__":
    main()
