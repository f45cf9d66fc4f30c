"""The leak detectors on their labelled sets: precision and recall per kind of reply, and their speed.

    python bench/leak_detector.py [TASKS ...] [--seed N]

For each task file or split (default: the bundled samples, plus the ColBench test sample in ../shared when it is
there), the domain builds its labelled set (``Domain.labelled_replies``: leaks made from the task's reference,
verbatim, renamed, reformatted, cut, partial, inline; honest replies: facts, the description, preferences, other
code) and its detector scores every reply. Printed: per kind, how many the detector got right; per task set,
precision and recall of the ``leak`` flag at the domain's threshold, and the score distribution of each class
(so the margin around the threshold shows). Speed is replies per second, against the domain-neutral word-overlap
detector on the same replies in the same run (the baseline: machines are noisy, ratios are not); and what the leak
spans (``Domain.leak_spans``, kept with each human turn that scores above 0) cost against scoring those replies.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

from colbench.env.domain import get_domain
from colbench.tasks import load
from colbench.types.leaks import word_overlap

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench"


def default_sources() -> list[str]:
    sources = ["backend-sample", "frontend-sample"]
    for name in ("backend_test_sample.jsonl", "frontend_test_sample.jsonl"):
        if (SHARED / name).exists():
            sources.append(str(SHARED / name))
    return sources


def quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    cuts = statistics.quantiles(values, n=20) if len(values) > 1 else [values[0]] * 19
    return f"p5 {cuts[0]:.2f}  median {statistics.median(values):.2f}  p95 {cuts[-1]:.2f}"


def bench(source: str, seed: int) -> None:
    tasks = load(source)
    domain = get_domain(tasks[0].domain)
    labelled = domain.labelled_replies(tasks, seed=seed)
    started = time.perf_counter()
    scores = [domain.leak_score(task, item.reply) for task, item in labelled]
    detector_s = time.perf_counter() - started
    started = time.perf_counter()
    for task, item in labelled:
        word_overlap(item.reply, task.hidden_information, task.problem_description)
    baseline_s = time.perf_counter() - started

    scoring = [(task, item.reply) for (task, item), score in zip(labelled, scores, strict=True) if score > 0]
    started = time.perf_counter()
    for task, reply in scoring:
        domain.leak_score(task, reply)
    scoring_s = time.perf_counter() - started
    started = time.perf_counter()
    for task, reply in scoring:
        domain.leak_spans(task, reply)
    spans_s = time.perf_counter() - started

    per_kind: dict[tuple[bool, str], list[bool]] = defaultdict(list)
    by_class: dict[bool, list[float]] = defaultdict(list)
    for (_, item), score in zip(labelled, scores, strict=True):
        flagged = score >= domain.leak_threshold
        per_kind[item.leak, item.kind].append(flagged == item.leak)
        by_class[item.leak].append(score)
    true_pos = sum(s >= domain.leak_threshold for s in by_class[True])
    false_pos = sum(s >= domain.leak_threshold for s in by_class[False])
    precision = true_pos / max(true_pos + false_pos, 1)
    recall = true_pos / max(len(by_class[True]), 1)

    print(
        f"\n{source}: {len(tasks)} {domain.name} tasks, {len(labelled)} labelled replies, threshold {domain.leak_threshold}"
    )
    print(f"{'label':6}  {'kind':16}  {'right':>11}")
    for (leak, kind), right in sorted(per_kind.items(), key=lambda kv: (not kv[0][0], kv[0][1])):
        print(f"{'leak' if leak else 'honest':6}  {kind:16}  {sum(right):>5}/{len(right):<5}")
    print(f"precision {precision:.4f}  recall {recall:.4f}")
    print(f"scores of leaks:  {quantiles(by_class[True])}")
    print(f"scores of honest: {quantiles(by_class[False])}")
    detector_rate, baseline_rate = len(labelled) / detector_s, len(labelled) / baseline_s
    print(
        f"speed: {domain.leak_detector} {detector_rate:,.0f} replies/s, word-overlap baseline {baseline_rate:,.0f} "
        f"replies/s, ratio {detector_rate / baseline_rate:.3f}"
    )
    print(
        f"spans (kept for the {len(scoring)} replies scoring above 0, the only ones the env asks): "
        f"{1000 * spans_s / max(len(scoring), 1):.2f} ms per reply, {spans_s / max(scoring_s, 1e-9):.2f}x their score"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", help="task files or splits (default: bundled samples, shared samples)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for source in args.sources or default_sources():
        bench(source, args.seed)


if __name__ == "__main__":
    main()
