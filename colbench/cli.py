"""The ``colbench`` command line (the contract in DESIGN.md section 5: other tools script against it)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any, TextIO

from colbench import __version__
from colbench.errors import ColbenchError, DataError, InfraError
from colbench.tasks import Task, iter_jsonl


def _load(spec: str) -> list[Task]:
    from colbench.hub import resolve_tasks

    return resolve_tasks(spec)


def _read_answers(path: str, tasks: dict[str, Task]) -> list[tuple[Task, str]]:
    answers = []
    for where, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with 'task_id' and 'answer'")
        task_id, answer = row.get("task_id"), row.get("answer")
        if not isinstance(task_id, str | int):
            raise DataError(f"{where}: field 'task_id': missing or not a string")
        if not isinstance(answer, str):
            raise DataError(f"{where}: field 'answer': missing or not a string")
        task = tasks.get(str(task_id))
        if task is None:
            raise DataError(f"{where}: field 'task_id': {task_id!r} is not in the task file")
        answers.append((task, answer))
    return answers


def _write_jsonl(out: TextIO, row: dict[str, Any]) -> None:
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())


def _parallel(jobs: int, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterable[Any]:
    """Results in input order, computed by ``jobs`` threads (the sandbox pool does the real work)."""
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        yield from pool.map(fn, items)


# -- tasks ------------------------------------------------------------------------------------------------------
def cmd_tasks_ls(args: argparse.Namespace) -> int:
    tasks = _load(args.source)
    for task in tasks:
        if args.ids:
            print(task.task_id)
        else:
            desc = " ".join(task.problem_description.split())
            print(f"{task.task_id}\t{task.domain}\t{len(task.test_cases)} tests\t{desc[:90]}")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """Run every reference in the sandbox: which tests can be judged, and does the reference pass itself?"""
    from colbench.sandbox import make_sandbox
    from colbench.scoring.backend import BackendScorer

    tasks = [t for t in _load(args.source) if t.domain == "backend"]
    with closing(make_sandbox(args.sandbox, workers=args.jobs)) as sandbox:
        scorer = BackendScorer(sandbox)
        started = time.monotonic()
        full = judged = 0
        for task, score in zip(
            tasks, _parallel(args.jobs, lambda t: scorer.score(t, t.ground_truth), tasks), strict=True
        ):
            judged += score.tests_total
            full += score.success
            skipped = [t for t in score.tests if not t.judgeable]
            if skipped or not score.success:
                reasons = sorted(
                    {t.detail for t in skipped} | {t.detail for t in score.tests if t.judgeable and not t.passed}
                )
                print(f"{task.task_id}\t{score.tests_passed}/{score.tests_total} judgeable\t{'; '.join(reasons)}")
    total_tests = sum(len(t.test_cases) for t in tasks)
    print(
        f"checked {len(tasks)} tasks in {time.monotonic() - started:.1f}s: reference passes all judgeable tests "
        f"on {full}/{len(tasks)}; {judged}/{total_tests} tests judgeable"
    )
    return 0


def cmd_tasks_build_frontend(args: argparse.Namespace) -> int:
    """Build a WebSight frontend split (pinned, hash-checked) into a ColBench JSONL task file."""
    from colbench.websight import build_frontend

    tasks = build_frontend(args.split, args.out, revision=args.revision)
    print(f"wrote {len(tasks)} frontend tasks of split {args.split} -> {args.out}")
    return 0


# -- score ------------------------------------------------------------------------------------------------------
def cmd_score_backend(args: argparse.Namespace) -> int:
    from colbench.sandbox import make_sandbox
    from colbench.scoring.backend import BackendScore, BackendScorer

    tasks = {t.task_id: t for t in _load(args.tasks)}
    answers = _read_answers(args.answers, tasks)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    counts = {"n": 0, "success": 0, "pass_rate": 0.0, "infra": 0}

    def score_one(item: tuple[Task, str]) -> dict[str, Any]:
        task, answer = item
        try:
            return scorer.score(task, answer).summary()
        except InfraError as exc:
            return BackendScore.infra_error(task.task_id, str(exc)).summary()

    with (
        closing(make_sandbox(args.sandbox, workers=args.jobs)) as sandbox,
        open(args.out, "w", encoding="utf-8") as out,
    ):
        scorer = BackendScorer(sandbox)
        for row in _parallel(args.jobs, score_one, answers):
            _write_jsonl(out, row)
            counts["n"] += 1
            if row["status"] == "ok":
                counts["success"] += bool(row["success"])
                counts["pass_rate"] += row["pass_rate"]
            else:
                counts["infra"] += 1
    judged = counts["n"] - counts["infra"]
    print(
        f"scored {counts['n']} answers: success {counts['success']}/{judged} "
        f"({100 * counts['success'] / max(judged, 1):.1f}%), tests passed "
        f"{100 * counts['pass_rate'] / max(judged, 1):.1f}%, infrastructure errors {counts['infra']} -> {args.out}"
    )
    return 0


# -- sandbox ----------------------------------------------------------------------------------------------------
def cmd_sandbox_build(args: argparse.Namespace) -> int:
    from colbench.sandbox.image import build_image

    print(build_image(args.method, image=args.image, force=args.force))
    return 0


def cmd_sandbox_doctor(args: argparse.Namespace) -> int:
    from colbench.sandbox.image import doctor

    failed = False
    for check in doctor(args.image):
        status = "OK" if check.ok else ("FAIL" if check.required else "WARN")
        print(f"{status:<4} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"     fix: {check.fix}")
        failed = failed or (check.required and not check.ok)
    return 1 if failed else 0


# -- parser -----------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="colbench", description="ColBench: collaborative agent benchmark")
    parser.add_argument("--version", action="version", version=f"colbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    tasks = sub.add_parser("tasks", help="list and check tasks").add_subparsers(dest="action", required=True)
    ls = tasks.add_parser("ls", help="list tasks of a JSONL file or a named split")
    ls.add_argument("source", metavar="FILE_OR_SPLIT")
    ls.add_argument("--ids", action="store_true", help="print one task_id per line, in file order")
    ls.set_defaults(func=cmd_tasks_ls)
    check = tasks.add_parser("check", help="run the references in the sandbox and report unjudgeable tests")
    check.add_argument("source", metavar="FILE_OR_SPLIT")
    check.add_argument("--sandbox", default="auto", help="auto (Docker when available, else local) | docker | local")
    check.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    check.set_defaults(func=cmd_tasks_check)
    build_frontend = tasks.add_parser(
        "build-frontend", help="build a frontend split from WebSight v0.2 into a ColBench JSONL task file"
    )
    build_frontend.add_argument("--split", default="frontend-test", help="frontend-test | frontend-test-full | ...")
    build_frontend.add_argument("--out", required=True, metavar="FILE.jsonl")
    build_frontend.add_argument("--revision", help="a WebSight commit, branch or tag instead of the pinned commit")
    build_frontend.set_defaults(func=cmd_tasks_build_frontend)

    score = sub.add_parser("score", help="score answers offline").add_subparsers(dest="domain", required=True)
    backend = score.add_parser("backend", help="score Python answers with the tasks' unit tests")
    backend.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
    backend.add_argument("--answers", required=True, help='JSONL of {"task_id", "answer"}')
    backend.add_argument("--out", required=True, help="JSONL results, one per answer, in answer order")
    backend.add_argument("--sandbox", default="auto", help="auto (Docker when available, else local) | docker | local")
    backend.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    backend.set_defaults(func=cmd_score_backend)

    sandbox = sub.add_parser("sandbox", help="build and check the Docker sandbox image")
    sandbox_sub = sandbox.add_subparsers(dest="action", required=True)
    build = sandbox_sub.add_parser("build", help="build the sandbox image (prints its name)")
    build.add_argument(
        "--method",
        choices=("auto", "dockerfile", "offline"),
        default="auto",
        help="dockerfile: FROM python:3.11-slim (needs a registry); offline: debootstrap from the apt mirror; "
        "auto: $COLBENCH_SANDBOX_BUILD, else offline on Linux with apt, else dockerfile",
    )
    build.add_argument("--force", action="store_true", help="rebuild from scratch, ignoring caches")
    build.add_argument("--image", default="colbench-sandbox:1", help=argparse.SUPPRESS)
    build.set_defaults(func=cmd_sandbox_build)
    doc = sandbox_sub.add_parser("doctor", help="check Docker, the image and the local runtime; exit 1 on a failure")
    doc.add_argument("--image", default="colbench-sandbox:1", help=argparse.SUPPRESS)
    doc.set_defaults(func=cmd_sandbox_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        print("colbench: error: --jobs must be >= 1", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except InfraError as exc:
        print(f"colbench: infrastructure error: {exc}", file=sys.stderr)
        return 3
    except ColbenchError as exc:
        print(f"colbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("colbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``colbench tasks ls ... | head``): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
