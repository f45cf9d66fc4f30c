"""``colbench claims check``: the simulated human's checkable claims in replies, settled by running the reference
(docs/human-quality.md)."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from colbench._util.storage import iter_jsonl
from colbench.cli.jsonl_io import row_task, write_jsonl
from colbench.domains.backend import SANDBOX_HELP
from colbench.env.claim_check import ClaimChecker, check_rows
from colbench.env.domain import get_domain
from colbench.errors import DataError
from colbench.tasks.sources import load
from colbench.types.claims import checked, claims_json, untrue

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands
    from colbench.types.task import Task

BATCH = 256
"""Replies settled (and written) at a time: each task's claims in one reference run per batch."""


def add_parser(commands: Subcommands) -> None:
    claims = commands.add_parser("claims", help="check what simulated humans claim against the reference")
    sub = claims.add_subparsers(dest="action", required=True)
    check = sub.add_parser(
        "check",
        help="find each reply's checkable claims and settle them by running the reference (docs/human-quality.md)",
    )
    check.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT", help="the tasks the replies are about")
    check.add_argument(
        "--replies",
        required=True,
        metavar="FILE",
        help='JSONL of {"task_id", "reply", "question"?} (question: the agent turn the reply answers)',
    )
    check.add_argument(
        "--out", required=True, metavar="FILE", help='JSONL: each input row plus "claims" and "untrue", in order'
    )
    check.add_argument("--sandbox", default="auto", help=SANDBOX_HELP)
    check.add_argument(
        "--extractor",
        metavar="MODEL_SPEC",
        help="also have a model turn prose claims into calls (off by default; the verdict still comes only from "
        "running the reference)",
    )
    check.set_defaults(func=cmd_claims_check)


def read_replies(path: str, tasks: dict[str, Task]) -> list[tuple[dict[str, Any], Task]]:
    """Every row with its task, all checked before anything is written (a one-line error naming file:line)."""
    rows = []
    for where, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with 'task_id' and 'reply'")
        task_id, reply, question = row.get("task_id"), row.get("reply"), row.get("question")
        if not isinstance(task_id, str | int) or isinstance(task_id, bool):
            raise DataError(f"{where}: field 'task_id': missing or not a string")
        if not isinstance(reply, str):
            raise DataError(f"{where}: field 'reply': missing or not a string")
        if question is not None and not isinstance(question, str):
            raise DataError(f"{where}: field 'question': not a string")
        rows.append((row, row_task(where, task_id, tasks)))
    return rows


def cmd_claims_check(args: argparse.Namespace) -> int:
    """Check replies' claims (docs/human-quality.md): one reference run per task per batch, rows written in order."""
    rows = read_replies(args.replies, {t.task_id: t for t in load(args.tasks)})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    untrue_rows = settled = total = 0
    with ExitStack() as stack:
        checkers: dict[str, ClaimChecker] = {}

        def checker_for(task: Task) -> ClaimChecker:
            if task.domain not in checkers:
                domain = get_domain(task.domain)
                scorer = domain.make_scorer({"sandbox": args.sandbox}, jobs=1)
                stack.callback(scorer.close)
                checker = domain.claim_checker(scorer)
                if args.extractor:
                    from colbench.env.claim_extractor import with_extractor  # a model client only when asked for

                    checker = with_extractor(checker, args.extractor)
                checkers[task.domain] = checker
            return checkers[task.domain]

        out = stack.enter_context(open(args.out, "w", encoding="utf-8"))
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            by_domain: dict[str, list[int]] = {}
            for i, (_, task) in enumerate(batch):
                by_domain.setdefault(task.domain, []).append(i)
            results: list[Any] = [()] * len(batch)
            for indices in by_domain.values():
                checker = checker_for(batch[indices[0]][1])
                items = [(batch[i][1], batch[i][0]["reply"], batch[i][0].get("question")) for i in indices]
                for i, claims in zip(indices, check_rows(checker, items), strict=True):
                    results[i] = claims
            for (row, _), claims in zip(batch, results, strict=True):
                bad = untrue(claims)
                untrue_rows += bad
                settled += checked(claims) > 0
                total += len(claims)
                write_jsonl(out, {**row, "claims": claims_json(claims), "untrue": bad})
    share = 100 * untrue_rows / max(settled, 1)
    print(
        f"checked {len(rows)} replies: {total} claims, {settled} replies with a checked claim, {untrue_rows} with a "
        f"false one ({share:.1f}% of those) -> {args.out}"
    )
    return 0
