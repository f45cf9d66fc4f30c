"""Frontend scoring throughput: rendering alone, embedding alone and the whole scoring pipeline, in one run.

    python bench/score_frontend.py [TASKS.jsonl] [--limit N] [--concurrency N] [--batch-size N] [--embedder SPEC]

Every task's reference page is scored as the answer. Measured, in pages per second:

* ``render``: the reference pages through ``Renderer.arender``, ``--concurrency`` at a time, no cache.
* ``embed``: the screenshots from ``render`` through the embedder, ``--batch-size`` at a time. By default the CLIP
  ViT-B-32 architecture with RANDOM weights (timing only: no hub is needed, and the cost of a forward pass does not
  depend on the weights' values); ``--embedder clip`` or ``clip:/path/weights`` times the real weights.
* ``pipeline cold``: ``FrontendScorer.score_many`` with nothing cached: two renders and two embeddings per answer
  (the answer's page and the reference's), reported per answer.
* ``pipeline warm``: the same answers again with the reference embeddings cached (the RL-training case): one render
  and one embedding per answer, the same work as ``render`` plus ``embed``.
* ``v1 pipeline cold`` / ``v1 pipeline warm``: the same with ColBench-Frontend-v1's reward (``reward="visual"``): each
  page is rendered with its blocks, its screenshot painted over and embedded a second time, the blocks matched. The
  ratio v1 / v0 is printed for both (the issue's target: >= 0.7).

With rendering and embedding overlapped, ``pipeline warm`` approaches the slower of the two stages when they do not
compete for the same processors (a GPU embedder, or cores to spare). On a small CPU-only machine both stages are
CPU-bound and share the cores, so the ceiling is lower: the table gives each stage's CPU seconds per page (this
process and its children, Chromium included) and the rate those allow on all cores together,
``cores / (render CPU + embed CPU)``. Machines differ and are noisy: compare the ratios, which are measured in one run
on one machine; other load on the machine shows up as a low CPU share (``cpu %``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from colbench.domains.frontend.embed import Embedder, make_embedder
from colbench.domains.frontend.scorer import FrontendScorer
from colbench.render import Renderer, RenderResult
from colbench.tasks import Task, load_jsonl

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "frontend_test_sample.jsonl"
BUNDLED = Path(__file__).resolve().parents[1] / "tasks" / "samples" / "frontend-sample.jsonl"


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def cpu_seconds() -> float:
    """CPU time of this process and all its descendants, living or reaped (Linux /proc; 0.0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # utime, stime, and cutime, cstime: children this one has reaped (Chromium's finished renderers)
        times[pid] = sum(int(x) for x in fields[11:15]) / ticks
    total, frontier = 0.0, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        total += times.get(pid, 0.0)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return total


class Stage:
    """Wall and CPU time of one measured stage."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> Stage:
        self._wall, self._cpu = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self._wall, cpu_seconds() - self._cpu


def random_clip(scratch: Path) -> tuple[Embedder, str]:
    """ViT-B-32 (QuickGELU) with random weights, saved and loaded through the real loading path."""
    import open_clip
    from safetensors.torch import save_file

    model = open_clip.create_model("ViT-B-32", force_quick_gelu=True)
    path = scratch / "vit-b-32-random.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if k.startswith("visual.")}, str(path))
    return make_embedder(f"clip:{path}"), "CLIP ViT-B-32, RANDOM weights (timing only)"


async def render_all(
    renderer: Renderer, pages: list[str], concurrency: int, blocks: bool | None = None
) -> list[RenderResult]:
    """Every page rendered (``blocks``: as ``Renderer.arender`` takes it), ``concurrency`` of them at once."""
    gate = asyncio.Semaphore(concurrency)

    async def one(html: str) -> RenderResult:
        async with gate:
            return await renderer.arender(html, blocks=blocks)

    return list(await asyncio.gather(*(one(html) for html in pages)))


def bench_parser(doc: str, verb: str) -> argparse.ArgumentParser:
    """The arguments the frontend benches share: the task file (the shared sample where present, else the bundled
    one), ``--limit`` (only the first N tasks are ``verb``-ed) and ``--concurrency`` (renders in flight)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("tasks", nargs="?", default=str(SHARED if SHARED.exists() else BUNDLED))
    parser.add_argument("--limit", type=int, default=0, help=f"{verb} only the first N tasks")
    parser.add_argument("--concurrency", type=int, default=4, help="renders in flight at once")
    return parser


def main() -> int:
    parser = bench_parser(__doc__, "score")
    parser.add_argument("--batch-size", type=int, default=32, help="screenshots per embedding call")
    parser.add_argument("--embedder", default="", help="an embedder spec (default: CLIP architecture, random weights)")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (default: torch's own)")
    args = parser.parse_args()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    if not Path(args.tasks).exists():
        print(f"no task file at {args.tasks}: pass a ColBench frontend JSONL", file=sys.stderr)
        return 2
    tasks: list[Task] = load_jsonl(args.tasks, domain="frontend")
    if args.limit:
        tasks = tasks[: args.limit]
    pages = [t.ground_truth for t in tasks]
    n = len(tasks)

    with tempfile.TemporaryDirectory() as scratch, Renderer(cache_size=2 * n) as renderer:
        if args.embedder:
            embedder, label = make_embedder(args.embedder), args.embedder
        else:
            embedder, label = random_clip(Path(scratch))
        device = getattr(embedder, "device", "cpu")
        print(f"{n} pages from {args.tasks}; {os.cpu_count()} cores; {label} on {device} ({embedder.name})")
        print(f"render concurrency {args.concurrency}, embedding batch {args.batch_size}")

        renderer.render("<html><body>warm-up</body></html>")  # start the browser outside the timings
        with Stage() as render_stage:
            rendered = asyncio.run(render_all(renderer, pages, args.concurrency))
        pngs = [r.png for r in rendered if r.png is not None]
        failed = n - len(pngs)

        embedder.embed(pngs[:2])  # warm-up: first-call allocations
        with Stage() as embed_stage:
            for i in range(0, len(pngs), args.batch_size):
                embedder.embed(pngs[i : i + args.batch_size])

        stages = {"render": (render_stage, n), "embed": (embed_stage, len(pngs))}
        answers = [(t, t.ground_truth) for t in tasks]
        statuses: dict[str, int] = {}
        for version, reward in (("", "clip"), ("v1 ", "visual")):  # v0 then v1, one after the other
            options = {"concurrency": args.concurrency, "batch_size": args.batch_size, "reward": reward}
            with FrontendScorer(renderer, embedder, **options) as scorer:  # type: ignore[arg-type]
                for label in ("pipeline cold", "pipeline warm"):
                    with Stage() as stage:
                        scores = scorer.score_many(answers)
                    stages[version + label] = (stage, n)
                    for r in scores:
                        statuses[f"{version}{r.status}"] = statuses.get(f"{version}{r.status}", 0) + 1

    cores = os.cpu_count() or 1
    rates = {name: rate(count, stage.wall) for name, (stage, count) in stages.items()}
    cpu_per_page = {name: stage.cpu / max(count, 1) for name, (stage, count) in stages.items()}
    ceiling = cores / (cpu_per_page["render"] + cpu_per_page["embed"])
    embed_rate, render_rate = rates["embed"], rates["render"]
    slower = min(render_rate, embed_rate)
    header = f"{'stage':<16}{'pages/s':>9}{'/ embed':>9}{'/ render':>9}{'/ slower':>9}{'CPU s/page':>12}{'cpu %':>7}"
    print(header)
    for name, (stage, _) in stages.items():
        value = rates[name]
        share = 100 * stage.cpu / (cores * stage.wall) if stage.wall > 0 else 0.0
        print(
            f"{name:<16}{value:>9.2f}{value / embed_rate:>9.3f}{value / render_rate:>9.3f}{value / slower:>9.3f}"
            f"{cpu_per_page[name]:>12.3f}{share:>7.0f}"
        )
    warm = rates["pipeline warm"]
    print(f"pipeline warm / embed alone = {warm / embed_rate:.3f} (issue target >= 0.8, and >= 8 pages/s)")
    print(
        f"CPU ceiling for render + embed on {cores} cores = {ceiling:.2f} pages/s; "
        f"pipeline warm / ceiling = {warm / ceiling:.3f}"
    )
    for label in ("pipeline cold", "pipeline warm"):
        print(f"ColBench-Frontend-v1 / v0 scoring, {label}: {rates['v1 ' + label] / rates[label]:.3f} (target >= 0.7)")
    print(f"render failures: {failed}; final statuses: {statuses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
