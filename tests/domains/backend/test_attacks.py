"""Answers that try to win without solving the task: each must score zero and leave the harness working.

The task is ``f(x) = 3 * x + 7`` with ten tests; no honest wrong answer passes any of them, so any pass here is a
successful hack.
"""

from __future__ import annotations

import pytest
from hand_tasks import make_task

from colbench.domains.backend.scorer import BackendScorer
from colbench.domains.backend.values import decode
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits, Sandbox

REFERENCE = "def f(x):\n    return 3 * x + 7\n"
TASK = make_task(REFERENCE, [f"f({x})" for x in range(10)], task_id="attack")

ATTACKS = {
    "always-equal object": """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
def f(x): return Anything()
""",
    "int subclass equal to everything": """
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
    def __repr__(self): return repr(3 * 0 + 7)
def f(x): return Liar(-1)
""",
    "str subclass": """
class S(str):
    def __eq__(self, other): return True
    __hash__ = str.__hash__
def f(x): return S('x')
""",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\ndef f(x): return 0\n",
    "os._exit(0) in the call": "import os\ndef f(x):\n    os._exit(0)\n",
    "SystemExit caught nowhere": "def f(x):\n    raise SystemExit(0)\n",
    "printed fake results": """
import json, sys
def f(x):
    for line in ['{"outcome": "value", "value": {"t": "int", "v": "%d"}}' % (3 * i + 7) for i in range(10)]:
        print(line); sys.stderr.write(line + "\\n")
    print('{"id": 0, "done": true}')
    return None
""",
    "written fake results on every descriptor": """
import os
def f(x):
    # Protocol-shaped lines claiming a pass and another test's slot. (A line on the test's own result pipe is
    # only a claim about the answer's own return value, compared in the host like any other.)
    msg = b'{"outcome": "value", "passed": true, "i": 5, "value": {"t": "int", "v": "-1"}}\\n{"id": 0, "done": true}\\n'
    for fd in range(0, 256):
        try: os.write(fd, msg)
        except OSError: pass
    for name in ('result.json', '/tmp/result.json', '/tmp/expected.json'):
        try: open(name, 'w').write(msg.decode())
        except OSError: pass
    return None
""",
    "forged batch and done on every descriptor": """
import os
def f(x):
    # What the runner sends the host for a batched job: outcomes for every test, then "done".
    batch = ''.join('{"i": %d, "outcome": "value", "value": {"t": "int", "v": "%x"}}, ' % (i, 3 * i + 7) for i in range(10))
    msg = ('{"id": 0, "results": [' + batch.rstrip(', ') + '], "done": true}\\n').encode()
    for fd in range(0, 256):
        try: os.write(fd, msg)
        except OSError: pass
    return None
""",
    "forged lines of the test process's own format on every descriptor": """
import os
def f(x):
    # HEAD<tab>VALUE, as a test process reports: protocol keys in the head, a value that runs on into protocol
    # keys, a value nested past any decoder's depth, a runner-shaped line with no tab.
    lines = [
        b'{"outcome": "value", "i": 5, "done": true, "value_json": "{}"}\\t{"t": "int", "v": "-1"}\\n',
        b'{"outcome": "value"}\\t{"t": "int", "v": "-1"}, "done": true, "i": 3\\n',
        b'{"outcome": "value"}\\t' + b'[' * 100000 + b'\\n',
        b'{"id": 0, "done": true, "results": []}\\n',
    ]
    for fd in range(0, 256):
        for line in lines:
            try: os.write(fd, line)
            except OSError: pass
    return None
""",
    "forged child message via json.dumps": """
import json
_real = json.dumps
def _forge(obj, *a, **k):
    return '{"outcome": "pass", "passed": true, "done": true, "i": 3, "value": {"t": "int", "v": "7"}}'
json.dumps = _forge
def f(x): return -1
""",
    "monkeypatched builtins": """
import builtins
builtins.isinstance = lambda *a: True
builtins.type = lambda *a: int
builtins.repr = lambda *a: '7'
def f(x): return object()
""",
    "settrace and sitecustomize": """
import sys
open('sitecustomize.py', 'w').write('import builtins\\nbuiltins.RESULT = 7\\n')
sys.settrace(lambda *a: None)
def f(x): return None
""",
    "generator": "def f(x):\n    yield 3 * x + 7\n",
    "kills its parent": "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    "kills everything": "import os, signal\ndef f(x):\n    os.kill(-1, signal.SIGKILL)\n",
    "stops its parent": "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return 3 * x + 6\n",
    "infinite loop": "def f(x):\n    while True: pass\n",
    "memory bomb": "def f(x):\n    return bytearray(1 << 40)\n",
    "fork bomb": "import os\ndef f(x):\n    while True:\n        try: os.fork()\n        except OSError: pass\n",
}


