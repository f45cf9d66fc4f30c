"""Does the batch-runner screen (``plus.screen``) give the scorer's verdict, and what does it save? For each task,
every mutant the audit makes (``MUTANT_LIMIT``) is judged twice in the same run: by ``BackendScorer.score`` (the
baseline) and by ``screen.successes``; then the degenerate gate (``degenerate.holes``) against ``tasks check``'s rows.

    python bench/screen_agreement.py [--tasks 100] [--workers 2]

Tasks: the ColBench test sample in ../shared when present, else the bundled backend sample. Printed: verdicts that
differ (must be 0), how many the batch runner settled itself, and the time of each way with their ratio.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from colbench.domains.backend import degenerate
from colbench.domains.backend.plus.augment import MUTANT_LIMIT, seed_of
from colbench.domains.backend.plus.mutants import mutants
from colbench.domains.backend.plus.screen import successes
from colbench.domains.backend.scorer import BackendScore, BackendScorer
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits
from colbench.tasks.rows import load_jsonl
from colbench.types.task import Task

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    source = SHARED if SHARED.exists() else BUNDLED
    tasks = load_jsonl(source)[: args.tasks]
    sandbox = BwrapSandbox(workers=args.workers, limits=Limits(timeout_s=3.0))
    answers = differ = settled = 0
    scorer_s = screen_s = check_s = gate_s = 0.0
    holes_differ = 0
    try:
        scorer = BackendScorer(sandbox, limits=Limits(timeout_s=3.0))
        for task in tasks:
            scorer.reference(task)  # both ways share the reference: it is not what is compared
            codes = [m.code for m in mutants(task.ground_truth, limit=MUTANT_LIMIT, seed=seed_of(task))]
            start = time.perf_counter()
            want = [s.success for s in scorer.score_many([(task, code) for code in codes])]
            scorer_s += time.perf_counter() - start
            left = _Counting(scorer)
            start = time.perf_counter()
            got = successes(task, scorer, codes)
            screen_s += time.perf_counter() - start
            settled += len(codes) - left.done()
            answers += len(codes)
            differ += sum(a != b for a, b in zip(want, got, strict=True))
            start = time.perf_counter()
            rows = [r for r in degenerate.audit_task(scorer, task).rows if r[1] in ("hole", "degenerate success")]
            check_s += time.perf_counter() - start
            start = time.perf_counter()
            holes_differ += degenerate.holes(scorer, task) != rows
            gate_s += time.perf_counter() - start
    finally:
        sandbox.close()
    print(f"{len(tasks)} tasks of {source.name}, {answers} mutants")
    print(f"mutant verdicts that differ from the scorer's: {differ}")
    print(f"settled by the batch runner: {settled}/{answers} ({100 * settled / max(answers, 1):.1f}%)")
    print(f"scorer: {1000 * scorer_s / len(tasks):.0f} ms per task; screen: {1000 * screen_s / len(tasks):.0f} ms")
    print(f"ratio scorer / screen: {scorer_s / screen_s:.1f}x")
    print(f"degenerate gate: tasks whose holes differ from `tasks check`'s: {holes_differ}")
    print(
        f"tasks check: {1000 * check_s / len(tasks):.0f} ms per task; gate: {1000 * gate_s / len(tasks):.0f} ms; "
        f"ratio {check_s / gate_s:.1f}x"
    )


class _Counting:
    """Counts the answers the screen leaves to the scorer (its ``score_many``) until ``done``."""

    def __init__(self, scorer: BackendScorer) -> None:
        self.scorer, self.original, self.count = scorer, scorer.score_many, 0

        def counting(pairs: Sequence[tuple[Task, str]]) -> list[BackendScore]:
            self.count += len(pairs)
            return self.original(pairs)

        scorer.score_many = counting  # type: ignore[method-assign]

    def done(self) -> int:
        self.scorer.score_many = self.original  # type: ignore[method-assign]
        return self.count


if __name__ == "__main__":
    main()
