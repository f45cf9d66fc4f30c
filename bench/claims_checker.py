"""The backend claims checker on a labelled set: how often it catches a false claim, how often it cries wolf, and
what it costs.

    python bench/claims_checker.py [--tasks FILE_OR_SPLIT] [--limit N] [--seed N] [--show N]

The set (``bench/claims_labelled.py``): for each task (default: the 300-task ColBench test sample in ../shared when
it is there, else the bundled sample), replies with true claims, false claims (near misses of the reference's
value) and none, in many phrasings, labelled by running the reference on the task's own test calls. The checker
(``check_rows`` with ``DOMAIN.claim_checker``, on a scorer of its own, so nothing it settles is cached from the
set's making) then reads every reply. Printed:

- recall: the share of replies holding a false claim that it flags untrue, per phrasing and per perturbation;
- false alarms: the share of true-claim replies, and of claim-free ones, that it flags untrue, per phrasing (the
  share of true claims it settled as true, too: what it reads);
- cost: finding claims in a claim-free reply on the host (``checker.find``), per reply and as a ratio against the
  leak score of the same replies in the same run (``DOMAIN.leak_score``: machines are noisy, ratios are not); and a
  reply with claims, settling included (one sandbox request per task).

``--show N`` prints up to N misses and N false alarms, with what the checker read.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claims_labelled import Labelled, labelled_claims

from colbench.domains.backend import DOMAIN
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.claim_check import ClaimChecker, check_rows
from colbench.sandbox import make_sandbox
from colbench.tasks import load
from colbench.types.claims import Claim, untrue
from colbench.types.task import Task

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
TARGETS = {"recall": 0.90, "false_alarms": 0.02, "claim_free_ms": 1.0}


def share(flags: list[bool]) -> str:
    return f"{sum(flags):>5}/{len(flags):<5} {sum(flags) / max(len(flags), 1):6.1%}"


def figures(rows: list[tuple[Task, Labelled]], results: list[tuple[Claim, ...]]) -> dict[str, float]:
    """Recall and false-alarm rates of ``results`` on ``rows`` (the bench's test reads these too)."""
    by_label: dict[str, list[bool]] = defaultdict(list)
    for (_, item), claims in zip(rows, results, strict=True):
        by_label[item.label].append(untrue(claims))
    return {
        "recall": sum(by_label["false"]) / max(len(by_label["false"]), 1),
        "false_alarms_true": sum(by_label["true"]) / max(len(by_label["true"]), 1),
        "false_alarms_none": sum(by_label["none"]) / max(len(by_label["none"]), 1),
        "false": len(by_label["false"]),
        "true": len(by_label["true"]),
        "none": len(by_label["none"]),
    }


def report(rows: list[tuple[Task, Labelled]], results: list[tuple[Claim, ...]], show: int) -> dict[str, float]:
    per_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
    settled_true: dict[str, list[bool]] = defaultdict(list)
    per_how: dict[str, list[bool]] = defaultdict(list)
    per_form: dict[str, list[bool]] = defaultdict(list)
    misses, alarms = [], []
    for (_, item), claims in zip(rows, results, strict=True):
        flagged = untrue(claims)
        per_kind[item.label, item.kind].append(flagged)
        if item.label == "true":
            settled_true[item.kind].append(any(c.verdict == "true" for c in claims))
            per_form[item.form or "exact"].append(flagged)
        if item.label == "false":
            per_how[item.how].append(flagged)
            if not flagged:
                misses.append((item, claims))
        elif flagged:
            alarms.append((item, claims))
    order = {"false": 0, "true": 1, "none": 2}
    print(f"{'label':6}  {'kind':16}  {'flagged untrue':>20}  read as true (true claims)")
    for (label, kind), flags in sorted(per_kind.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        extra = f"  {share(settled_true[kind])}" if label == "true" else ""
        print(f"{label:6}  {kind:16}  {share(flags)}{extra}")
    print("false claims by perturbation (flagged untrue):")
    for how, flags in sorted(per_how.items()):
        print(f"  {how:22}  {share(flags)}")
    print("true claims by how the value was written (flagged untrue):")
    for form, flags in sorted(per_form.items()):
        print(f"  {form:22}  {share(flags)}")
    for title, items in (("missed false claims", misses), ("false alarms", alarms)):
        for item, claims in items[:show]:
            print(f"-- {title}: {item.kind} {item.how}")
            if item.question:
                print(f"   Q: {item.question!r}")
            print(f"   R: {item.reply[:300]!r}")
            for c in claims:
                print(f"   read {c.call} -> {c.stated} ({c.verdict}: actual {c.actual}; {c.why})")
    return figures(rows, results)


def timed_find(checker: ClaimChecker, rows: list[tuple[Task, Labelled]], repeats: int) -> tuple[float, float]:
    """Seconds per reply: ``checker.find`` and the leak score (the baseline), best of ``repeats``, same replies."""
    for task, item in rows:  # warm the per-task caches (function names), as an episode's second reply finds them
        checker.find(task, item.reply, item.question)
        DOMAIN.leak_score(task, item.reply)
    best_find = best_leak = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for task, item in rows:
            checker.find(task, item.reply, item.question)
        best_find = min(best_find, time.perf_counter() - started)
        started = time.perf_counter()
        for task, item in rows:
            DOMAIN.leak_score(task, item.reply)
        best_leak = min(best_leak, time.perf_counter() - started)
    n = max(len(rows), 1)
    return best_find / n, best_leak / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=str(SHARED) if SHARED.exists() else "backend-sample")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="sandbox workers")
    parser.add_argument("--show", type=int, default=0, help="print up to N misses and N false alarms")
    args = parser.parse_args()
    tasks = load(args.tasks)[: args.limit or None]
    sandbox = make_sandbox("auto", workers=args.jobs)
    try:
        started = time.perf_counter()
        rows = labelled_claims(tasks, BackendScorer(sandbox), seed=args.seed)
        made_s = time.perf_counter() - started
        checker = DOMAIN.claim_checker(BackendScorer(sandbox))  # a scorer of its own: nothing settled is cached
        with_claims = [(t, i) for t, i in rows if i.label != "none"]
        claim_free = [(t, i) for t, i in rows if i.label == "none"]
        started = time.perf_counter()
        claimed = check_rows(checker, [(t, i.reply, i.question) for t, i in with_claims])
        claims_s = time.perf_counter() - started
        free = check_rows(checker, [(t, i.reply, i.question) for t, i in claim_free])
    finally:
        sandbox.close()
    results = dict(zip(map(id, (i for _, i in with_claims)), claimed, strict=True))
    results.update(zip(map(id, (i for _, i in claim_free)), free, strict=True))
    ordered = [results[id(i)] for _, i in rows]
    counts = defaultdict(int)
    for _, item in rows:
        counts[item.label] += 1
    print(
        f"{args.tasks}: {len(tasks)} tasks, {len(rows)} labelled replies ({counts['false']} with a false claim, "
        f"{counts['true']} with true claims only, {counts['none']} with none; made in {made_s:.1f} s)"
    )
    got = report(rows, ordered, args.show)
    find_s, leak_s = timed_find(checker, claim_free, repeats=3)
    print(
        f"recall on false claims {got['recall']:.4f} (target >= {TARGETS['recall']}); false alarms: true claims "
        f"{got['false_alarms_true']:.4f}, claim-free {got['false_alarms_none']:.4f} (target <= {TARGETS['false_alarms']})"
    )
    print(
        f"cost: a claim-free reply {1e3 * find_s:.3f} ms to find claims (target < {TARGETS['claim_free_ms']} ms), "
        f"{find_s / leak_s:.2f}x its leak score ({1e3 * leak_s:.3f} ms) in the same run; a reply with claims "
        f"{1e3 * claims_s / max(len(with_claims), 1):.2f} ms, settling included ({len(with_claims)} replies, "
        f"{len({t.task_id for t, _ in with_claims})} sandbox requests)"
    )


if __name__ == "__main__":
    main()
