"""``colbench report``: the leaderboard of run directories, their token costs, and an HTML report per run
(docs/report.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from colbench.errors import DataError

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    report = commands.add_parser("report", help="leaderboard, token costs and HTML reports of eval run directories")
    report.add_argument(
        "dirs", nargs="+", metavar="DIR", help="run directories written by colbench eval, or Inspect logs of its tasks"
    )
    report.add_argument("--markdown", metavar="FILE", help="also write the leaderboard and costs as Markdown")
    report.add_argument("--html", action="store_true", help="write DIR/report.html for every run")
    report.add_argument(
        "--reference-run",
        metavar="DIR",
        help="frontend: win rate against this run (the paper compares with GPT-4o); default none",
    )
    report.add_argument(
        "--prices",
        metavar="FILE",
        help="JSON/TOML: model -> {input, output} USD per 1M tokens (default: colbench's dated list prices)",
    )
    report.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Leaderboard of run directories (terminal table, optional Markdown), token costs, per-run HTML reports."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.report import Run, build_report, load_prices, load_run, render_markdown, render_text, write_run_report
    from colbench.report.inspect_log import read_inspect_log

    def read(path: str) -> Run:  # a file: an Inspect log of colbench's tasks (docs/integrations.md)
        return read_inspect_log(path) if Path(path).is_file() else load_run(path)

    runs = [read(path) for path in args.dirs]
    reference = read(args.reference_run) if args.reference_run else None
    prices = load_prices(args.prices) if args.prices else None
    report = build_report(runs, reference=reference, prices=prices)
    written = []
    if args.markdown:
        try:
            Path(args.markdown).write_text(render_markdown(report), encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{args.markdown}: cannot write: {exc.strerror or exc}") from exc
        written.append(args.markdown)
    if args.html:
        written += [str(write_run_report(run, report)) for run in runs]
    sys.stdout.write(render_text(report))
    for warning in report.warnings():
        print(f"colbench: warning: {warning}", file=sys.stderr)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
