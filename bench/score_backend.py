"""Scoring throughput: the local sandbox against plain in-process ``exec`` (the original's unsafe way), one run.

    python bench/score_backend.py [TASKS.jsonl] [--jobs N]

Scores every task's reference solution as the answer. Three measurements, each in tasks per second:

* ``exec``: the original release's approach, in this process: exec the reference and the answer, eval each test,
  compare with ``==``. No isolation, no time limits; the baseline every ratio is against.
* ``sandbox cold``: the local sandbox with an empty reference cache (each reference runs twice to check
  determinism, then the answer runs), ``--jobs`` workers.
* ``sandbox warm``: the same answers again with the reference outputs cached (the RL-training case).

Machines differ and are noisy: compare the ratios, which are measured in one run on one machine.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from colbench.sandbox.local import LocalSandbox
from colbench.scoring.backend import BackendScorer
from colbench.tasks import Task, load_tasks

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
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if not Path(args.tasks).exists():
        print(f"no task file at {args.tasks}: pass a ColBench backend JSONL", file=sys.stderr)
        return 2
    tasks = load_tasks(args.tasks)
    answers = ["I WANT TO ANSWER:\n" + t.ground_truth for t in tasks]

    with tempfile.TemporaryDirectory() as scratch:
        cwd = os.getcwd()
        os.chdir(scratch)  # references write files into their working directory
        try:
            started = time.perf_counter()
            unsafe_passed = sum(unsafe_exec_score(t, t.ground_truth) for t in tasks)
            unsafe_s = time.perf_counter() - started
        finally:
            os.chdir(cwd)

    with LocalSandbox(workers=args.jobs) as sandbox:
        scorer = BackendScorer(sandbox)
        sandbox.run_tests("x = 1", ["x"])  # start one worker so start-up is not billed to the first task
        timings = {}
        for label in ("cold", "warm"):
            started = time.perf_counter()
            with ThreadPoolExecutor(args.jobs) as pool:
                scores = list(pool.map(scorer.score, tasks, answers))
            timings[label] = time.perf_counter() - started
    sandbox_passed = sum(s.tests_passed for s in scores)

    n = len(tasks)
    base = rate(n, unsafe_s)
    print(
        f"{n} tasks, {sum(len(t.test_cases) for t in tasks)} tests, {args.jobs} sandbox workers, {os.cpu_count()} cores"
    )
    print(f"{'mode':<14}{'tasks/s':>10}{'ratio to exec':>16}{'tests passed':>15}")
    print(f"{'exec (unsafe)':<14}{base:>10.1f}{1.0:>16.3f}{unsafe_passed:>15}")
    for label, seconds in timings.items():
        r = rate(n, seconds)
        print(f"{'sandbox ' + label:<14}{r:>10.1f}{r / base:>16.3f}{sandbox_passed:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
