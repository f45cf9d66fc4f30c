"""What reading a page's visible blocks adds to a render: the same pages with ``blocks=False`` and ``blocks=True``.

    python bench/render_blocks.py [TASKS.jsonl] [--limit N] [--concurrency N] [--rounds N]

Every task's reference page is rendered (no cache) without blocks and with them, alternating in ``--rounds`` rounds
so that other load on the machine falls on both alike. Printed per mode: pages per second, CPU seconds per page (this
process and its children, Chromium included) and the ratio of the two modes measured in this run; then how many
blocks a page yields, by kind, and how many pages hit a bound (``RenderResult.blocks_note``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from collections import Counter
from pathlib import Path

from score_frontend import Stage, bench_parser, rate, render_all

from colbench.render import Renderer, RenderResult
from colbench.tasks import load_jsonl


def main() -> int:
    parser = bench_parser(__doc__, "render")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each mode")
    args = parser.parse_args()
    tasks = load_jsonl(Path(args.tasks))
    pages = [task.ground_truth for task in tasks][: args.limit or None]
    print(f"{len(pages)} pages from {args.tasks}; {os.cpu_count()} cores; concurrency {args.concurrency}")
    wall = {False: 0.0, True: 0.0}
    cpu = {False: 0.0, True: 0.0}
    results: list[RenderResult] = []
    with Renderer(cache_size=0) as renderer:
        asyncio.run(render_all(renderer, pages[:4], args.concurrency, False))  # start the browser, warm the index
        for _ in range(args.rounds):
            for blocks in (False, True):
                with Stage() as stage:
                    done = asyncio.run(render_all(renderer, pages, args.concurrency, blocks))
                wall[blocks] += stage.wall
                cpu[blocks] += stage.cpu
                failed = [r for r in done if r.status != "ok"]
                if failed:
                    print(f"{len(failed)} pages did not render: {failed[0].error}", file=sys.stderr)
                    return 1
                if blocks:
                    results = done
    n = len(pages) * args.rounds
    print(f"{'mode':<14}{'pages/s':>9}{'CPU s/page':>12}")
    for blocks in (False, True):
        print(f"{'blocks' if blocks else 'screenshot':<14}{rate(n, wall[blocks]):>9.2f}{cpu[blocks] / n:>12.3f}")
    print(f"throughput with blocks / without: {wall[False] / wall[True]:.3f}")
    print(f"CPU s/page added by blocks: {(cpu[True] - cpu[False]) / n:.3f}")
    kinds = Counter(block.kind for r in results for block in r.blocks or ())
    per_page = [len(r.blocks or ()) for r in results]
    noted = sum(1 for r in results if r.blocks_note)
    print(
        f"blocks per page: median {statistics.median(per_page):g}, max {max(per_page)}; "
        f"by kind: {dict(sorted(kinds.items()))}; pages cut by a bound: {noted}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
