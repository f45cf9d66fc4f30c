"""``colbench eval``: an agent with a simulated human on tasks, into a run directory (docs/evaluation.md,
docs/run-format.md); ``--dry-run`` forecasts tokens, cost and time instead."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from colbench.cli.arguments import SANDBOX_HELP, add_endpoint_arguments, add_ray_arguments, endpoint_options
from colbench.errors import ConfigError
from colbench.types.claims import GROUNDING, GROUNDING_HELP, TRUTH_HELP
from colbench.types.leaks import POLICY_HELP

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    ev = commands.add_parser("eval", help="run an agent with a simulated human on tasks; results go to a run directory")
    ev.add_argument("--env", required=True, metavar="ENV_ID", help="ColBench-Backend-v1 | ColBench-Frontend-v0 | ...")
    ev.add_argument(
        "--agent",
        required=True,
        metavar="SPEC",
        help="openai:MODEL | llamacpp[:PATH.gguf] | module.path:Attr | scripted:reference|ask|empty|copycat",
    )
    ev.add_argument(
        "--simulator",
        required=True,
        metavar="SPEC",
        help="openai:MODEL | llamacpp[:PATH.gguf] | scripted | scripted:leaky (always pastes the hidden answer)",
    )
    ev.add_argument("--leak-policy", default="flag", metavar="POLICY", help=POLICY_HELP)
    ev.add_argument("--truth-policy", default="flag", metavar="POLICY", help=TRUTH_HELP)
    ev.add_argument("--human-grounding", default="off", choices=GROUNDING, help=GROUNDING_HELP)
    ev.add_argument(
        "--tasks", metavar="FILE_OR_SPLIT", help="a task JSONL file or split (default: the env's test split)"
    )
    ev.add_argument("--limit", type=int, metavar="N", help="only the first N tasks, in file order")
    ev.add_argument("--trials", type=int, default=1, metavar="K", help="episodes per task (default 1)")
    ev.add_argument("--concurrency", type=int, default=8, metavar="C", help="episodes at once (default 8)")
    ev.add_argument("--out", metavar="DIR", help="the run directory (docs/run-format.md); required unless --dry-run")
    ev.add_argument("--resume", action="store_true", help="continue the run in DIR (same configuration)")
    ev.add_argument("--max-turns", type=int, metavar="N", help="agent turns per episode (default 10)")
    ev.add_argument("--sandbox", default="auto", help=f"backend: {SANDBOX_HELP}")
    ev.add_argument("--embedder", default="clip", help="frontend: clip | clip-center-crop | clip:PATH | test")
    ev.add_argument(
        "--max-consecutive-errors",
        type=int,
        metavar="N",
        help="stop scheduling after N infrastructure errors in a row (default max(20, 2C); 0: never)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    for role in ("agent", "simulator"):
        add_endpoint_arguments(ev, role)
    ev.add_argument(
        "--simulator-image-mode", choices=("image", "html"), help="frontend: show the pages as images or HTML"
    )
    _add_view_arguments(ev)
    add_ray_arguments(ev, "episodes")
    ev.add_argument(
        "--dry-run", action="store_true", help="forecast tokens, cost and wall time without calling any model"
    )
    ev.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table instead of the built-in list prices (the --dry-run forecast, the progress line's cost)",
    )
    ev.add_argument(
        "--forecast-turns", type=float, metavar="T", help="--dry-run: agent turns per episode (default half the cap)"
    )
    ev.set_defaults(func=cmd_eval)


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """What the simulated human is shown: the hidden information itself, or a spec of it (``humans.spec``)."""
    group = parser.add_argument_group("what the simulated human sees (docs/leaks.md)")
    group.add_argument(
        "--simulator-view",
        choices=("hidden", "spec"),
        help="hidden (default): the reference itself; spec: a plain-words specification of it, written once per task",
    )
    group.add_argument("--simulator-specs", metavar="FILE", help="spec view: pinned specs (colbench specs export)")
    group.add_argument(
        "--simulator-spec-model", metavar="SPEC", help="spec view: who writes the specs (default: the simulator)"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """Run an agent with a simulated human on tasks into a run directory (docs/evaluation.md, docs/run-format.md)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.eval import RunPlan, run_eval
    from colbench.llm.limits import EndpointLimits
    from colbench.report import load_prices

    if args.out is None and (args.resume or not args.dry_run):
        raise ConfigError("eval: --out DIR is required (only a --dry-run forecast without --resume runs without one)")
    agent_options, simulator_options = endpoint_options(args, "agent"), endpoint_options(args, "simulator")
    prices = load_prices(args.prices) if args.prices else None
    if args.simulator_image_mode:
        simulator_options["image_mode"] = args.simulator_image_mode
    for name in ("view", "specs", "spec_model"):
        if getattr(args, f"simulator_{name}"):
            simulator_options[name] = getattr(args, f"simulator_{name}")
    given = {name: getattr(args, name) for name in ("tasks", "limit", "max_turns", "max_consecutive_errors")}
    config = RunPlan.resolve(
        env_id=args.env,
        agent=args.agent,
        simulator=args.simulator,
        out=args.out if args.out is not None else ".",  # a dry run without --resume never reads it
        trials=args.trials,
        concurrency=args.concurrency,
        resume=args.resume,
        sandbox=args.sandbox,
        embedder=args.embedder,
        leak_policy=args.leak_policy,
        truth_policy=args.truth_policy,
        human_grounding=args.human_grounding,
        agent_options=agent_options,
        simulator_options=simulator_options,
        agent_limits=EndpointLimits(args.agent_rpm, args.agent_max_concurrency),
        simulator_limits=EndpointLimits(args.simulator_rpm, args.simulator_max_concurrency),
        progress="off" if args.quiet else "auto",
        prices=prices,
        ray=args.ray,
        ray_workers=args.ray_workers,
        runtime={
            f"{role}_api_key_env": getattr(args, f"{role}_api_key_env")
            for role in ("agent", "simulator")
            if getattr(args, f"{role}_api_key_env")
        },
        **{name: value for name, value in given.items() if value is not None},
    )
    if args.dry_run:
        # run-time import: `colbench --help` loads no command's library
        from colbench.eval.dry_run import dry_run

        sys.stdout.write(dry_run(config, prices=prices, turns=args.forecast_turns))
        return 0
    if config.ray is not None:  # Ray is imported only here: a run without --ray never loads it
        # run-time import: `colbench --help` loads no command's library
        from colbench.ray.eval_actors import run_eval as run_eval_on_ray

        result = run_eval_on_ray(config, stderr=sys.stderr)
    else:
        result = run_eval(config, stderr=sys.stderr)
    print(result.summary_line())
    if result.interrupted:
        print(f"colbench: interrupted: finished episodes are kept in {result.out}; --resume continues", file=sys.stderr)
    return result.exit_code
