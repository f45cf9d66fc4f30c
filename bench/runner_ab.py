"""Paired A/B of sandbox runner files: cold scoring rounds alternating between runners, in one process.

    python bench/runner_ab.py RUNNER.py [RUNNER.py ...] [--rounds 12] [--tasks FILE.jsonl] [--jobs N]

Full runs of bench/score_backend.py on a 2-core machine differ by up to 10% from one run to the next, so a runner
change worth a few percent cannot be seen by comparing two of them. This script starts one bubblewrap sandbox per
runner file, all warm before the first round. It then scores the task file's reference answers cold (a new
scorer each round, so an empty reference cache) on each sandbox in turn, reversing the order every other round. It
prints each runner's tasks/s per round and the median of its per-round ratios to the first runner. The first
runner file is the baseline, e.g. ``git show HEAD~1:sandbox/runner.py > /tmp/old.py``. Every runner file must
speak the host's protocol (this checkout's ``colbench.sandbox.pool``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox import bwrap
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.pool import default_workers
from colbench.tasks import load_jsonl

DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"


def start(runner: Path, workers: int) -> BwrapSandbox:
    """A warm sandbox whose workers run ``runner`` (bound where the runner always is, so nothing else differs)."""
    real = bwrap.contract.runner_path
    bwrap.contract.runner_path = lambda: runner  # read while the workers start, by bwrap_argv
    try:
        sandbox = BwrapSandbox(workers=workers)
        sandbox.warm()
    finally:
        bwrap.contract.runner_path = real
    return sandbox


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runners", nargs="+", type=Path, help="runner files; the first is the baseline")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--tasks", default=str(DEFAULT_TASKS))
    parser.add_argument("--jobs", type=int, default=None, help="workers per pool (default: the sandbox's)")
    args = parser.parse_args()
    missing = [str(p) for p in [*args.runners, Path(args.tasks)] if not p.is_file()]
    if missing:
        print(f"not a file: {', '.join(missing)}", file=sys.stderr)
        return 2
    tasks = load_jsonl(args.tasks)
    answers = ["I WANT TO ANSWER:\n" + t.ground_truth for t in tasks]
    workers = args.jobs or default_workers()
    sandboxes = [start(runner.resolve(), workers) for runner in args.runners]
    rates: list[list[float]] = [[] for _ in sandboxes]
    try:
        for r in range(args.rounds):
            order = list(range(len(sandboxes)))
            for k in order if r % 2 == 0 else reversed(order):
                scorer = BackendScorer(sandboxes[k])
                started = time.perf_counter()
                with ThreadPoolExecutor(workers) as pool:
                    list(pool.map(scorer.score, tasks, answers))
                rates[k].append(len(tasks) / (time.perf_counter() - started))
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    print(f"{len(tasks)} tasks a round, {args.rounds} cold rounds, {workers} workers per pool")
    for runner, rs in zip(args.runners, rates, strict=True):
        paired = statistics.median(b / a for a, b in zip(rates[0], rs, strict=True))
        rounds = " ".join(f"{x:.0f}" for x in rs)
        print(f"{runner!s:<40} median {statistics.median(rs):7.1f} tasks/s  paired ratio {paired:.3f}  [{rounds}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
