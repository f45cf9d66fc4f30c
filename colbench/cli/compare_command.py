"""``colbench compare``: runs paired per task against the first, and how robust results are to swapping the
simulated human (docs/report.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from colbench.errors import DataError

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    comp = commands.add_parser(
        "compare", help="paired comparison of runs and simulator-swap robustness (docs/report.md)"
    )
    comp.add_argument("dirs", nargs="+", metavar="DIR", help="run directories: the first against each other one")
    comp.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page")
    comp.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """The first run against each other run, paired per task; every simulator swap the runs contain."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.report import load_run
    from colbench.report.compare import compare

    comparison = compare([load_run(path) for path in args.dirs])
    sys.stdout.write(comparison.text())
    if args.html:
        try:
            Path(args.html).write_text(comparison.html(), encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{args.html}: cannot write: {exc.strerror or exc}") from exc
        print(f"wrote {args.html}", file=sys.stderr)
    return 0
