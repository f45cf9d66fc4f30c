"""``colbench show``: one episode of a run directory as a readable dialogue, with its answer and score."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    shw = commands.add_parser(
        "show", help="print one episode of a run directory: the dialogue, the answer and its score"
    )
    shw.add_argument("dir", metavar="DIR", help="a run directory written by colbench eval")
    shw.add_argument("--task", metavar="ID", help="the task id, or a unique prefix of it (default: the first episode)")
    shw.add_argument("--trial", type=int, metavar="K", help="the trial (default: the first)")
    shw.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    """One episode of a run directory as a readable dialogue, with its score."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.report.show import show

    sys.stdout.write(show(args.dir, args.task, args.trial))
    return 0