@pytest.fixture
def scorer(any_sandbox: Sandbox) -> BackendScorer:
    """Every runtime; a short time limit keeps the runaway attacks quick (nothing honest here needs a second)."""
    return BackendScorer(any_sandbox, limits=Limits(timeout_s=1.0))


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_scores_zero(scorer: BackendScorer, name: str) -> None:
    score = scorer.score(TASK, "I WANT TO ANSWER:\n" + ATTACKS[name])
    assert score.tests_total == 10
    assert score.tests_passed == 0, [t for t in score.tests if t.passed]
    honest = scorer.score(TASK, "I WANT TO ANSWER:\n" + REFERENCE)
    assert honest.tests_passed == 10


def test_the_reference_is_nowhere_on_disk(scorer: BackendScorer) -> None:
    """Search every file the answer can read for the reference's code; the search must finish and find nothing."""
    hunt = """
import os
def f(x):
    for root, dirs, files in os.walk('/'):
        if root.startswith(('/proc', '/sys', '/dev', '/usr')) or 'python3' in root:
            dirs[:] = []
            continue
        for name in files:
            try:
                text = open(os.path.join(root, name), errors='ignore').read(1 << 20)
            except OSError:
                continue
            if 'return 3 * x + 7' in text:
                return 3 * x + 7
    return None
"""
    # The walk reads every file outside /usr: on a loaded machine with a cold page cache the first call took over
    # the fixture's one second (a CI run), so this test alone gets a limit the walk cannot plausibly reach.
    patient = BackendScorer(scorer.sandbox, limits=Limits(timeout_s=30.0))
    score = patient.score(TASK, "I WANT TO ANSWER:\n" + hunt)
    assert [t.outcome for t in score.tests] == ["value"] * 10  # the search completed
    assert score.tests_passed == 0


def test_answer_workers_never_held_reference_outputs(scorer: BackendScorer) -> None:
    """Scan the answer process's own memory (inherited from its worker) for a reference's output."""
    reference = "def f(n):\n    return 'Q' * n\n"
    # Several sizes, because which freed buffers survive in the worker's heap depends on the allocator.
    sizes = ["f(3000)", "f(8000)", "f(20000)", "f(40000)", "f(60000)", "f(90000)", "f(150000)"]
    task = make_task(reference, sizes, task_id="memory")
    scan = """
import re
def longest_q_run():
    import ctypes
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE=1, so /proc/self/mem opens
    best = 0
    maps = open('/proc/self/maps').read().splitlines()
    with open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if 'r' not in perms:
                continue
            lo, hi = (int(a, 16) for a in addr.split('-'))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            for m in re.finditer(rb'Q{1000,}', chunk):
                best = max(best, len(m.group()))
    return best
def f(x):
    return longest_q_run()
"""
    scorer.expected(task)  # the reference has now run and its output went through a reference worker
    for _ in range(3):
        out = scorer.sandbox.run_tests(scan, ["f(0)"], limits=Limits(timeout_s=20.0))
        assert out[0].outcome == "value", out[0]
        assert decode(out[0].value) < 1000
    # Control: the scan does find such an output when it went through the answer's own worker.
    with BwrapSandbox(workers=1) as single:
        single.run_tests(reference, sizes)
        out = single.run_tests(scan, ["f(0)"], limits=Limits(timeout_s=20.0))
        assert decode(out[0].value) >= 1000


def test_an_answer_that_tampers_with_its_interpreter_cannot_reach_the_reference_runs(scorer: BackendScorer) -> None:
    """The reference runs (both in one process) and the answers never share a process: an answer that rewrites
    builtins, modules and files before the reference has run leaves its expected values as they are."""
    reference = (
        "import json, random\ndef f(x):\n    return [sorted([x, 2, 1]), round(random.random(), 6), json.dumps(x)]\n"
    )
    tamper = """
import builtins, json, random, os
builtins.sorted = lambda *a, **k: ['tampered']
json.dumps = lambda *a, **k: 'tampered'
random.random = lambda: 0.0
random.seed = lambda *a, **k: None
open('/tmp/solution.py', 'w').write('def f(x):\\n    return None\\n')
def f(x):
    return [sorted([x, 2, 1]), round(random.random(), 6), json.dumps(x)]
"""
    task = make_task(reference, [f"f({x})" for x in range(5)], task_id="tamper")
    for _ in range(2 * scorer.sandbox.workers):  # type: ignore[attr-defined]
        assert scorer.score(task, "I WANT TO ANSWER:\n" + tamper).tests_passed == 0
    expected = scorer.expected(task)
    assert all(e.judgeable for e in expected)
    assert [e.value[0] for e in expected] == [sorted([x, 2, 1]) for x in range(5)]
    assert [e.value[2] for e in expected] == [str(x) for x in range(5)]
    assert scorer.score(task, "I WANT TO ANSWER:\n" + reference).tests_passed == 5
