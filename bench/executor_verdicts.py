"""Every verdict that task code decides, written down, so that two versions of the executor can be compared: a
change to how task code runs (the sandbox runner, the batched calls) must change no verdict.

    python bench/executor_verdicts.py --out before.json [TASKS.jsonl] [--limit N] [--sandbox bwrap|docker]
    python bench/executor_verdicts.py --compare before.json after.json

Per task (default: the 300-task ColBench test sample in ../shared, else the bundled sample), in one task
environment:

* ``plus``: the plus tests the augmenter chooses (``colbench tasks augment``);
* ``audit``: the mutation audit of the task's own tests (``colbench tasks audit``: killed, survivors, witnesses);
* ``gates``: the generation gates on the task as a candidate (``colbench tasks generate``'s sandbox gates);
* ``degenerate``: the degenerate answers' holes (``colbench tasks check``);
* ``scores``: the scorer's verdict (tests passed) on the reference and on every mutant the audit makes, under v1,
  and under v2 with the plus tests chosen above.

``--compare`` prints how many verdicts differ in each part (the check: 0 everywhere) and the first few.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"
PARTS = ("plus", "audit", "gates", "degenerate", "scores_v1", "scores_v2")


def record(tasks_path: Path, limit: int, sandbox_kind: str) -> dict[str, Any]:
    from dataclasses import replace

    from colbench.domains.backend import degenerate
    from colbench.domains.backend.generate.gates import validate
    from colbench.domains.backend.plus.audit import audit_task, task_mutants
    from colbench.domains.backend.plus.augment import augment_task
    from colbench.domains.backend.scorer import BackendScorer
    from colbench.sandbox import make_sandbox
    from colbench.tasks import load_jsonl

    tasks = load_jsonl(tasks_path)[:limit]
    sandbox = make_sandbox(sandbox_kind)
    v1 = BackendScorer(sandbox)
    found: dict[str, Any] = {"environment": sandbox.environment.digest, "tasks": {}}
    started = time.monotonic()
    for n, task in enumerate(tasks, 1):
        plain = replace(task, plus=None)
        augmented = augment_task(plain, v1).task
        plus = augmented.plus
        audit = audit_task(plain, v1)
        gates = validate(plain, v1)
        mutants = task_mutants(plain)
        answers = [plain.ground_truth, *(m.code for m in mutants)]
        v2 = BackendScorer(sandbox, plus=True)
        row = {
            "plus": [list(c) for c in plus.cases] if plus is not None else None,
            "audit": audit.row(),
            "gates": {"gate": gates.gate, "reason": gates.reason, "passed": gates.passed,
                      "mutation_score": gates.mutation_score},
            "degenerate": [list(h) for h in degenerate.holes(v1, plain)],
            "scores_v1": [s.tests_passed for s in v1.score_many([(plain, a) for a in answers])],
            "scores_v2": [s.tests_passed for s in v2.score_many([(augmented, a) for a in answers])]
            if plus is not None and plus.cases else None,
        }  # fmt: skip
        found["tasks"][task.task_id] = row
        print(f"\r{n}/{len(tasks)} tasks, {time.monotonic() - started:.0f}s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    sandbox.close()
    found["seconds"] = round(time.monotonic() - started, 1)
    return found


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    if before["environment"] != after["environment"]:
        print(f"note: task environments differ ({before['environment']} vs {after['environment']})")
    common = sorted(set(before["tasks"]) & set(after["tasks"]))
    total = 0
    for part in PARTS:
        differ = [t for t in common if before["tasks"][t][part] != after["tasks"][t][part]]
        total += len(differ)
        print(f"{part}: {len(differ)} of {len(common)} tasks differ")
        for task_id in differ[:3]:
            print(f"  {task_id}: {json.dumps(before['tasks'][task_id][part])[:300]}")
            print(f"  {' ' * len(task_id)}  {json.dumps(after['tasks'][task_id][part])[:300]}")
    print(f"times: {before.get('seconds')}s before, {after.get('seconds')}s after")
    return 1 if total else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", type=Path, default=SHARED if SHARED.exists() else BUNDLED)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--sandbox", default="bwrap", choices=("bwrap", "docker"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        first, second = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        return compare(first, second)
    if args.out is None:
        parser.error("--out FILE (or --compare BEFORE AFTER)")
    args.out.write_text(json.dumps(record(args.tasks, args.limit, args.sandbox)), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
