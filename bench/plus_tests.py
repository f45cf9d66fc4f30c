"""ColBench+ on a task sample: how much stricter v2's tests are than v1's, measured on mutants the augmenter
never saw, and what the plus tests cost.

    python bench/plus_tests.py [TASKS.jsonl] [--jobs N] [--out DIR] [--limit N]

For every task (default: the 300-task sample in ../shared):

1. ``colbench tasks augment``'s augmenter makes its plus tests (timed), fitting on one half of the reference's
   single-edit mutants.
2. The other half (*held out*) is scored as answers with the real scorer, under v1 (the task's tests) and v2 (the
   task's tests and its plus tests). A held-out mutant that passes is run, with the reference, on the audit's
   independent inputs (``audit``): if none tells them apart it is *possibly equivalent* and excluded.
3. Printed: the held-out mutation score of v1 and v2 (possibly-equivalent mutants excluded), the share of tasks
   where a non-equivalent held-out mutant still gets full reward, plus tests per task, augmentation time per task,
   and v2's scoring throughput as a ratio of v1's on the same answers (every held-out mutant and every reference),
   cold (empty reference cache) and warm (cached), in this run on this machine.
4. Printed: how many plus tests put a number beyond the tests' magnitude (``inputs.in_magnitude``), and how many
   of those are not at a boundary of a constant the reference compares with (none should be).
5. With ``--answers FILE`` (default: bench/data/plus/independent_answers.jsonl), independently written answers are
   scored under v1 and v2, by style (``style``: written from the request, or recursive, a comprehension, a loop,
   helpers where the reference is otherwise); every answer that v1 passes and v2 fails is printed (docs/tasks.md
   explains each).

``--out DIR`` keeps the augmented tasks (``augmented.jsonl``) and the surviving held-out mutants
(``survivors.jsonl``, with the possibly-equivalent ones to label by hand).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from colbench.domains.backend.plus.audit import witnessed
from colbench.domains.backend.plus.augment import Augmented, augment_task
from colbench.domains.backend.plus.inputs import domain_of, magnitude, template, templates
from colbench.domains.backend.scorer import BackendScorer, ReferenceCache
from colbench.sandbox import make_sandbox
from colbench.tasks import Task, load_jsonl

HERE = Path(__file__).resolve().parent
DEFAULT_TASKS = HERE.parents[1] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"
DEFAULT_ANSWERS = HERE / "data" / "plus" / "independent_answers.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default=str(DEFAULT_TASKS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit", type=int, help="the first N tasks only")
    parser.add_argument("--answers", default=str(DEFAULT_ANSWERS))
    parser.add_argument("--out", help="a folder for augmented.jsonl and survivors.jsonl")
    args = parser.parse_args()
    tasks = load_jsonl(args.tasks)[: args.limit]
    sandbox = make_sandbox("auto", workers=args.jobs)
    v1 = BackendScorer(sandbox, jobs=args.jobs)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        made: list[Augmented] = list(pool.map(lambda t: augment_task(t, v1), tasks))
    augment_s = time.perf_counter() - start
    augmented = [a.task for a in made]
    plus_counts = [len(a.plus.cases) for a in made]
    print(
        f"augmented {len(tasks)} tasks in {augment_s:.0f} s ({augment_s / len(tasks):.2f} s/task, {args.jobs} jobs); "
        f"plus tests per task: mean {sum(plus_counts) / len(made):.1f}, max {max(plus_counts)}; "
        f"tasks without any: {sum(1 for c in plus_counts if not c)} "
        f"({sum(1 for a in made if a.plus.note)} with a reason)"
    )
    held = [(a, m) for a in made for m in a.mutants if m.index not in a.fit]
    s1 = v1.score_many([(a.task, m.code) for a, m in held])
    s2 = v1.score_many([(as_v2(a.task), m.code) for a, m in held])
    print(f"held-out mutants: {len(held)} of {sum(len(a.mutants) for a in made)}")
    survivors = []
    for version, scores in (("v1", s1), ("v2", s2)):
        alive: dict[str, list[int]] = {}
        for (a, m), s in zip(held, scores, strict=True):
            if s.success:
                alive.setdefault(a.task.task_id, []).append(m.index)
        equivalent, wrong_tasks = 0, 0
        for a in made:
            ids = alive.get(a.task.task_id, [])
            if not ids:
                continue
            found = witnessed(a.task, v1, [m for m in a.mutants if m.index in ids])
            equivalent += sum(s.possibly_equivalent for s in found)
            wrong_tasks += any(not s.possibly_equivalent for s in found)
            if version == "v2":
                survivors += [{"task_id": a.task.task_id, **s.row(), "code": s.mutant.code} for s in found]
        n = len(held) - equivalent
        killed = len(held) - sum(len(v) for v in alive.values())
        print(
            f"{version}: held-out mutation score {killed / max(n, 1):.3f} ({killed} killed of {n} not possibly "
            f"equivalent; {equivalent} possibly equivalent); tasks where a wrong held-out mutant gets full reward: "
            f"{wrong_tasks}/{len(made)} ({100 * wrong_tasks / len(made):.1f}%)"
        )
    _magnitude(augmented)
    _throughput(sandbox, args.jobs, [(a.task, m.code) for a, m in held] + [(t, t.ground_truth) for t in augmented])
    _answers(Path(args.answers), augmented, v1)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "augmented.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(t.to_row()) + "\n" for t in augmented)
        with open(out / "survivors.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in survivors)
    sandbox.close()
    return 0


def as_v2(task: Task) -> Task:
    """The task as ColBench-Backend-v2 judges it: its tests, then its plus tests, under the same rules."""
    return replace(task, test_cases=task.test_cases + (task.plus.cases if task.plus else ()))


def _throughput(sandbox: object, jobs: int, pairs: list[tuple[Task, str]], rounds: int = 3) -> None:
    """v2's answers per second over v1's on the same answers, cold (a fresh reference cache each round) and warm
    (cached), the best of ``rounds`` rounds, v1 and v2 alternating so drift on the machine hits both alike."""
    best: dict[str, float] = {}
    versions = {"v1": pairs, "v2": [(as_v2(t), a) for t, a in pairs]}
    for k in range(rounds):
        for label in ("v1", "v2") if k % 2 == 0 else ("v2", "v1"):
            scorer = BackendScorer(sandbox, jobs=jobs, cache=ReferenceCache())  # type: ignore[arg-type]
            for phase in ("cold", "warm"):
                start = time.perf_counter()
                scorer.score_many(versions[label])
                rate = len(pairs) / (time.perf_counter() - start)
                best[f"{label} {phase}"] = max(rate, best.get(f"{label} {phase}", 0.0))
    for phase in ("cold", "warm"):
        v1, v2 = best[f"v1 {phase}"], best[f"v2 {phase}"]
        print(f"scoring throughput {phase} (best of {rounds}): v1 {v1:.0f}/s, v2 {v2:.0f}/s: v2/v1 = {v2 / v1:.2f}x")


def _magnitude(tasks: list[Task]) -> None:
    """How many plus tests put a number beyond the tests' magnitude in its place (``inputs.in_magnitude``), and of
    those how many at no boundary of a constant the reference compares with (none should: docs/tasks.md)."""
    calls = beyond = unneeded = 0
    for task in tasks:
        families = templates(task.test_cases, task.ground_truth)
        domain = domain_of(families, task.ground_truth)
        for _, call in task.plus.cases if task.plus else ():
            found = template(call)
            if found is None:
                continue
            callee = found.source[: found.spans[0][0]]
            # the families it may come from (an edit can change a value's shape: a list emptied, say)
            mine = [
                f for f in families if f.templates[0].source.startswith(callee) and len(f.seen) == len(found.values)
            ]
            verdicts = {magnitude(f, dict(enumerate(found.values)), domain) for f in mine}
            if not verdicts:
                continue
            calls += 1
            far = False if False in verdicts else True if True in verdicts else None
            beyond += far is not False
            unneeded += far is None
    print(
        f"plus tests beyond the tests' magnitude: {beyond} of {calls} ({unneeded} not at a boundary of a compared "
        f"constant or deeper than a recursive answer could go)"
    )


def _answers(path: Path, tasks: list[Task], scorer: BackendScorer) -> None:
    if not path.is_file():
        print(f"no independent answers at {path}: false-failure check skipped")
        return
    by_id = {t.task_id: t for t in tasks}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = [(by_id[r["task_id"]], r["answer"]) for r in rows if r["task_id"] in by_id]
    styles = [r.get("style", "independent") for r in rows if r["task_id"] in by_id]
    s1, s2 = scorer.score_many(pairs), scorer.score_many([(as_v2(t), a) for t, a in pairs])
    both = sum(bool(a.success and b.success) for a, b in zip(s1, s2, strict=True))
    print(
        f"independent answers: {len(pairs)}; pass v1 {sum(bool(s.success) for s in s1)}, v2 {sum(bool(s.success) for s in s2)}, both {both}"
    )
    for style in sorted(set(styles)):
        mine = [(a, b) for k, (a, b) in enumerate(zip(s1, s2, strict=True)) if styles[k] == style]
        print(
            f"  {style}: {len(mine)}; pass v1 {sum(bool(a.success) for a, _ in mine)}, v2 {sum(bool(b.success) for _, b in mine)}"
        )
    for (task, _), a, b in zip(pairs, s1, s2, strict=True):
        if a.success and not b.success:
            failed = [t for t in b.tests if t.judgeable and not t.passed]
            print(
                f"  v2 fails, v1 passes: {task.task_id}: "
                + "; ".join(f"{t.expression}: {t.detail}" for t in failed[:3])
            )


if __name__ == "__main__":
    sys.exit(main())
