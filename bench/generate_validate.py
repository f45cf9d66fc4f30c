"""What validating a generated candidate costs (every sandbox gate of ``colbench tasks generate``) against scoring its
reference once, the baseline, in the same run on the same sandbox; and, apart, what giving a kept candidate its
plus tests costs (the augmenter, run on candidates that passed every gate).

    python bench/generate_validate.py [TASKS.jsonl] [--n 100] [--workers 2]

Candidates: the tasks of a sample (default: the 300-task ColBench test sample in ../shared, what a generator is
asked to write like; else the bundled backend sample), each turned into a candidate (its id and a comment in its
reference changed, so no reference is cached across candidates), cycled to ``--n``, with every fifth one made bad
(its tests cut to one: the mutation gate rejects it). Printed: the time per candidate of the gates and of the
baseline, their ratio (the target, docs/generate.md: at most 5x), the augmentation's time per kept candidate and
its ratio, and the verdicts.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from colbench.domains.backend.generate.gates import add_plus_tests, validate
from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits
from colbench.tasks.rows import load_jsonl

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="?", type=Path, default=SHARED if SHARED.exists() else BUNDLED)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tasks = load_jsonl(args.tasks)
    candidates = []
    for i in range(args.n):
        base = tasks[i % len(tasks)]
        task = replace(base, task_id=f"candidate-{i}", ground_truth=f"{base.ground_truth}\n# candidate {i}\n")
        if i % 5 == 4:
            task = replace(task, test_cases=task.test_cases[:1])
        candidates.append(task)
    sandbox = BwrapSandbox(workers=args.workers, limits=Limits(timeout_s=3.0))
    try:
        baseline_scorer = BackendScorer(sandbox, limits=Limits(timeout_s=3.0))
        start = time.perf_counter()
        for task in candidates:
            baseline_scorer.score(task, task.ground_truth)
        baseline = (time.perf_counter() - start) / len(candidates)
        gates_scorer = BackendScorer(sandbox, limits=Limits(timeout_s=3.0))
        start = time.perf_counter()
        verdicts = [validate(task, gates_scorer) for task in candidates]
        gates = (time.perf_counter() - start) / len(candidates)
        passed = [v for v in verdicts if not v.gate]
        start = time.perf_counter()
        for verdict in passed:
            add_plus_tests(verdict, gates_scorer)
        augment = (time.perf_counter() - start) / max(len(passed), 1)
        counts = Counter(v.gate or "kept" for v in verdicts)
        lower = sum(not v.mutation_witnessed for v in verdicts if v.mutation_score is not None)
    finally:
        sandbox.close()
    print(
        f"{len(candidates)} candidates from {args.tasks.name} ({min(len(tasks), len(candidates))} tasks, every fifth with one test left)"
    )
    print(f"baseline (score the reference once): {1000 * baseline:.0f} ms per candidate")
    print(f"all sandbox gates:                    {1000 * gates:.0f} ms per candidate")
    print(f"ratio: {gates / baseline:.1f}x (target: at most 5x)")
    print(
        f"plus tests for the {len(passed)} that passed every gate: {1000 * augment:.0f} ms per candidate, "
        f"{augment / baseline:.1f}x the baseline"
    )
    print(
        f"gates and plus tests, per kept candidate: {(gates * len(candidates) / max(len(passed), 1) + augment) / baseline:.1f}x"
    )
    print(f"mutation scores settled without the equivalence probes (a lower bound): {lower}")
    print("verdicts: " + ", ".join(f"{gate} {n}" for gate, n in counts.most_common()))


if __name__ == "__main__":
    main()
