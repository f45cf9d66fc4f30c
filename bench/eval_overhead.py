"""Harness overhead of ``colbench eval``: turn throughput with N episodes at once, endpoint latency fixed at L.

    python bench/eval_overhead.py [--latency 1.5] [--turns 4] [--n 1,16,64,256] [--simulator scripted|stub]
                                  [--scoring quick|bwrap]

The agent is ``openai:bench`` (the real openai client through :class:`colbench.llm.LLMClient`) talking to a small
asyncio HTTP/1.1 server in its own process (keep-alive, every reply after exactly ``--latency`` seconds, never an
answer, so every episode runs to the turn cap ``--turns``). The runner is the real one: ``run_eval`` with one env
per episode (``gymnasium.make``), the agent's gate, the records written and fsync'ed, progress tallied.

Each N runs exactly N episodes with ``--concurrency N``. With the scripted simulator a turn costs one agent call, so
the ideal turn throughput is N / L turns per second (each episode needs turns x L seconds); the ratio
measured / ideal is the harness's efficiency (1.0 = no overhead at all). With ``--simulator stub`` the simulated
human goes through the same server (every turn but the last costs two calls: ideal N T / ((2 T - 1) L)). Scoring is
stubbed out by default (``quick``: every answer scores 1/1 at once) to measure the harness, not the sandbox;
``--scoring bwrap`` scores in the bubblewrap sandbox.

L = 1.5 s by default: a realistic time for one short chat completion of a hosted model (1 to 2 s). Figures depend
on the machine and its load (the load average is printed); ratios from one run on one machine compare.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from stub_server import start_stub

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.domains.backend.scorer import BackendScore
from colbench.eval import RunPlan, run_eval
from colbench.runs import load_run
from colbench.tasks import Task
from colbench.types.chat import Message


class SleepAgent:
    """No HTTP at all: every turn takes exactly L seconds on the event loop (the runner's own overhead)."""

    name = "sleep"

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        raise NotImplementedError

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        await asyncio.sleep(self.latency_s)
        return AgentReply("Could you tell me more about what you need?")

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


def _process_cpu(pid: int) -> float:
    """CPU seconds of another process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QuickScorer:
    """Every answer scores 1/1 at once: the benchmark measures the harness, not the sandbox."""

    sandbox = None

    def score(self, task: Task, answer: str) -> BackendScore:
        return BackendScore(task.task_id, tests_passed=1, tests_total=1)


# -- the measurement -----------------------------------------------------------------------------------------------


def measure(n: int, path: str, args: argparse.Namespace, base_url: str, root: Path, stub_pid: int) -> dict[str, float]:
    """N episodes at once, ``path`` ``runner`` (SleepAgent) or ``http`` (openai:bench through the stub)."""
    per_task = 1 if n == 1 else 16
    out = root / f"{path}-n{n}-t{args.turns}"
    stub_simulator = args.simulator == "stub" and path == "http"
    config = RunPlan.resolve(
        env_id="ColBench-Backend-v1",
        agent="openai:bench",
        simulator="openai:bench-human" if stub_simulator else "scripted",
        out=out,
        tasks="backend-sample",
        limit=per_task,
        trials=max(1, n // per_task),
        concurrency=n,
        max_turns=args.turns,
        sandbox="bwrap",
        progress="off",
        agent_options={"base_url": base_url, "api_key": "bench", "timeout_s": 120.0},
        simulator_options={"base_url": base_url, "api_key": "bench", "timeout_s": 120.0},
    )
    agent = SleepAgent(args.latency) if path == "runner" else None
    scorer = None if args.scoring == "bwrap" else QuickScorer()
    cpu0, stub0 = resource.getrusage(resource.RUSAGE_SELF), _process_cpu(stub_pid)
    start = time.perf_counter()
    result = run_eval(config, agent=agent, scorer=scorer, stderr=None)
    wall = time.perf_counter() - start
    cpu1, stub1 = resource.getrusage(resource.RUSAGE_SELF), _process_cpu(stub_pid)
    rows = [record.row for record in load_run(out).episodes.values()]
    if result.overall.infra or len(rows) != n:
        raise SystemExit(f"N={n}: {result.overall.infra} infra errors, {len(rows)} records: {result.summary_line()}")
    turns = sum(int(r["turns"]) for r in rows)
    calls = 2 * args.turns - 1 if stub_simulator else args.turns  # sequential calls per episode
    ideal = n * args.turns / (calls * args.latency)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"turns": turns, "wall": wall, "rate": turns / wall, "ideal": ideal, "cpu": cpu, "stub_cpu": stub1 - stub0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.5, help="seconds per LLM call (default 1.5)")
    parser.add_argument("--turns", type=int, default=4, help="agent turns per episode (default 4)")
    parser.add_argument("--n", default="1,16,64,256", help="episodes at once, comma-separated")
    parser.add_argument("--simulator", choices=("scripted", "stub"), default="scripted")
    parser.add_argument("--scoring", choices=("quick", "bwrap"), default="quick")
    parser.add_argument("--paths", default="runner,http", help="runner (no HTTP), http (openai client + stub)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    paths = args.paths.split(",")
    if any(n != 1 and n % 16 for n in sizes):
        parser.error("--n: each N must be 1 or a multiple of 16")
    if not set(paths) <= {"runner", "http"}:
        parser.error("--paths: runner and/or http")

    stub, port = start_stub(args.latency)
    base_url = f"http://127.0.0.1:{port}/v1"
    assert stub.pid is not None
    print(
        f"L = {args.latency}s per call, {args.turns} agent turns per episode, simulator {args.simulator}, "
        f"scoring {args.scoring}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start"
    )
    header = f"{'path':>6} {'N':>4} {'turns':>6} {'wall s':>7} {'turns/s':>8} {'ideal':>7} {'ratio':>6}"
    print(header + f" {'cpu s':>6} {'ms/turn':>7} {'stub cpu s':>10}")
    try:
        with tempfile.TemporaryDirectory(prefix="colbench-bench-") as tmp:
            # One short unreported run first: imports, the first connection and the first env are one-time costs.
            warm = argparse.Namespace(**{**vars(args), "turns": 1})
            measure(1, "http", warm, base_url, Path(tmp), stub.pid)
            for path in paths:
                for n in sizes:
                    m = measure(n, path, args, base_url, Path(tmp), stub.pid)
                    print(
                        f"{path:>6} {n:>4} {m['turns']:>6.0f} {m['wall']:>7.2f} {m['rate']:>8.2f} {m['ideal']:>7.2f} "
                        f"{m['rate'] / m['ideal']:>6.1%} {m['cpu']:>6.2f} {1000 * m['cpu'] / m['turns']:>7.2f} "
                        f"{m['stub_cpu']:>10.2f}"
                    )
                    sys.stdout.flush()
    finally:
        stub.terminate()
        stub.join(timeout=5)
    print(
        "ratio = measured turn throughput / ideal (N/L; N T/((2T-1) L) with the stub human); wall = the whole run_eval, "
        "set-up and fsync'ed writes included; cpu s = this process (runner + openai client), ms/turn = its CPU per "
        "turn (what N episodes answered together cost the event loop before the last of them is sent on), stub cpu "
        f"s = the stub server's process; load average {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
