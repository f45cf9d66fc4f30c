"""``colbench``: the parser, assembled from the command modules, and the one place where errors become exit codes.

Each command module adds its own sub-parser (``add_parser``) beside its handlers, so a command's options and what
it does with them are read together. Exit codes, which scripts rely on: 0 done; 1 a check failed (``sandbox
doctor``); 2 a usage, configuration or data error; 3 an infrastructure error (``eval`` and ``probe simulator``:
also when episodes or rows failed); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from colbench._util.version import __version__
from colbench.cli import (
    claims_command,
    compare_command,
    eval_command,
    leaks_command,
    model_command,
    probe_command,
    report_command,
    rescore_command,
    sandbox_command,
    score_command,
    serve_command,
    show_command,
    specs_command,
    tasks_command,
    view_command,
)
from colbench.errors import ColbenchError, InfraError

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands

COMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    tasks_command.add_parser,
    eval_command.add_parser,
    score_command.add_parser,
    leaks_command.add_parser,
    claims_command.add_parser,
    probe_command.add_parser,
    specs_command.add_parser,
    report_command.add_parser,
    show_command.add_parser,
    compare_command.add_parser,
    view_command.add_parser,
    rescore_command.add_parser,
    serve_command.add_parser,
    model_command.add_parser,
    sandbox_command.add_parser,
)
"""Each command's sub-parser, in the order ``colbench --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="colbench", description="ColBench: collaborative agent benchmark")
    parser.add_argument("--version", action="version", version=f"colbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_parser in COMMANDS:
        add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every colbench error is a one-line message on stderr and an exit code, never a traceback."""
    args = build_parser().parse_args(argv)
    jobs = getattr(args, "jobs", None)
    if jobs is not None and jobs < 1:
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
