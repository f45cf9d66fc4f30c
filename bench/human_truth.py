"""How often a simulated human says something false about the reference, with and without grounding.

    python bench/human_truth.py [--simulator llamacpp] [--tasks backend-sample] [--limit 12] [--out DIR]

Runs ``colbench probe simulator --category truth`` (the agent asks what test-like calls of the task's function
return: its own tests' and its plus tests' calls, several phrasings; docs/human-quality.md) twice on the same tasks
with the same human, once as it is (``--human-grounding off``) and once grounded (``exec``: before each reply the
human is told the reference's results on up to three literal calls of the agent's turn), and prints per run the
untrue rate (replies with a false claim over replies with a checked claim), the claims checked, over-release, and the
ratio of the two untrue rates measured in this run. The default human is the embedded model (no key, no network;
slow on two cores: about 10 s a reply). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from tempfile import mkdtemp

from colbench.probe import ProbeConfig, run_probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulator", default="llamacpp")
    parser.add_argument("--tasks", default="backend-sample")
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--out", help="a folder for the two probe directories (default: a new temporary one)")
    args = parser.parse_args()
    out = Path(args.out or mkdtemp(prefix="human-truth-"))
    figures = {}
    for grounding in ("off", "exec"):
        started = time.monotonic()
        result = run_probe(
            ProbeConfig(
                simulator=args.simulator,
                out=out / f"grounding-{grounding}",
                tasks=args.tasks,
                limit=args.limit,
                views=("hidden",),
                category="truth",
                human_grounding=grounding,
                concurrency=args.concurrency,
            )
        )
        view = result.summary["views"]["hidden"]
        figures[grounding] = view
        checked = view.get("claims_checked") or {}
        rate = view.get("untrue_rate")
        release = view.get("over_release") or {}
        print(
            f"grounding {grounding:>4}: {view.get('replies', 0)} replies, {checked.get('replies', 0)} with a checked "
            f"claim ({checked.get('claims', 0)} claims), untrue rate "
            f"{'-' if rate is None else f'{100 * rate:.1f}%'}, over-release mean {release.get('mean')} "
            f"share {release.get('share')}; {time.monotonic() - started:.0f} s, {result.failed} failed rows"
        )
        sys.stdout.flush()
    off, grounded = figures["off"].get("untrue_rate"), figures["exec"].get("untrue_rate")
    if off and grounded is not None:
        print(f"untrue rate grounded / as it is: {grounded / off:.2f}x (the issue's target: at most 0.5x)")
    print(json.dumps({"out": str(out), "simulator": args.simulator, "tasks": args.tasks, "limit": args.limit}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
