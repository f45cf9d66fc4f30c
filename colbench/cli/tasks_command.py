"""``colbench tasks ls | check | build-frontend``: list task files and splits, check that they can be judged fairly,
build the frontend splits (docs/tasks.md)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from colbench.cli.arguments import SANDBOX_HELP
from colbench.tasks.sources import load

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    tasks = commands.add_parser("tasks", help="list and check tasks").add_subparsers(dest="action", required=True)
    ls = tasks.add_parser("ls", help="list tasks of a JSONL file or a named split")
    ls.add_argument("source", metavar="FILE_OR_SPLIT")
    ls.add_argument("--ids", action="store_true", help="print one task_id per line, in file order")
    ls.set_defaults(func=cmd_tasks_ls)
    check = tasks.add_parser(
        "check", help="check that every task can be judged fairly (backend: run the references in the sandbox)"
    )
    check.add_argument("source", metavar="FILE_OR_SPLIT")
    check.add_argument("--sandbox", default="auto", help=f"backend: {SANDBOX_HELP}")
    check.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    check.add_argument(
        "--rules", type=int, choices=(2, 3), default=3, help="backend judging: 3 (current) or 2 (colbench 0.1)"
    )
    check.set_defaults(func=cmd_tasks_check)
    build_frontend = tasks.add_parser(
        "build-frontend", help="build a frontend split from WebSight v0.2 into a ColBench JSONL task file"
    )
    build_frontend.add_argument("--split", default="frontend-test", help="frontend-test | frontend-test-full | ...")
    build_frontend.add_argument("--out", required=True, metavar="FILE.jsonl")
    build_frontend.add_argument("--revision", help="a WebSight commit, branch or tag instead of the pinned commit")
    build_frontend.set_defaults(func=cmd_tasks_build_frontend)


def cmd_tasks_ls(args: argparse.Namespace) -> int:
    """One line per task (id, domain, tests, the start of its description), or the ids alone for scripts."""
    tasks = load(args.source)
    for task in tasks:
        if args.ids:
            print(task.task_id)
        else:
            desc = " ".join(task.problem_description.split())
            print(f"{task.task_id}\t{task.domain}\t{len(task.test_cases)} tests\t{desc[:90]}")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """Ask each task's domain whether its tasks can be judged fairly (docs/tasks.md): one line per problem found."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.env.domain import check_tasks

    for line in check_tasks(load(args.source), {"sandbox": args.sandbox, "jobs": args.jobs, "rules": args.rules}):
        print(line, flush=True)
    return 0


def cmd_tasks_build_frontend(args: argparse.Namespace) -> int:
    """Build a WebSight frontend split (pinned, hash-checked) into a ColBench JSONL task file."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.tasks.websight import build_frontend

    tasks = build_frontend(args.split, args.out, revision=args.revision)
    print(f"wrote {len(tasks)} frontend tasks of split {args.split} -> {args.out}")
    return 0
