"""Where to set ``colbench tasks generate``'s mutation gate: the mutation scores of real ColBench tasks' own tests.

    python bench/mutation_gate.py [TASKS.jsonl] [--jobs N] [--limit N]

The gate rejects a generated candidate whose own tests kill too few of its reference's mutants
(``generate/gates.py``, ``MUTATION_THRESHOLD``). A useful threshold keeps candidates tested at least about as well as
the test split the paper scores agents on, and rejects the clearly weaker. This audits every task of a sample (default:
the 300-task test sample in ../shared, else the bundled sample) exactly as ``colbench tasks audit`` does (the
task's tests, the current judging rules, possibly-equivalent survivors excluded) and prints the distribution of
the per-task mutation score, the share of real tasks each candidate threshold would reject, and how many of them
the gate settles without the equivalence probes (its lower bound, ``killed / mutants``, already reaches it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from colbench.domains.backend.plus.many import audit_tasks
from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox import make_sandbox
from colbench.tasks import load_jsonl

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="?", default=str(SHARED if SHARED.exists() else BUNDLED))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    tasks = load_jsonl(args.tasks)[: args.limit or None]
    sandbox = make_sandbox("auto", workers=args.jobs)
    started = time.perf_counter()
    try:
        audits = list(audit_tasks(tasks, BackendScorer(sandbox), jobs=args.jobs))
    finally:
        sandbox.close()
    done = [a for a in audits if not a.problem and a.score is not None]
    scores = sorted(a.score for a in done if a.score is not None)
    cuts = statistics.quantiles(scores, n=20)
    print(f"{args.tasks}: {len(tasks)} tasks, {len(done)} audited ({time.perf_counter() - started:.0f} s)")
    print(
        f"per-task mutation score: min {scores[0]:.2f}  p5 {cuts[0]:.2f}  p10 {cuts[1]:.2f}  p25 {cuts[4]:.2f}  "
        f"median {statistics.median(scores):.2f}  mean {statistics.fmean(scores):.3f}"
    )
    print("threshold  real tasks below it  settled without the equivalence probes (of those above)")
    for threshold in THRESHOLDS:
        below = sum(s < threshold for s in scores)
        above = [a for a in done if a.score is not None and a.score >= threshold]
        quick = sum(a.killed / a.mutants >= threshold for a in above)
        print(f"{threshold:9.1f}  {below:4d} ({100 * below / len(scores):4.1f}%)        {quick}/{len(above)}")


if __name__ == "__main__":
    main()
