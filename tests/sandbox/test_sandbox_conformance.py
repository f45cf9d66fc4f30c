"""One conformance + adversarial suite for every sandbox runtime (the ``any_sandbox`` fixture: local, docker).

Each attack states what it must yield: a failed test (never a pass), a bounded run, and a harness that keeps
working for the next job. The scorer-level attacks (answers that try to pass) are in test_attacks.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from colbench.domains.backend.values import Record, decode
from colbench.errors import SandboxError
from colbench.sandbox.contract import SANDBOX_UID_BASE, Budget, Limits, Sandbox

FAST = Limits(timeout_s=2.0)


@pytest.fixture
def sandbox(any_sandbox: Sandbox) -> Sandbox:
    return any_sandbox


def values(sandbox: Sandbox, code: str, tests: list[str], limits: Limits = FAST) -> list[object]:
    """Decoded values (or the outcome name when a test did not return a value)."""
    out = sandbox.run_tests(code, tests, limits=limits)
    return [decode(o.value) if o.outcome == "value" else o.outcome for o in out]


def as_root(sandbox: Sandbox) -> bool:
    """Whether the tests run under a uid of their own (Docker always; bwrap when the harness runs as root)."""
    return bool(getattr(sandbox, "as_root", True))


def still_works(sandbox: Sandbox) -> None:
    assert values(sandbox, "def f(x):\n    return x * 2\n", ["f(21)"]) == [42]


# -- module semantics ---------------------------------------------------------------------------------------------
def test_module_semantics_helpers_imports_recursion(sandbox: Sandbox) -> None:
    code = (
        "import math\nfrom functools import lru_cache\nCONST = 10\n"
        "def helper(n):\n    return math.factorial(n)\n"
        "@lru_cache(None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def f(n):\n    return helper(n) + fib(n) + CONST\n"
    )
    assert values(sandbox, code, ["f(5)", "f(10)"]) == [120 + 5 + 10, 3628800 + 55 + 10]


def test_each_test_gets_fresh_state_and_inputs(sandbox: Sandbox) -> None:
    code = "SEEN = []\ndef f(x, acc=[]):\n    acc.append(x)\n    SEEN.append(x)\n    return (len(acc), len(SEEN))\n"
    assert values(sandbox, code, ["f(1)", "f(2)", "f(3)"]) == [(1, 1)] * 3


def test_random_is_seeded_identically(sandbox: Sandbox) -> None:
    code = "import random\nimport numpy as np\ndef f():\n    return (random.random(), float(np.random.rand()))\n"
    first, second = values(sandbox, code, ["f()", "f()"])
    assert first == second


@pytest.mark.parametrize(
    "use",
    [
        "random.random()",
        "random.gauss(0, 1)",  # leaves the second of its pair in the generator's gauss_next
        "[random.random() for _ in range(700)]",  # past one whole block of the Mersenne Twister
        "random.seed(7)",
        "random.setstate(random.Random(3).getstate())",
        "random.getrandbits(4096)",
        "random.shuffle(list(range(50)))",
        "random._inst.gauss_next = 0.5",  # the Python half of the state alone
        "pass",
    ],
)
def test_a_test_that_draws_nothing_or_anything_leaves_the_next_a_freshly_seeded_generator(
    sandbox: Sandbox, use: str
) -> None:
    """Without numpy (the lean parent), a test that drew nothing is not re-seeded after: whatever one did to the
    generator, every test that reports sees the same numbers."""
    code = (
        "import random\n"
        "def report():\n    return (random.random(), random.gauss(0, 1), random.randrange(10**9))\n"
        f"def use():\n    {use}\n    return 0\n"
    )
    got = values(sandbox, code, ["report()", "use()", "report()", "use()", "use()", "report()", "report()"])
    reports = [got[i] for i in (0, 2, 5, 6)]
    assert reports == [reports[0]] * 4, use
    import random

    random.seed(0)
    assert reports[0] == (random.random(), random.gauss(0, 1), random.randrange(10**9))  # seed 0, as documented


def test_string_hashing_is_the_same_in_every_worker(sandbox: Sandbox) -> None:
    code = "def f():\n    return list({'apple', 'banana', 'cherry', 'date', 'elder', 'fig'})\n"
    seen = {tuple(values(sandbox, code, ["f()"])[0]) for _ in range(6)}  # type: ignore[arg-type]
    seen |= {tuple(values(sandbox, code, ["f()"])[0]) for _ in range(2)}  # type: ignore[arg-type]
    assert len(seen) == 1


def test_large_integers_cross_the_boundary(sandbox: Sandbox) -> None:
    assert values(sandbox, "def f():\n    return 7 ** 20000\n", ["f()"]) == [7**20000]


def test_each_test_has_its_own_working_directory(sandbox: Sandbox) -> None:
    code = "import os\ndef f():\n    n = len(os.listdir('.'))\n    open('db.sqlite', 'w').write('x')\n    return n\n"
    assert values(sandbox, code, ["f()", "f()"]) == [0, 0]


# -- exits and crashes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        "pass",
        "open('f', 'w').close()",
        "open('.hidden', 'w').close()",
        "os.mkdir('d')",
        "os.symlink('/tmp', 'link')",
        "open('f', 'w').close(); os.remove('f')",
        "os.chmod('.', 0o755)",
        "os.utime('.', (0, 0))",
        "os.chdir('/tmp')",
        "os.rename(os.getcwd(), '/tmp/moved-%d' % os.getpid())",
        "os.rmdir(os.getcwd())",
    ],
)
def test_whatever_a_test_does_to_its_directory_the_next_starts_in_an_empty_private_one(
    sandbox: Sandbox, change: str
) -> None:
    """An untouched directory is handed on to the next test of the same process; anything else gets a new one."""
    code = (
        "import os, stat\n"
        "def f(change):\n"
        "    st = os.stat('.')\n"
        "    here = (os.listdir('.'), oct(stat.S_IMODE(st.st_mode)), os.getcwd().startswith('/tmp/test-'),\n"
        "            st.st_mtime > 1e9)\n"
        "    if change:\n"
        f"        {change}\n"
        "    return here\n"
    )
    got = values(sandbox, code, ["f(True)", "f(True)", "f(False)", "f(False)"])
    assert got == [([], "0o700", True, True)] * 4, change


@pytest.mark.parametrize(
    "body, outcome",
    [
        ("import sys\nsys.exit(0)", "raised"),
        ("raise SystemExit(0)", "raised"),
        ("raise KeyboardInterrupt", "raised"),
        ("import os\nos._exit(0)", "crashed"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "crashed"),
        ("import ctypes\nctypes.string_at(0)", "crashed"),
    ],
)
def test_exits_fail_only_their_test(sandbox: Sandbox, body: str, outcome: str) -> None:
    code = "def f(x):\n    if x:\n" + "".join(f"        {line}\n" for line in body.splitlines()) + "    return 1\n"
    assert values(sandbox, code, ["f(0)", "f(1)", "f(0)"]) == [1, outcome, 1]


def test_module_level_exit_fails_every_test(sandbox: Sandbox) -> None:
    assert values(sandbox, "import sys\nsys.exit(0)\ndef f():\n    return 1\n", ["f()", "f()"]) == ["raised"] * 2


# -- time ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "while True:\n        pass",
        "import time\n    time.sleep(60)",
        "import re\n    re.match(r'(a+)+$', 'a' * 64 + 'b')",
        "import signal\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while True:\n        pass",
        "import resource\n    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY,) * 2)\n    while True:\n        pass",
        "input()\n    while True:\n        pass",
        "import threading\n    def burn():\n        while True:\n            pass\n"
        "    for _ in range(4):\n        threading.Thread(target=burn, daemon=True).start()\n    burn()",
    ],
    ids=["loop", "sleep", "regex", "signals", "rlimit", "input", "threads"],
)
def test_runaway_tests_are_stopped(sandbox: Sandbox, body: str) -> None:
    code = f"def f(x):\n    if x:\n        return 1\n    {body}\n"
    limits = Limits(timeout_s=1.0)
    out = sandbox.run_tests(code, ["f(0)", "f(1)"], limits=limits)
    assert out[0].outcome in ("timeout", "raised")
    assert out[0].outcome != "value"
    assert out[0].seconds < 5.0
    assert out[1].outcome == "value"


# -- memory, processes, output, disk ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "x = bytearray(50 * 1024 ** 3)",
        "x = []\n    while True:\n        x.append(bytearray(10 ** 7))",
        "x = 'a' * (20 * 1024 ** 3)",
    ],
    ids=["huge", "grow", "str"],
)
def test_memory_bombs_fail_their_test(sandbox: Sandbox, body: str) -> None:
    code = f"def f(x):\n    if x:\n        return 1\n    {body}\n    return 0\n"
    out = values(sandbox, code, ["f(0)", "f(1)"], limits=Limits(timeout_s=5.0, memory_mb=256))
    assert out[0] != 0 and out[0] in ("raised", "crashed", "timeout")
    assert out[1] == 1


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    code = (
        "import os\ndef f(x):\n    if x:\n        return 1\n"
        "    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    )
    out = values(sandbox, code, ["f(0)", "f(1)"], limits=Limits(timeout_s=2.0))
    assert out[0] in ("timeout", "raised", "crashed")
    assert out[1] == 1
    still_works(sandbox)


def test_detached_children_do_not_survive_the_job(sandbox: Sandbox) -> None:
    code = (
        "import os, subprocess, sys, time\n"
        "def spawn():\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time\\ntime.sleep(30)'], start_new_session=True)\n"
        "    return 1\n"
        "def count():\n"
        "    return len([p for p in os.listdir('/proc') if p.isdigit()])\n"
    )
    first = values(sandbox, code, ["count()"])[0]
    assert values(sandbox, code, ["spawn()"]) == [1]
    # Nothing outlives its job: the next job (whichever worker takes it) sees as many processes as before.
    assert [values(sandbox, code, ["count()"])[0] for _ in range(4)] == [first] * 4


def test_huge_return_value_fails(sandbox: Sandbox) -> None:
    out = sandbox.run_tests("def f():\n    return 'x' * (50 * 1024 * 1024)\n", ["f()"], limits=FAST)
    assert out[0].outcome in ("too_large", "raised", "timeout")


def test_huge_and_binary_stdout_is_harmless(sandbox: Sandbox) -> None:
    code = (
        "import sys, os\ndef f():\n    os.write(1, os.urandom(1 << 20) * 8)\n    print('x' * 10 ** 7)\n    return 7\n"
    )
    assert values(sandbox, code, ["f()"]) == [7]


def test_disk_filling_and_writes_outside_tmp_fail(sandbox: Sandbox) -> None:
    code = (
        "def fill():\n    with open('big', 'wb') as fh:\n        while True:\n            fh.write(b'x' * 10 ** 6)\n"
        "def outside(path):\n    open(path, 'w').write('x')\n    return 'wrote'\n"
    )
    out = values(sandbox, code, ["fill()", "outside('/usr/evil')", "outside('/evil')", "outside('/opt/colbench/x')"])
    assert "wrote" not in out
    assert all(o in ("raised", "crashed") for o in out)
    still_works(sandbox)


def test_no_state_survives_into_the_next_job(sandbox: Sandbox) -> None:
    plant = (
        "import os\ndef f():\n    open('/tmp/planted', 'w').write('x')\n"
        "    try:\n        os.makedirs('/dev/shm/x', exist_ok=True)\n    except OSError:\n        pass\n"
        "    return os.path.exists('/tmp/planted')\n"
    )
    assert values(sandbox, plant, ["f()"]) == [True]
    for _ in range(4):  # whichever worker runs the next job
        look = "import os\ndef f():\n    return [os.path.exists('/tmp/planted'), os.path.exists('/dev/shm/x')]\n"
        assert values(sandbox, look, ["f()"]) == [[False, False]]


# -- secrets, files, network --------------------------------------------------------------------------------------
def test_host_environment_and_files_are_invisible(sandbox: Sandbox) -> None:
    os.environ["COLBENCH_TEST_SECRET"] = "s3cr3t-key"
    probe = Path.home() / ".colbench-secret-probe"
    probe.write_text("s3cr3t-file")
    try:
        code = (
            "import os\n"
            "def env():\n    return sorted(os.environ.items())\n"
            "def exists(p):\n    return os.path.exists(p)\n"
            "def grep(root):\n"
            "    for top, dirs, files in os.walk(root):\n"
            "        if top.startswith(('/proc', '/sys', '/dev', '/usr')) or 'python3' in top:\n"
            "            dirs[:] = []\n"
            "            continue\n"
            "        for name in files:\n"
            "            try:\n"
            "                if b's3cr3t-' in open(os.path.join(top, name), 'rb').read(1 << 16):\n"
            "                    return os.path.join(top, name)\n"
            "            except OSError:\n"
            "                pass\n"
            "    return None\n"
        )
        here = os.path.abspath(__file__)
        out = values(
            sandbox,
            code,
            ["env()", f"exists({here!r})", f"exists({str(probe)!r})", "exists('/root/.bashrc')", "grep('/')"],
            limits=Limits(timeout_s=20.0),
        )
        assert "s3cr3t-key" not in repr(out[0])
        assert out[1:4] == [False, False, False]
        assert out[4] is None
    finally:
        del os.environ["COLBENCH_TEST_SECRET"]
        probe.unlink()


def test_network_and_dns_are_unreachable(sandbox: Sandbox) -> None:
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            received.append(conn.recv(100))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        code = (
            "import socket\n"
            "def connect(host, port):\n    s = socket.create_connection((host, port), timeout=1)\n    s.sendall(b'leak')\n"
            "    return 'connected'\n"
            "def dns():\n    return socket.getaddrinfo('pypi.org', 443)[0][4][0]\n"
        )
        out = values(sandbox, code, [f"connect('127.0.0.1', {port})", "connect('1.1.1.1', 53)", "dns()"])
        assert out == ["raised", "raised", "raised"]
        assert received == []
    finally:
        stop.set()
        thread.join()
        server.close()


def test_processes_of_the_host_are_invisible(sandbox: Sandbox) -> None:
    code = "import os\ndef f():\n    return len([p for p in os.listdir('/proc') if p.isdigit()])\n"
    assert values(sandbox, code, ["f()"])[0] < 10


# -- killing the harness ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kill",
    ["os.kill(os.getppid(), 9)", "os.kill(-1, 9)", "os.kill(1, 9)", "os.kill(os.getppid(), 19)"],
    ids=["parent", "all", "pid1", "stop-parent"],
)
def test_killing_the_parent_fails_only_that_test(sandbox: Sandbox, kill: str) -> None:
    code = f"import os\ndef f(x):\n    if x:\n        {kill}\n        return 99\n    return 1\n"
    out = values(sandbox, code, ["f(0)", "f(1)", "f(0)"], limits=Limits(timeout_s=1.0))
    # The kill either fails (the runner is out of the test's reach) or costs the test itself; never its neighbours.
    assert out[0] == 1 and out[2] == 1
    assert out[1] in (99, "raised", "crashed", "timeout")
    still_works(sandbox)


# -- programs -----------------------------------------------------------------------------------------------------
def test_run_program_captures_output_and_exit(sandbox: Sandbox) -> None:
    res = sandbox.run_program("import sys\nprint(sys.stdin.read().upper())\nsys.exit(3)\n", stdin=b"hello")
    assert res.exit_code == 3 and res.stdout == b"HELLO\n" and not res.timed_out


def test_run_program_timeout_and_output_cap(sandbox: Sandbox) -> None:
    res = sandbox.run_program("while True:\n    pass\n", limits=Limits(timeout_s=1.0))
    assert res.timed_out and res.exit_code is None and not res.ok
    res = sandbox.run_program("print('x' * 5_000_000)\n", limits=Limits(timeout_s=5.0, max_output_bytes=1000))
    assert res.truncated and len(res.stdout) == 1000


def test_syntax_errors_and_a_large_source(sandbox: Sandbox) -> None:
    assert values(sandbox, "def f(:\n  pass", ["f()"]) == ["raised"]
    # A test expression that does not compile fails that test alone, with the compiler's error.
    out = sandbox.run_tests("def f(x):\n    return x\n", ["f(1)", "f(", "f(3)", "f(\x00)"], limits=FAST)
    assert [o.outcome for o in out] == ["value", "raised", "value", "raised"]
    assert "SyntaxError: " in out[1].error and "<test>" in out[1].error
    assert [decode(out[0].value), decode(out[2].value)] == [1, 3]
    big = "X = [" + ",".join(str(i) for i in range(170_000)) + "]\ndef f():\n    return len(X)\n"
    assert len(big) > 1_000_000
    assert values(sandbox, big, ["f()"], limits=Limits(timeout_s=10.0)) == [170_000]


def test_mutated_inputs_do_not_leak_between_tests(sandbox: Sandbox) -> None:
    code = "DATA = [1, 2, 3]\ndef f(xs):\n    xs.append(len(xs))\n    DATA.append(0)\n    return (xs, len(DATA))\n"
    assert values(sandbox, code, ["f([0])", "f([0])", "f(DATA)"]) == [([0, 1], 4), ([0, 1], 4), ([1, 2, 3, 3, 0], 5)]


def test_a_worker_killed_from_outside_is_replaced_and_the_job_retried(sandbox: Sandbox) -> None:
    """An infrastructure event (the worker's process or container dies under it) costs time, never a verdict."""
    import time

    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    code = "import time\ndef f(x):\n    time.sleep(0.3)\n    return x\n"
    result: list[object] = []
    worker_thread = threading.Thread(target=lambda: result.append(values(sandbox, code, [f"f({i})" for i in range(6)])))
    worker_thread.start()
    time.sleep(0.6)
    with sandbox._lock:
        busy = [w for w in sandbox._all if w.pool == "answer"]
    for worker in busy:
        worker.kill()  # from outside the job: the harness side loses the worker mid-job
    worker_thread.join(timeout=60)
    assert result == [[0, 1, 2, 3, 4, 5]]


# -- repeated runs, batched outcomes, warm workers, clean-up ------------------------------------------------------
def test_repeated_runs_are_separate_processes_cleaned_up_in_between(sandbox: Sandbox) -> None:
    """``repeat=N`` is N runs as N calls would make them: a process of its own each, nothing left by the last."""
    code = (
        "import os\n"
        "def pid():\n    return os.getpid()\n"
        "def plant():\n    seen = os.path.exists('/tmp/planted')\n    open('/tmp/planted', 'w').write('x')\n"
        "    return seen\n"
    )
    out = sandbox.run_tests(code, ["pid()", "plant()"], limits=FAST, repeat=3)
    got = [decode(o.value) for o in out]
    assert len(got) == 6
    assert len(set(got[0::2])) == 3  # three runs, three processes
    assert got[1::2] == [False, False, False]  # each run starts with an empty /tmp


def test_a_crash_in_a_repeated_run_costs_only_its_own_test(sandbox: Sandbox) -> None:
    code = "import os\ndef f(x):\n    if x:\n        os._exit(1)\n    return 7\n"
    out = sandbox.run_tests(code, ["f(0)", "f(1)", "f(0)"], limits=FAST, repeat=2)
    assert [decode(o.value) if o.outcome == "value" else o.outcome for o in out] == [7, "crashed", 7] * 2


def test_shared_process_runs_repeat_in_one_process_each_test_fresh(sandbox: Sandbox) -> None:
    """``shared_process``: the N runs go on in one process (the scorer's reference runs), each test still in a fresh
    module, working directory and seeding; what a run leaves in imported modules or files shows in the next; the
    clean-up after the job removes it all."""
    code = (
        "import os, json, random, time\n"
        "def pid():\n    return os.getpid()\n"
        "def fresh():\n    return (random.random(), len(os.listdir('.')), os.getcwd().startswith('/tmp/test-'))\n"
        "def leftover():\n    json.runs = getattr(json, 'runs', 0) + 1\n"
        "    seen = os.path.exists('/tmp/planted')\n    open('/tmp/planted', 'w').write('x')\n"
        "    return (json.runs, seen)\n"
        "def clock():\n    return time.perf_counter_ns()\n"
    )
    tests = ["pid()", "fresh()", "leftover()", "clock()"]
    out = sandbox.run_tests(code, tests, limits=FAST, repeat=3, shared_process=True)
    got = [decode(o.value) for o in out]
    assert len(got) == 12
    assert len(set(got[0::4])) == 1  # one process
    assert got[1::4] == [got[1]] * 3 and got[1][1:] == (0, True)  # same seeding, an empty directory of its own
    assert got[2::4] == [(1, False), (2, True), (3, True)]  # each run sees what the last one left
    assert len(set(got[3::4])) == 3
    assert values(sandbox, code, ["leftover()"]) == [(1, False)]  # gone for the next job


def test_a_crash_in_a_shared_process_run_costs_only_its_own_test(sandbox: Sandbox) -> None:
    code = "import os\ndef f(x):\n    if x:\n        os._exit(1)\n    return os.getpid()\n"
    out = sandbox.run_tests(code, ["f(0)", "f(1)", "f(0)"], limits=FAST, repeat=2, shared_process=True)
    got = [decode(o.value) if o.outcome == "value" else o.outcome for o in out]
    assert got[1::3] == ["crashed", "crashed"]
    assert got[0] != got[2] == got[3]  # the rest goes on in a new process, the second run included


def test_numpy_is_seeded_whichever_parent_forks_the_test(sandbox: Sandbox) -> None:
    """Code that names numpy runs in a parent that has imported it; other code imports it on demand (here under a
    name no scan sees): both get the same seeded numbers."""
    named = "import numpy\ndef f():\n    return float(numpy.random.rand())\n"
    hidden = "def f():\n    np = __import__('nu' + 'mpy')\n    return float(np.random.rand())\n"
    assert values(sandbox, named, ["f()", "f()"]) == values(sandbox, hidden, ["f()", "f()"])
    assert values(sandbox, hidden, ["f()"]) == [0.5488135039273248]  # numpy.random.seed(0)


def test_the_fat_parent_starts_with_the_first_job_that_needs_it(sandbox: Sandbox) -> None:
    """A worker starts lean (importing numpy and bs4 was most of its start-up); the first job naming numpy starts
    the fat parent, one process more, orphaned to init and not to the runner, which after every job waits for all
    of its own children: lean jobs, an orphan a test leaves, and jobs of the fat parent all run on after it."""
    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    fresh = type(sandbox)(workers=1)
    processes = "import os\ndef f():\n    return len([p for p in os.listdir('/proc') if p.isdigit()])\n"
    fat = "import numpy\ndef f():\n    return int(numpy.int64(7))\n"
    orphan = (
        "import os, time\ndef f():\n    if os.fork() == 0:\n        if os.fork() == 0:\n            time.sleep(60)\n"
        "        os._exit(0)\n    time.sleep(0.2)\n    return 1\n"
    )
    try:
        before = values(fresh, processes, ["f()"])[0]
        assert values(fresh, fat, ["f()"]) == [7]
        after = values(fresh, processes, ["f()"])[0]
        assert after == before + (1 if as_root(fresh) else 0)
        assert values(fresh, orphan, ["f()"]) == [1]
        assert values(fresh, processes, ["f()"]) == [after]  # the orphan was killed and reaped
        assert values(fresh, fat, ["f()", "f()"]) == [7, 7]
        assert values(fresh, "def f():\n    return 2\n", ["f()"]) == [2]
    finally:
        fresh.close()


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` on this machine (containers' and bubblewrap's alike, in the host's numbering)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def _uid(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        return int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
    return None


def _syscall(pid: int) -> str:
    """The system call ``pid`` is blocked in (its number), from /proc."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/syscall").read_text().split()[0]
    return ""


@pytest.mark.parametrize("when", ["at_once", "waiting"])
def test_a_fat_parent_that_died_after_its_job_costs_the_next_job_nothing(sandbox: Sandbox, when: str) -> None:
    """The fat parent killed from outside the sandbox (by the kernel, an operator) once the host has a job's outcomes:
    at once (most often in its clean-up, which the lean runner then does for it) or while it waits for the next job
    (blocked reading its pipe). The next job that needs one gets a new one from the same runner, and its tests pass;
    the worker is not lost with them."""
    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    if not as_root(sandbox):
        pytest.skip("without uids of their own, the fat parent is not started (one runner imports everything)")
    fresh = type(sandbox)(workers=1)
    fat = "import numpy\ndef f():\n    return int(numpy.int64(7))\n"
    try:
        assert values(fresh, fat, ["f()"]) == [7]
        (worker,) = fresh._all
        proc = getattr(worker, "proc", None)
        if proc is not None:
            top = proc.pid
        else:
            worker.container.reload()  # type: ignore[attr-defined]
            top = worker.container.attrs["State"]["Pid"]  # type: ignore[attr-defined]
        uids = {p: uid for p in _descendants(top) if (uid := _uid(p)) is not None}  # a test's may be gone already
        runner = min(uid for uid in uids.values() if uid >= SANDBOX_UID_BASE)
        (zygote,) = [p for p, uid in uids.items() if uid == runner + 100_000]  # runner.py's PARENT_UID_OFFSET
        deadline = time.monotonic() + 10
        while when == "waiting" and _syscall(zygote) != "0" and time.monotonic() < deadline:  # blocked in read()
            time.sleep(0.01)
        os.kill(zygote, signal.SIGKILL)
        while Path(f"/proc/{zygote}").exists() and time.monotonic() < deadline:  # gone before the next job comes
            time.sleep(0.01)
        assert values(fresh, fat, ["f()", "f()"]) == [7, 7]
        assert fresh._all == {worker}  # the same worker: the runner started a fat parent again, and lived
    finally:
        fresh.close()


@pytest.mark.parametrize("kill", ["os.kill(-1, 9)", "[os.kill(p, 9) for p in pids()]"], ids=["all", "each"])
def test_a_test_cannot_kill_either_parent(sandbox: Sandbox, kill: str) -> None:
    """Neither the lean runner nor the parent that has imported numpy can be killed by a test of either."""
    for prefix in ("", "import numpy\n"):
        code = (
            f"{prefix}import os\n"
            "def pids():\n    return [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
            f"def f(x):\n    if x:\n        try:\n            {kill}\n        except OSError:\n            pass\n"
            "    return x\n"
        )
        out = values(sandbox, code, ["f(0)", "f(1)", "f(2)"], limits=Limits(timeout_s=1.0))
        # As root the kill fails: the runner and the fat parent are out of the tests' reach (as an ordinary user,
        # tests share the runner's uid, and a kill costs the test that sends it).
        assert out[0::2] == [0, 2] and out[1] in ((1,) if as_root(sandbox) else (1, "crashed", "timeout"))
        still_works(sandbox)
        assert values(sandbox, "import numpy\ndef f():\n    return int(numpy.int64(5))\n", ["f()"]) == [5]


def test_no_test_can_read_either_parent(sandbox: Sandbox) -> None:
    """The memory, environment and descriptors of every other process in the sandbox (the runner, the fat parent,
    init) are closed to a test of either parent."""
    look = (
        "import os\n"
        "def f():\n    opened = []\n"
        "    for p in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "        for path in ('/proc/%d/mem' % p, '/proc/%d/environ' % p, '/proc/%d/fd' % p):\n"
        "            try:\n"
        "                os.listdir(path) if path.endswith('fd') else open(path, 'rb').read(1)\n"
        "                opened.append(path)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return opened\n"
    )
    for prefix in ("", "import numpy\n"):
        assert values(sandbox, prefix + look, ["f()"]) == [[]]


def test_outcomes_are_held_back_only_while_the_child_answers(sandbox: Sandbox) -> None:
    """Batched outcomes: those of fast tests go out as soon as the child goes quiet, not only at the end."""
    import time

    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    code = "import time\ndef f(s):\n    time.sleep(s)\n    return s\n"
    job = sandbox._job(code, ["f(0)", "f(0)", "f(0.6)", "f(0)"], FAST, 0)
    messages: list[dict[str, object]] = []
    with sandbox._running:
        worker = sandbox._acquire("answer")
        real = worker._read_line

        def spy(deadline: float) -> object:
            msg = real(deadline)
            messages.append(msg)
            return msg

        worker._read_line = spy  # type: ignore[method-assign]
        results: dict[int, object] = {}
        try:
            worker.run(job, results, time.monotonic() + 30)  # type: ignore[arg-type]
        finally:
            del worker._read_line
        sandbox._idle["answer"].put(worker)
    assert sorted(results) == [0, 1, 2, 3]
    assert messages[-1].get("done") is True
    early = [r["i"] for m in messages[:-1] for r in m.get("results", [])]  # type: ignore[attr-defined]
    assert {0, 1} <= set(early)  # sent while the third test was still sleeping
    reported = early + [r["i"] for r in messages[-1]["results"]]  # type: ignore[attr-defined]
    assert sorted(reported) == [0, 1, 2, 3]


def test_warm_workers_outlive_the_threads_that_started_them(sandbox: Sandbox) -> None:
    """``warm`` starts every worker of both pools, and a worker lives as long as its pool, whichever (short-lived)
    thread started or used it (bubblewrap's --die-with-parent fires when the *thread* that started it ends)."""
    from concurrent.futures import ThreadPoolExecutor

    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    fresh = type(sandbox)(workers=2)  # the shared pool may hold workers earlier tests killed
    try:
        fresh.warm()
        with fresh._lock:
            started = set(fresh._all)
        assert sorted(w.pool for w in started) == ["answer"] * 2 + ["reference"] * 2
        for _ in range(2):
            with ThreadPoolExecutor(2) as pool:  # its threads end when the block does
                list(pool.map(lambda k: values(fresh, "def f(x):\n    return x\n", [f"f({k})"]), range(4)))
        with fresh._lock:
            assert set(fresh._all) == started
        assert all(w.alive() for w in started)
    finally:
        fresh.close()


def test_warm_without_waiting_starts_each_pool_once_and_close_leaves_no_worker(sandbox: Sandbox) -> None:
    """``warm(count=1, wait=False)`` (what a scorer does when made) returns before any worker is up; the first job
    of each pool then waits for that start instead of starting a second worker, and ``close`` right after a warm
    that is still starting leaves no worker running."""
    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    fresh = type(sandbox)(workers=2)
    try:
        fresh.warm(count=1, wait=False)
        assert values(fresh, "def f(x):\n    return x + 1\n", ["f(1)"]) == [2]
        assert fresh.run_tests("x = 3", ["x"], pool="reference")[0].outcome == "value"
        with fresh._lock:
            started = set(fresh._all)
        assert sorted(w.pool for w in started) == ["answer", "reference"]
    finally:
        fresh.close()
    assert not any(w.alive() for w in started)
    closing = type(sandbox)(workers=2)
    closing.warm(wait=False)
    closing.close()
    with closing._lock:
        assert not closing._all
    assert all(not t.is_alive() for pool in closing._starting.values() for t in pool)
    with pytest.raises(SandboxError):
        closing.run_tests("x = 1", ["x"])


def test_sysv_ipc_objects_do_not_survive_the_job(sandbox: Sandbox) -> None:
    plant = (
        "import ctypes\ndef f():\n    libc = ctypes.CDLL(None)\n"
        "    return [libc.shmget(0, 4096, 0o1600), libc.semget(0, 1, 0o1600), libc.msgget(0, 0o1600)]\n"
    )
    look = (
        "def f():\n"
        "    return [len(open('/proc/sysvipc/' + k).read().splitlines()) - 1 for k in ('shm', 'sem', 'msg')]\n"
    )
    created = values(sandbox, plant, ["f()"])[0]
    assert isinstance(created, list) and all(ident >= 0 for ident in created)
    for _ in range(4):  # whichever worker runs the next job
        assert values(sandbox, look, ["f()"]) == [[0, 0, 0]]


@pytest.mark.parametrize(
    ("kind", "make"),
    [("shm", "libc.shmget(0, 4096, 0o1600)"), ("sem", "libc.semget(0, 1, 0o1600)"), ("msg", "libc.msgget(0, 0o1600)")],
)
def test_a_sysv_ipc_object_of_any_kind_alone_is_removed(sandbox: Sandbox, kind: str, make: str) -> None:
    """The runner's clean-up notices one object of any one kind, so none survives into the next job."""
    plant = f"import ctypes\ndef f():\n    libc = ctypes.CDLL(None)\n    return {make}\n"
    look = f"def f():\n    return len(open('/proc/sysvipc/{kind}').read().splitlines()) - 1\n"
    created = values(sandbox, plant, ["f()"])[0]
    assert isinstance(created, int) and created >= 0
    for _ in range(4):  # whichever worker runs the next job
        assert values(sandbox, look, ["f()"]) == [0]


def test_text_crosses_the_boundary_intact(sandbox: Sandbox) -> None:
    """Values and errors cross from the test process through the runner to the host as they were: quotes,
    backslashes, newlines, braces and protocol-like text, non-ASCII text and lone surrogates."""
    text = 'a"b\\c\nd}{], "done": true, "i": 0 \u00e9\u4e2d\U0001f600 \ud800'
    code = f"T = {text!r}\ndef f():\n    return T\ndef g():\n    raise ValueError(T)\n"
    out = sandbox.run_tests(code, ["f()", "g()", "[T, {T: (T,)}]"], limits=FAST)
    assert [o.outcome for o in out] == ["value", "raised", "value"]
    assert decode(out[0].value) == text
    assert out[1].error == "builtins.ValueError: " + text
    assert decode(out[2].value) == [text, {text: (text,)}]
    still_works(sandbox)


def test_a_test_that_breaks_its_descriptors_or_leaves_its_directory_spoils_no_other_test(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        "def f(x):\n"
        "    if x == 1:\n"  # close every directory descriptor the process holds
        "        for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "            try:\n"
        "                if os.path.isdir('/proc/self/fd/%d' % fd):\n"
        "                    os.close(fd)\n"
        "            except OSError:\n"
        "                pass\n"
        "    if x == 2:\n"
        "        os.chdir('/')\n"
        "    if x == 3:\n"  # another directory in place of any descriptor that is one
        "        spare = os.open('/dev/shm', os.O_RDONLY)\n"
        "        for fd in range(3, 64):\n"
        "            if fd != spare and os.path.isdir('/proc/self/fd/%d' % fd):\n"
        "                os.dup2(spare, fd)\n"
        "    if x:\n"
        "        return None\n"
        "    return (len(os.listdir('.')), os.getcwd().startswith('/tmp/test-'))\n"
    )
    for sabotage in ("f(1)", "f(2)", "f(3)"):  # a job each: the next test runs in the same child
        assert values(sandbox, code, ["f(0)", sabotage, "f(0)"]) == [(0, True), None, (0, True)]


def test_modules_a_test_imports_on_demand_work_and_their_values_cross_the_boundary(sandbox: Sandbox) -> None:
    """The runner preloads only cheap, common modules; the rest are imported by the test process that needs them,
    and the runner still encodes their values (it looks for a type once its module is imported)."""
    code = (
        "import dataclasses, decimal, fractions, hashlib, sqlite3, statistics, urllib.parse, uuid\n"
        "@dataclasses.dataclass\nclass P:\n    x: int\n    y: str = 'a'\n"
        "def f():\n"
        "    db = sqlite3.connect(':memory:')\n"
        "    return (fractions.Fraction(1, 3), decimal.Decimal('1.50'), P(3),\n"
        "            hashlib.sha256(b'x').hexdigest()[:8], statistics.median([3, 1, 2]),\n"
        "            urllib.parse.quote('a b'), db.execute('select 41 + 1').fetchone()[0],\n"
        "            str(uuid.UUID(int=1))[-4:])\n"
    )
    (value,) = values(sandbox, code, ["f()"])
    assert isinstance(value, tuple)
    assert value[:2] == (Fraction(1, 3), Decimal("1.50"))
    assert value[2] == Record("dataclass", "solution.P", (("x", 3), ("y", "a")))
    assert value[3:] == ("2d711642", 2, "a%20b", 42, "0001")
    # A value of one of those types is judged even when only the test expression imports the module.
    assert values(sandbox, "def f(x):\n    return x\n", ["f(__import__('fractions').Fraction(2, 4))"]) == [
        Fraction(1, 2)
    ]


def test_an_unreachable_docker_daemon_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("docker")
    from colbench.errors import InfraError
    from colbench.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(InfraError, match="Docker daemon is not reachable"):
        DockerSandbox(workers=1)


def test_a_worker_that_dies_before_its_handshake_is_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed at birth (from outside, by the OOM killer): one more start, and the job runs; a runtime that cannot
    start workers at all still fails with its one-line error."""
    from colbench.sandbox.bwrap import BwrapSandbox

    sandbox = BwrapSandbox(workers=1)
    real = sandbox._start_worker
    failures = [SandboxError("sandbox worker failed to start: no handshake (got None)")]

    def flaky(slot: int) -> Any:
        if failures:
            raise failures.pop()
        return real(slot)

    monkeypatch.setattr(sandbox, "_start_worker", flaky)
    try:
        (outcome,) = sandbox.run_tests("def f():\n    return 41 + 1\n", ["f()"])
        assert outcome.outcome == "value" and not failures

        def broken(slot: int) -> Any:
            raise SandboxError("sandbox worker failed to start: bwrap: no permission")

        monkeypatch.setattr(sandbox, "_start_worker", broken)
        sandbox.close()
        fresh = BwrapSandbox(workers=1)
        monkeypatch.setattr(fresh, "_start_worker", broken)
        with pytest.raises(SandboxError, match="no permission"):
            fresh.run_tests("def f():\n    return 1\n", ["f()"])
        fresh.close()
    finally:
        sandbox.close()


def test_batched_calls_run_each_call_in_a_fresh_module_under_machine_independent_budgets(sandbox: Sandbox) -> None:
    """``run_calls`` (the audit's, the augmenter's and the gates' executor): one process per batch, each call in a
    fresh module of its source, seeded again, held to budgets of work, depth and size rather than seconds; every
    outcome kind; a reference's work setting its mutants' budget (``scale``); what a call covered; a source that
    kills its process costs its own batch only."""
    counter = "import random\nn = 0\ndef f(x):\n    global n\n    n += 1\n    return (x, n, random.random())\n"
    kinds = (
        "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\n"
        "def loop():\n    while True:\n        pass\n"
        "def deep(n):\n    return deep(n + 1)\n"
        "def big():\n    return list(range(50))\n"
        "def boom():\n    raise KeyError('k')\n"
        "def fn():\n    return len\n"
        "def rec():\n    return P(1)\n"
        "def cls():\n    return int\n"
    )
    budget = Budget(max_ops=2_000, max_depth=50, max_items=20, backstop_s=20.0)
    batches = [
        [(counter, ["f(1)", "f(2)"]), (kinds, ["loop()", "deep(0)", "big()", "boom()", "fn()", "rec()", "cls()", "("])],
        [("def g(:\n", ["g()"]), ("import os\ndef h():\n    return os._exit(3)\n", ["h()"])],
        [("import numpy\ndef a():\n    return numpy.arange(3)\n", ["a()"])],
    ]
    first, killed, arrays = sandbox.run_calls(batches, budget=budget, seed=7)
    assert first.outcome == "value" and killed.outcome == "crashed" and arrays.outcome == "value"
    (counted, counted_payloads, counted_ops, _), (outcomes, payloads, _, _) = decode(first.value)
    assert counted == "vv" and [p[:2] for p in counted_payloads] == [(1, 1), (2, 1)]  # a fresh module each call
    assert counted_payloads[0][2] == counted_payloads[1][2]  # seeded again: the same draw
    assert all(int(n) > 0 for n in counted_ops.split(","))
    assert outcomes == "bbbrqovr"  # ops, depth, size, raised, opaque, other, a class, a call that cannot compile
    assert payloads[:6] == ["ops", "depth", "size", "KeyError", "builtin_function_or_method", "P"]
    assert payloads[6] == Record("type", "builtins.int", ()) and payloads[7] == "SyntaxError"  # a class, by its name
    assert decode(arrays.value) == [("v", [[0, 1, 2]], "2", None)]  # an array as the list it holds
    # A reference's work sets its mutants' budget: ten times its most plus a floor.
    reference = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
    slower = reference.replace("range(n)", "range(n * 100_000)")
    (scaled,) = sandbox.run_calls(
        [[(reference, ["f(10)"]), (slower, ["f(10)"])]], budget=budget, seed=0, scale=(10, 100, 10**6)
    )
    (_, _, ops, _), (kinds_slow, payloads_slow, _, _) = decode(scaled.value)
    assert kinds_slow == "b" and payloads_slow == ["ops"] and int(ops) < 50
    (covering,) = sandbox.run_calls([[(reference, ["f(2)"])]], budget=budget, cover=True)
    ((_, _, _, covered),) = decode(covering.value)
    assert covered == [["L2", "L3", "L4", "L5"]]
    still_works(sandbox)


def test_two_pools_at_once_share_no_process_limit(sandbox: Sandbox) -> None:
    """Two pools on one machine (two processes scoring at once, two pytest workers) get uids of their own: an answer
    that holds every process its limit allows in one pool costs a test of the other pool nothing. (RLIMIT_NPROC
    counts a uid's processes machine-wide: with shared uids the second test's fork failed, a verdict that depended
    on what else ran.)"""
    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    if not as_root(sandbox):
        pytest.skip("without uids of their own, tests share the user's process limit (the runtime says so)")
    hog = (
        "import os, time\ndef f():\n    n = 0\n    while True:\n        try:\n            if os.fork() == 0:\n"
        "                time.sleep(20)\n                os._exit(0)\n        except OSError:\n            break\n"
        "        n += 1\n    time.sleep(4)\n    return n\n"
    )
    forks = "import os\ndef f():\n    for _ in range(3):\n        if os.fork() == 0:\n            os._exit(0)\n        os.wait()\n    return 3\n"
    first, second = type(sandbox)(workers=1), type(sandbox)(workers=1)
    try:
        uid, other = first._uid(0), second._uid(0)  # type: ignore[attr-defined]
        assert uid is not None and other is not None and uid != other
        held: list[object] = []
        thread = threading.Thread(target=lambda: held.extend(values(first, hog, ["f()"], Limits(timeout_s=30))))
        thread.start()
        test_uid = uid + 1
        deadline = time.monotonic() + 20
        while sum(_uid(int(p)) == test_uid for p in os.listdir("/proc") if p.isdigit()) < 20:
            assert time.monotonic() < deadline, "the first pool's test never held its processes"
            time.sleep(0.05)
        assert values(second, forks, ["f()"]) == [3]
        thread.join()
        assert isinstance(held[0], int) and held[0] >= 20  # it did reach its own limit meanwhile
    finally:
        first.close()
        second.close()


def test_workers_that_died_while_idle_cost_the_next_job_nothing(sandbox: Sandbox) -> None:
    """Workers killed between jobs (their containers killed or removed, their processes gone) are found when next
    taken, and new ones run the job: its tests pass, not 'crashed' as if they had killed their workers. (With every
    idle worker dead, the job and its tests' re-runs alone would otherwise all meet a dead one.)"""
    from colbench.sandbox.pool import WorkerPool

    assert isinstance(sandbox, WorkerPool)
    fresh = type(sandbox)(workers=2)
    try:
        fresh.warm(["answer"])
        idle = list(fresh._all)
        assert len(idle) == 2
        for worker in idle:
            proc = getattr(worker, "proc", None)
            if proc is not None:
                proc.kill()
                proc.wait(timeout=10)
            else:
                worker.container.kill()  # type: ignore[attr-defined]
        time.sleep(0.5)  # the daemon closes the attach streams as the containers exit
        assert values(fresh, "import numpy\ndef f():\n    return int(numpy.int64(3))\n", ["f()", "f()"]) == [3, 3]
        assert not set(idle) & fresh._all
    finally:
        fresh.close()
