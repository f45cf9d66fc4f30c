"""Scoring throughput and latency: each sandbox runtime against plain in-process ``exec``, in one run.

    python bench/score_backend.py [TASKS.jsonl] [--jobs N] [--runtimes bwrap,docker]

Scores every task's reference solution as the answer. Measured, in tasks per second:

* ``exec``: the original release's approach, in this process: exec the reference and the answer, eval each test,
  compare with ``==``. No isolation, no time limits; the baseline every ratio is against (the fastest of
  ``EXEC_ROUNDS`` rounds: a stray load spike on the machine should not flatter the ratios).
* ``<runtime> cold``: an empty reference cache (each reference runs twice to check determinism, both runs in one
  sandbox process, then the answer runs in another: two sandbox jobs, two processes per task), ``--jobs`` workers
  per pool (default: the sandbox's own default), all started before the clock starts (a pool starts once per
  process; its start-up is not a per-task cost), as many answers scored at once.
* ``<runtime> warm``: the same answers again with the reference outputs cached (the RL-training case).

Then the latency of one scoring call on a warm pool (reference cached, one call at a time): p50 and p99.
Machines differ and are noisy: compare the ratios, which are measured in one run on one machine.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox import make_sandbox
from colbench.sandbox.pool import WorkerPool, default_workers
from colbench.tasks import Task, load_jsonl

EXEC_ROUNDS = 3
DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"


def unsafe_exec_score(task: Task, code: str) -> int:
    """What the original release did (minus its blocklist): everything in this process."""
    passed = 0
    for _, expr in task.test_cases:
        try:
            random.seed(0)
            ref_ns: dict[str, object] = {}
            exec(task.ground_truth, ref_ns)
            expected = eval(expr, ref_ns)
            random.seed(0)
            ans_ns: dict[str, object] = {}
            exec(code, ans_ns)
            got = eval(expr, ans_ns)
            passed += bool(expected == got)
        except Exception:
            pass
    return passed


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", default=str(DEFAULT_TASKS))
    parser.add_argument("--jobs", type=int, default=None, help="sandbox workers per pool (default: the sandbox's)")
    parser.add_argument("--runtimes", default="bwrap,docker", help="comma-separated: bwrap, docker")
    args = parser.parse_args()
    if not Path(args.tasks).exists():
        print(f"no task file at {args.tasks}: pass a ColBench backend JSONL", file=sys.stderr)
        return 2
    tasks = load_jsonl(args.tasks)
    answers = ["I WANT TO ANSWER:\n" + t.ground_truth for t in tasks]

    with tempfile.TemporaryDirectory() as scratch:
        cwd = os.getcwd()
        os.chdir(scratch)  # references write files into their working directory
        warnings.simplefilter("ignore")  # numpy warnings from references (NaN) would clutter the table
        try:
            unsafe_s = math.inf
            for _ in range(EXEC_ROUNDS):
                started = time.perf_counter()
                unsafe_passed = sum(unsafe_exec_score(t, t.ground_truth) for t in tasks)
                unsafe_s = min(unsafe_s, time.perf_counter() - started)
        finally:
            os.chdir(cwd)

    n = len(tasks)
    base = rate(n, unsafe_s)
    workers = args.jobs or default_workers()
    print(
        f"{n} tasks, {sum(len(t.test_cases) for t in tasks)} tests, {workers} sandbox workers per pool, "
        f"{os.cpu_count()} cores"
    )
    print(f"{'mode':<16}{'tasks/s':>10}{'ratio to exec':>16}{'tests passed':>15}")
    print(f"{'exec (unsafe)':<16}{base:>10.1f}{1.0:>16.3f}{unsafe_passed:>15}")
    latencies = {}
    for runtime in args.runtimes.split(","):
        sandbox = make_sandbox(runtime, workers=workers)
        assert isinstance(sandbox, WorkerPool)
        try:
            scorer = BackendScorer(sandbox)
            sandbox.warm()  # start every worker of both pools, so start-up is not billed to the first tasks
            for label in ("cold", "warm"):
                started = time.perf_counter()
                with ThreadPoolExecutor(workers) as pool:
                    scores = list(pool.map(scorer.score, tasks, answers))
                r = rate(n, time.perf_counter() - started)
                passed = sum(s.tests_passed for s in scores)
                print(f"{runtime + ' ' + label:<16}{r:>10.1f}{r / base:>16.3f}{passed:>15}", flush=True)
            one = []
            for task, answer in zip(tasks, answers, strict=True):
                started = time.perf_counter()
                scorer.score(task, answer)
                one.append(time.perf_counter() - started)
            latencies[runtime] = one
        finally:
            sandbox.close()
    for runtime, one in latencies.items():
        ms = sorted(x * 1000 for x in one)
        p50, p99 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(f"latency of one scoring call, {runtime} warm pool: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
