"""``colbench specs export``: every task's spec, written once and cached, as a file a leaderboard can pin so that
every entry's spec human answers from the same specs (docs/leaks.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from colbench.cli.arguments import add_endpoint_arguments, endpoint_options
from colbench.env.domain import get_domain
from colbench.errors import ConfigError
from colbench.tasks.sources import load

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    specs = commands.add_parser("specs", help="the specs the spec human answers from (docs/leaks.md)")
    specs_sub = specs.add_subparsers(dest="action", required=True)
    export = specs_sub.add_parser("export", help="write every task's spec to a file a leaderboard can pin")
    export.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
    export.add_argument("--model", required=True, metavar="SPEC", help="who writes them: openai:MODEL | llamacpp")
    export.add_argument("--out", required=True, metavar="FILE", help="JSONL, one spec per task")
    export.add_argument("--concurrency", type=int, default=4, metavar="C")
    add_endpoint_arguments(export, "simulator")
    export.set_defaults(func=cmd_specs_export)


def cmd_specs_export(args: argparse.Namespace) -> int:
    """Write (or read from the cache) the spec of every task, as a pinned specs file (docs/leaks.md)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.env.simulators import spec_writer
    from colbench.humans.spec import write_specs, written_specs

    tasks = load(args.tasks)
    names = sorted({t.domain for t in tasks})
    if len(names) != 1:
        raise ConfigError(f"{args.tasks}: specs are exported for the tasks of one domain, got {', '.join(names)}")
    domain = get_domain(names[0])
    writer = spec_writer(domain, args.model, **endpoint_options(args, "simulator"))
    specs = written_specs(writer, tasks, concurrency=args.concurrency)
    count = write_specs(args.out, specs)
    flagged = sum((s.leak_score or 0) >= domain.leak_threshold for s in specs)
    print(f"wrote {count} specs ({flagged} flagged as leaking) -> {args.out}")
    return 0
