"""Scale-out on Ray: episodes/s and tasks/s with 1, 2 and 4 local nodes against the single-node path, in one run.

    python bench/scale.py [--nodes 1,2,4] [--episodes 256] [--concurrency 64] [--latency 0.5] [--tasks FILE.jsonl]

Two workloads, each first on the single-node path (no Ray: the baseline every ratio is against), then on a local Ray
cluster (``ray.cluster_utils.Cluster``: a head with no ColBench unit, the driver's node, plus K worker nodes with
one ``colbench_sandbox`` unit each, so K actors):

* latency-bound: ``colbench eval`` of ``--episodes`` episodes (one per task: trials of one task would be answered
  from the reply cache), ``--concurrency`` at once, the agent asking every
  turn (``scripted:ask``) and the simulated human an OpenAI-compatible stub answering each request after exactly
  ``--latency`` seconds (bench/stub_server.py) through the real openai client; 3 turns, so 2 replies per episode.
  Ideal: concurrency / (2 x latency) episodes/s.
* CPU-bound: ``colbench score backend`` of every task's reference answer (the 300-task sample of the real test
  split when ../shared is there, else the bundled sample repeated) with a cold reference cache, bubblewrap sandbox;
  ``--jobs`` is 3 on the single-node path (the sandbox's default on 2 cores) and 3 / K per node on the cluster.

On one machine, K nodes share its cores: the CPU-bound rows show what Ray costs, not what more machines give
(that is K times one node's rate, less the driver's share: see docs/scale.md). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from stub_server import start_stub

from colbench.cli.main import main as cli_main
from colbench.eval import RunPlan, run_eval
from colbench.ray.score_actors import RayScoring
from colbench.runs import load_run
from colbench.tasks import load_jsonl, load_split

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"


def eval_rate(
    out: Path, args: argparse.Namespace, tasks: str, count: int, base_url: str, ray_address: str | None
) -> tuple[float, float]:
    """Episodes per second over the whole run and after the first episode started (the actors' start-up)."""
    # one episode per task: trials of one task would ask the human the same questions, answered from the cache
    trials = -(-args.episodes // count)
    config = RunPlan.resolve(
        env_id="ColBench-Backend-v1",
        agent="scripted:ask",
        simulator="openai:bench-human",
        simulator_options={"base_url": base_url, "api_key": "bench", "timeout_s": 120.0},
        out=out,
        tasks=tasks,
        limit=min(count, args.episodes),
        trials=trials,
        concurrency=args.concurrency,
        max_turns=3,
        sandbox="bwrap",
        progress="off",
        ray=ray_address,
    )
    started, start = time.time(), time.perf_counter()
    result = run_eval(config, stderr=None)
    wall = time.perf_counter() - start
    if result.overall.infra or result.overall.ok != result.total:
        raise SystemExit(f"eval: {result.summary_line()}")
    first = min(
        datetime.fromisoformat(r.row["timings"]["started"]).timestamp() for r in load_run(out).episodes.values()
    )
    startup = max(0.0, first - started)
    return result.total / wall, result.total / max(1e-9, wall - startup)


def score_rate(
    out: Path, answers: Path, tasks: str, jobs: int, ray_address: str | None, count: int
) -> tuple[float, float]:
    """Tasks per second over the whole command and without the actors' start-up (Ray only)."""
    argv = ["score", "backend", "--tasks", tasks, "--answers", str(answers), "--out", str(out), "--sandbox", "bwrap"]
    argv += ["--jobs", str(jobs)]
    if ray_address is not None:
        argv += ["--ray", ray_address]
    startup = [0.0]
    real_init = RayScoring.__init__

    def timed_init(self: RayScoring, *a: object, **k: object) -> None:
        mark = time.perf_counter()
        real_init(self, *a, **k)  # type: ignore[arg-type]
        startup[0] = time.perf_counter() - mark

    RayScoring.__init__ = timed_init  # type: ignore[method-assign]
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli_main(argv)
    finally:
        RayScoring.__init__ = real_init  # type: ignore[method-assign]
    if code != 0:
        raise SystemExit("score failed")
    wall = time.perf_counter() - start
    return count / wall, count / (wall - startup[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,2,4", help="worker nodes per cluster, comma-separated")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per simulated-human reply")
    parser.add_argument("--tasks", help="tasks to score (default: the 300-task sample, else the bundled one)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    import json

    import ray
    from ray.cluster_utils import Cluster

    tasks_spec = args.tasks or (str(SHARED) if SHARED.exists() else "backend-sample")
    tasks = load_jsonl(tasks_spec) if tasks_spec.endswith(".jsonl") else load_split(tasks_spec)
    stub, port = start_stub(args.latency)
    base_url = f"http://127.0.0.1:{port}/v1"
    ideal = args.concurrency / (2 * args.latency)
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; eval: {args.episodes} episodes, "
        f"{args.concurrency} at once, human latency {args.latency}s (ideal {ideal:.1f} episodes/s); "
        f"score: {len(tasks)} reference answers from {tasks_spec}, cold cache"
    )
    print(
        f"{'path':>14} {'episodes/s':>10} {'steady':>7} {'ratio':>6} {'of ideal':>9} {'tasks/s':>8} {'steady':>7} {'ratio':>6}"
    )
    try:
        with tempfile.TemporaryDirectory(prefix="colbench-scale-") as tmp:
            root = Path(tmp)
            answers = root / "answers.jsonl"
            answers.write_text(
                "".join(json.dumps({"task_id": t.task_id, "answer": t.ground_truth}) + "\n" for t in tasks)
            )
            # a short unreported run: imports and the first sandbox workers are one-time costs
            score_rate(root / "warm.jsonl", answers, tasks_spec, 2, None, len(tasks))
            base_eval, _ = eval_rate(root / "local", args, tasks_spec, len(tasks), base_url, None)
            base_score, _ = score_rate(root / "local.jsonl", answers, tasks_spec, 3, None, len(tasks))
            print(
                f"{'single node':>14} {base_eval:>10.1f} {'':>7} {1:>6.2f} {base_eval / ideal:>9.1%} "
                f"{base_score:>8.1f} {'':>7} {1:>6.2f}"
            )
            sys.stdout.flush()
            for k in (int(x) for x in args.nodes.split(",")):
                cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
                for _ in range(k):
                    cluster.add_node(num_cpus=1, resources={"colbench_sandbox": 1})
                cluster.wait_for_nodes()
                ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
                try:
                    rate, steady = eval_rate(root / f"ray{k}", args, tasks_spec, len(tasks), base_url, cluster.address)
                    jobs = max(1, 3 // k)
                    tps, tsteady = score_rate(
                        root / f"ray{k}.jsonl", answers, tasks_spec, jobs, cluster.address, len(tasks)
                    )
                finally:
                    ray.shutdown()
                    cluster.shutdown()
                print(
                    f"{f'ray, {k} node(s)':>14} {rate:>10.1f} {steady:>7.1f} {rate / base_eval:>6.2f} "
                    f"{rate / ideal:>9.1%} {tps:>8.1f} {tsteady:>7.1f} {tps / base_score:>6.2f}"
                )
                sys.stdout.flush()
    finally:
        stub.terminate()
        stub.join(timeout=5)
    print(
        "steady = the same without the actors' start-up (from the run's start to its first episode; the scorer's "
        f"construction); ratio = rate / the single-node path's in this run; load average {os.getloadavg()[0]:.1f} at "
        "the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
