"""The near-duplicate detector of backend references on the ColBench test sample: its calibration and its speed.

    python bench/near_duplicates.py [TASKS] [--seed N]

TASKS is a backend task file or split (default: the 300-task ColBench test sample in ../shared when present, else
the bundled sample). Printed:

- the **false-positive side**: for every task, the score of its nearest *other* task (distinct tasks of ColBench);
- the **true-positive side**: for every task and every kind of disguised copy (``near_copies``: renamed,
  reformatted, commented, reordered, loop swapped, branch swapped, literal changed, all cosmetic edits at once),
  the score of the copy against its original;
- precision and recall of ``DUPLICATE_THRESHOLD`` with the index: each copy is a query whose original is indexed
  (found = its original scores at or above the threshold), each task a query against the others (flagged = a
  false positive);
- the time per candidate (``nearest``, what ``tasks generate`` asks of every candidate) against the index of all
  the tasks, against the baseline of scoring the candidate with ``similarity`` against every fingerprint in turn (same run, same machine: the ratio is what counts).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path

from colbench.domains.backend.near_copies import KINDS, near_copies
from colbench.domains.backend.near_duplicates import (
    DUPLICATE_THRESHOLD,
    NearDuplicateIndex,
    code_fingerprint,
    similarity,
)
from colbench.tasks import load

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"


def distribution(values: list[float]) -> str:
    if len(values) < 2:
        return "-" if not values else f"{values[0]:.2f}"
    cuts = statistics.quantiles(values, n=20)
    return (
        f"min {min(values):.2f}  p5 {cuts[0]:.2f}  p25 {cuts[4]:.2f}  median {statistics.median(values):.2f}  "
        f"p75 {cuts[14]:.2f}  p95 {cuts[-1]:.2f}  max {max(values):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", default=str(SAMPLE) if SAMPLE.exists() else "backend-sample")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tasks = load(args.tasks)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    index = NearDuplicateIndex(tasks)
    build_s = time.perf_counter() - started
    prints = [code_fingerprint(task.ground_truth) for task in tasks]
    print(f"{len(tasks)} tasks from {args.tasks}; threshold {DUPLICATE_THRESHOLD}; index built in {build_s:.2f}s")

    nearest_other, flagged = [], 0
    for task, fingerprint in zip(tasks, prints, strict=True):
        others = [n for n in index.above(fingerprint, 0.0) if n.task_id != task.task_id]
        score = others[0].similarity.score if others else 0.0
        nearest_other.append(score)
        flagged += score >= DUPLICATE_THRESHOLD
    print("\nfalse-positive side: each task's nearest other task")
    print(f"  {'distinct tasks':<16} n={len(tasks):<5} {distribution(nearest_other)}")
    print(f"  flagged as duplicates: {flagged} of {len(tasks)} ({flagged / len(tasks):.1%})")

    copies = [(task, copy) for task in tasks for copy in near_copies(task.ground_truth, rng)]
    scores: dict[str, list[float]] = defaultdict(list)
    found: dict[str, list[bool]] = defaultdict(list)
    candidates = [code_fingerprint(copy.code) for _, copy in copies]
    started = time.perf_counter()
    for fingerprint in candidates:
        index.nearest(fingerprint)
    index_s = time.perf_counter() - started
    answers = [index.above(fingerprint) for fingerprint in candidates]
    for (task, copy), fingerprint, ranked in zip(copies, candidates, answers, strict=True):
        scores[copy.kind].append(similarity(code_fingerprint(task.ground_truth), fingerprint).score)
        found[copy.kind].append(any(n.task_id == task.task_id and n.similarity.duplicate for n in ranked))
    print("\ntrue-positive side: each disguised copy against its original")
    for kind in KINDS:
        if scores[kind]:
            recall = sum(found[kind]) / len(found[kind])
            print(f"  {kind:<16} n={len(scores[kind]):<5} {distribution(scores[kind])}  recall {recall:.1%}")
    true_positives = sum(sum(hits) for hits in found.values())
    positives = sum(len(hits) for hits in found.values())
    precision = true_positives / (true_positives + flagged) if true_positives + flagged else 0.0
    print(
        f"\nat threshold {DUPLICATE_THRESHOLD}: precision {precision:.1%} "
        f"({true_positives} copies found, {flagged} distinct tasks flagged), recall {true_positives / positives:.1%} "
        f"({positives} copies)"
    )

    sample = candidates[: min(len(candidates), 300)]
    started = time.perf_counter()
    for fingerprint in sample:
        max(similarity(fingerprint, other).score for other in prints)
    brute_s = time.perf_counter() - started
    per_candidate = index_s / len(candidates)
    brute_per = brute_s / len(sample)
    print(
        f"\ntime per candidate against the {len(tasks)}-task index: {per_candidate * 1e3:.2f} ms "
        f"(baseline, similarity against each task in turn: {brute_per * 1e3:.2f} ms; ratio {brute_per / per_candidate:.1f}x)"
    )


if __name__ == "__main__":
    main()
