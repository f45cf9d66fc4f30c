"""What validating a generated candidate costs (every sandbox gate of ``colbench tasks generate``) against scoring its
reference once, the baseline, in the same run on the same warm sandbox; and, apart, what giving a kept candidate
its plus tests costs (the augmenter, run on candidates that passed every gate).

    python bench/generate_validate.py [TASKS.jsonl] [--n 100] [--workers 2] [--jobs 1,2] [--rounds 3]

Candidates: the tasks of a sample (default: the 300-task ColBench test sample in ../shared, what a generator is
asked to write like; else the bundled backend sample), each turned into a candidate (its id and a comment in its
reference changed, so no reference is cached across candidates or rounds), cycled to ``--n``, with every fifth one
made bad (its tests cut to one: the mutation gate rejects it).

The sandbox is warmed first (its workers started and a few references scored), so neither side pays the start-up.
Then, for each ``--jobs`` value (candidates handled at once: 1 is one candidate's latency, the sandbox's worker
count is how ``colbench tasks generate`` runs them, its default ``--jobs`` being the CPU count), ``--rounds``
rounds each score every candidate's reference once and then validate every candidate, one after the other; the
medians over the rounds are printed with their ratio (the target, docs/generate.md: at most 5x).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from colbench.domains.backend.generate.gates import Verdict, add_plus_tests, validate
from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits
from colbench.tasks.rows import load_jsonl
from colbench.types.task import Task

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"
LIMITS = Limits(timeout_s=3.0)


def candidates(tasks: Sequence[Task], n: int, tag: str) -> list[Task]:
    """``n`` candidates from ``tasks``, each reference made new to the scorer's cache by ``tag``."""
    made = []
    for i in range(n):
        base = tasks[i % len(tasks)]
        task = replace(base, task_id=f"candidate-{i}", ground_truth=f"{base.ground_truth}\n# candidate {i} {tag}\n")
        if i % 5 == 4:
            task = replace(task, test_cases=task.test_cases[:1])
        made.append(task)
    return made


def per_candidate(work: Callable[[Task], Any], tasks: Sequence[Task], jobs: int) -> tuple[float, list[Any]]:
    """Seconds per candidate of ``work`` over ``tasks``, ``jobs`` at once, and its results."""
    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(work, tasks))
    return (time.perf_counter() - start) / len(tasks), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="?", type=Path, default=SHARED if SHARED.exists() else BUNDLED)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", default="1,2", help="candidates at once, a comma-separated list")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tasks = load_jsonl(args.tasks)
    sandbox = BwrapSandbox(workers=args.workers, limits=LIMITS)
    verdicts: list[Verdict] = []
    try:
        sandbox.warm()
        warm = BackendScorer(sandbox, limits=LIMITS)
        for task in candidates(tasks, 10, "warm-up"):
            warm.score(task, task.ground_truth)
        print(
            f"{args.n} candidates from {args.tasks.name} ({min(len(tasks), args.n)} tasks, every fifth with one "
            f"test left); {args.workers} sandbox workers, medians of {args.rounds} rounds"
        )
        for jobs in (int(j) for j in args.jobs.split(",")):
            baselines, gates = [], []
            for r in range(args.rounds):
                scorer = BackendScorer(sandbox, limits=LIMITS)
                seconds, _ = per_candidate(
                    lambda t, s=scorer: s.score(t, t.ground_truth), candidates(tasks, args.n, f"b{jobs}.{r}"), jobs
                )
                baselines.append(seconds)
                scorer = BackendScorer(sandbox, limits=LIMITS)
                seconds, verdicts = per_candidate(
                    lambda t, s=scorer: validate(t, s), candidates(tasks, args.n, f"g{jobs}.{r}"), jobs
                )
                gates.append(seconds)
            baseline, gate = statistics.median(baselines), statistics.median(gates)
            print(
                f"--jobs {jobs}: baseline (score the reference once) {1000 * baseline:.1f} ms, all sandbox gates "
                f"{1000 * gate:.1f} ms per candidate; ratio {gate / baseline:.1f}x (target: at most 5x; rounds: "
                + ", ".join(f"{g / b:.1f}x" for b, g in zip(baselines, gates, strict=True))
                + ")"
            )
        passed = [v for v in verdicts if not v.gate]
        scorer = BackendScorer(sandbox, limits=LIMITS)
        augment, _ = per_candidate(lambda v: add_plus_tests(v, scorer), passed, 1) if passed else (0.0, [])
        counts = Counter(v.gate or "kept" for v in verdicts)
        lower = sum(not v.mutation_witnessed for v in verdicts if v.mutation_score is not None)
    finally:
        sandbox.close()
    print(
        f"plus tests for the {len(passed)} that passed every gate: {1000 * augment:.0f} ms per candidate, "
        f"{augment / baseline:.1f}x the last baseline"
    )
    print(f"mutation scores settled without the equivalence probes (a lower bound): {lower}")
    print("verdicts: " + ", ".join(f"{gate} {n}" for gate, n in counts.most_common()))


if __name__ == "__main__":
    main()
