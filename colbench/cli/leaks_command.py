"""``colbench leaks score | labelled``: leak scores of simulated-human replies, and the labelled replies the
domains' detectors are measured on (docs/leaks.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from colbench.cli.jsonl_io import read_answers, write_jsonl
from colbench.env.domain import get_domain
from colbench.tasks.sources import load

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    leaks = commands.add_parser("leaks", help="leak scores of simulated-human replies (docs/leaks.md)")
    leaks_sub = leaks.add_subparsers(dest="action", required=True)
    leaks_score = leaks_sub.add_parser("score", help="score replies for leaks of their task's hidden information")
    leaks_score.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT", help="the tasks (their domains)")
    leaks_score.add_argument("--replies", required=True, metavar="FILE", help='JSONL of {"task_id", "reply"}')
    leaks_score.add_argument(
        "--out", required=True, metavar="FILE", help='JSONL of {"task_id", "leak_score", "leak"}, in reply order'
    )
    leaks_score.set_defaults(func=cmd_leaks_score)
    labelled = leaks_sub.add_parser("labelled", help="write the labelled replies the detectors are measured on")
    labelled.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
    labelled.add_argument("--out", required=True, metavar="FILE", help='JSONL of {"task_id", "reply", "leak", "kind"}')
    labelled.add_argument("--seed", type=int, default=0)
    labelled.set_defaults(func=cmd_leaks_labelled)


def cmd_leaks_score(args: argparse.Namespace) -> int:
    """Score simulated-human replies for leaks of their task's hidden information (docs/leaks.md)."""
    replies = read_answers(args.replies, {t.task_id: t for t in load(args.tasks)}, field="reply")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    flagged = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for task, reply in replies:
            domain = get_domain(task.domain)
            score = domain.leak_score(task, reply)
            leak = score >= domain.leak_threshold
            flagged += leak
            write_jsonl(out, {"task_id": task.task_id, "leak_score": score, "leak": leak})
    share = 100 * flagged / max(len(replies), 1)
    print(f"scored {len(replies)} replies: {flagged} leaks ({share:.1f}%) -> {args.out}")
    return 0


def cmd_leaks_labelled(args: argparse.Namespace) -> int:
    """Write the labelled set the leak detectors are measured on (docs/leaks.md), made from the tasks."""
    tasks = load(args.tasks)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for name in dict.fromkeys(t.domain for t in tasks):
            mine = [t for t in tasks if t.domain == name]
            for task, item in get_domain(name).labelled_replies(mine, seed=args.seed):
                write_jsonl(out, {"task_id": task.task_id, "reply": item.reply, "leak": item.leak, "kind": item.kind})
                rows += 1
    print(f"wrote {rows} labelled replies for {len(tasks)} tasks -> {args.out}")
    return 0
