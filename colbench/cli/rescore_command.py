"""``colbench rescore RUN --env ID --out NEW``: a run's final answers scored again under another env id, into a new
run directory, without calling any model (docs/run-format.md#rescored-runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from colbench.env.domain import ScoreOption, all_domains
from colbench.env.registration import env_definitions

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    rescore = commands.add_parser(
        "rescore", help="score a run's final answers again under another env id, into a new run directory"
    )
    rescore.add_argument("dir", metavar="RUN_DIR", help="a run directory written by colbench eval (only read)")
    rescore.add_argument(
        "--env",
        required=True,
        metavar="ENV_ID",
        help=f"the env id whose rules score the answers ({', '.join(d.id for d in env_definitions())}; of the run's "
        "domain)",
    )
    rescore.add_argument("--out", required=True, metavar="NEW_RUN_DIR", help="a new (or empty) directory")
    rescore.add_argument(
        "--tasks", metavar="FILE_OR_SPLIT", help="the tasks (default: the run's own; a file with plus tests for v2)"
    )
    options: dict[str, ScoreOption] = {}
    helps: dict[str, list[str]] = {}
    for domain in all_domains():  # every domain's scoring options, each once; the run's domain reads its own
        for option in domain.score_options:
            options.setdefault(option.name, option)
            helps.setdefault(option.name, []).append(f"{domain.name}: {option.help} (default {option.default})")
    for name, option in options.items():
        rescore.add_argument(
            f"--{name.replace('_', '-')}", type=option.value_type, choices=option.choices, help="; ".join(helps[name])
        )
    rescore.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    """Rescore a run directory under ``--env`` into ``--out``; exit 3 when answers could not be judged."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.runs.rescore import rescore

    options = {
        option.name: getattr(args, option.name)
        for domain in all_domains()
        for option in domain.score_options
        if option.name != "jobs" and getattr(args, option.name) is not None
    }
    jobs = getattr(args, "jobs", None)  # make_scorer's own argument, not one of its options
    result = rescore(args.dir, args.env, args.out, tasks=args.tasks, options=options, jobs=jobs)
    print(result.summary_line())
    return result.exit_code
