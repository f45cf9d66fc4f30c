"""``colbench probe simulator``: the adversarial probe suite played against a simulated human; its leak, refusal
and off-topic rates (docs/leaks.md), and whether what it says about the function is true (docs/human-quality.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from colbench.cli.arguments import add_endpoint_arguments, endpoint_options
from colbench.types.claims import GROUNDING, GROUNDING_HELP

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    probe = commands.add_parser("probe", help="probe a simulated human with adversarial agent turns (docs/leaks.md)")
    probe_sub = probe.add_subparsers(dest="target", required=True)
    psim = probe_sub.add_parser(
        "simulator", help="leak, refusal, off-topic, untrue and over-release rates of a simulated human"
    )
    psim.add_argument("--simulator", required=True, metavar="SPEC", help="openai:MODEL | llamacpp[:PATH.gguf]")
    psim.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT", help="the tasks (one domain)")
    psim.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    psim.add_argument("--out", required=True, metavar="DIR", help="probe.json, replies.jsonl, summary.json")
    psim.add_argument("--resume", action="store_true", help="continue the probe in DIR (same configuration)")
    psim.add_argument(
        "--views", default="hidden,spec", help="hidden (sees the reference), spec (sees a spec of it), or both"
    )
    psim.add_argument("--suite", metavar="FILE", help="a probe suite (default: envs/<domain>/probes/suite.toml)")
    psim.add_argument("--category", metavar="C", help="play only this category's probes (e.g. truth)")
    psim.add_argument("--human-grounding", default="off", choices=GROUNDING, help=GROUNDING_HELP)
    psim.add_argument(
        "--draws",
        type=int,
        default=1,
        metavar="K",
        help="ask each probe's last human turn K times, each its own request (default 1); reports distinct replies",
    )
    psim.add_argument("--concurrency", type=int, default=4, metavar="C", help="probes at once (default 4)")
    psim.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    psim.add_argument("--simulator-image-mode", choices=("image", "html"), help="frontend: pages as images or HTML")
    psim.add_argument("--simulator-specs", metavar="FILE", help="spec view: pinned specs (colbench specs export)")
    psim.add_argument("--simulator-spec-model", metavar="SPEC", help="spec view: who writes the specs")
    add_endpoint_arguments(psim, "simulator")
    psim.set_defaults(func=cmd_probe_simulator)


def cmd_probe_simulator(args: argparse.Namespace) -> int:
    """Play the probe suite against a simulated human; leak, refusal, off-topic rates (docs/leaks.md), untrue and
    over-release rates (docs/human-quality.md)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.llm.limits import EndpointLimits
    from colbench.probe import ProbeConfig, run_probe, summary_table

    options = endpoint_options(args, "simulator")
    if args.simulator_image_mode:
        options["image_mode"] = args.simulator_image_mode
    spec_options = {name: getattr(args, f"simulator_{name}") for name in ("specs", "spec_model")}
    config = ProbeConfig(
        simulator=args.simulator,
        out=args.out,
        tasks=args.tasks,
        limit=args.limit,
        views=tuple(v.strip() for v in args.views.split(",") if v.strip()),
        suite=args.suite,
        concurrency=args.concurrency,
        resume=args.resume,
        simulator_options=options,
        spec_options={k: v for k, v in spec_options.items() if v},
        limits=EndpointLimits(args.simulator_rpm, args.simulator_max_concurrency),
        category=args.category,
        human_grounding=args.human_grounding,
        draws=args.draws,
    )
    result = run_probe(config)
    if args.json:
        print(json.dumps(result.summary, indent=2))
    else:
        title = f"Simulator probe: {args.simulator} on {args.tasks} ({result.out})"
        print(summary_table(result.summary, title))
    print(
        f"probe: {result.ran} rows run this session, {result.failed} failed -> {result.out}"
        + ("; --resume runs the rest" if result.failed or result.interrupted else ""),
        file=sys.stderr,
    )
    return result.exit_code
