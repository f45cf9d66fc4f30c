"""Scoring throughput and latency: each sandbox runtime against plain in-process ``exec``, in one run.

    python bench/score_backend.py [TASKS.jsonl] [--jobs N] [--runtimes bwrap,docker]

Scores every task's reference solution as the answer. Measured, in tasks per second:

* ``exec``: the original release's approach, in this process: exec the reference and the answer, eval each test,
  compare with ``==``. No isolation, no time limits; the baseline every ratio is against (the fastest of
  ``EXEC_ROUNDS`` rounds: a stray load spike on the machine should not flatter the ratios).
* ``<runtime> cold``: an empty reference cache (each reference runs twice to check determinism, both runs in one
  sandbox process, then the answer runs in another: two sandbox jobs, two processes per task), ``--jobs`` workers
  per pool (default: the sandbox's own default), all started before the clock starts (a pool starts once per
  process; its start-up is not a per-task cost), as many answers scored at once.
* ``<runtime> warm``: the same answers again with the reference outputs cached (the RL-training case).

Then the latency of one scoring call on a warm pool (reference cached, one call at a time): p50 and p99, and, with
``--whole``, the whole command as a user runs it (start-up, imports, the pool, reading the files, writing the
results): ``colbench score backend`` on the same answers against a process that loads the tasks and runs the
in-process ``exec`` above, both timed from outside, ``--whole`` runs each.

``--count N`` scores N tasks: the file's, then copies of them, each copy with an id of its own and a comment line
added to its reference (``# copy K``), so that it is a different reference to the cache and the cold phase stays
cold. ``--env`` picks the rules (v0, v1, v2: v2 needs tasks with plus tests, such as the bundled
``backend-sample``).

    python bench/score_backend.py --count 1000 --env ColBench-Backend-v1 --whole 3

``--profile`` then says where a cold task's time goes, per runtime: the CPU of this process (judging, JSON, the
pool's threads) against the CPU of everything else on the machine (the sandbox: its runners, their test processes,
Docker's daemons; read from ``/proc/stat``, so run it on an otherwise idle machine), the same split for a job of
one trivial test (the cost of one isolated process, the floor of a request), the ceiling those give at two such
processes per cold task (the reference's and the answer's: no answer may share a process with the reference or
with another answer), each reference run as the answer alone through the runner's per-test path (what the scorer
sends) and through the batched calls (``run_calls``, one answer a request, its default budgets), and this
process's CPU by part (a serial cold pass under cProfile).

Machines differ and are noisy: compare the ratios, which are measured in one run on one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import math
import os
import pstats
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from exec_baseline import unsafe_exec_score

from colbench._util.storage import write_jsonl_atomic
from colbench.domains.backend.plus.calls import run_calls
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.versions import scoring_options
from colbench.sandbox import make_sandbox
from colbench.sandbox.pool import WorkerPool, default_workers
from colbench.tasks import Task, load
from colbench.types.dialogue import ANSWER_MARKER

EXEC_ROUNDS = 3
ANSWER = ANSWER_MARKER + "\n"  # the final message that delivers a reference as the answer
DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def copies(tasks: list[Task], count: int) -> list[Task]:
    """``count`` tasks: ``tasks``, then copies with ids and references of their own (see the module docstring)."""
    out = list(tasks[:count])
    k = 1
    while len(out) < count:
        for task in tasks[: count - len(out)]:
            out.append(
                dataclasses.replace(
                    task, task_id=f"{task.task_id}-copy{k}", ground_truth=f"{task.ground_truth}\n# copy {k}\n"
                )
            )
        k += 1
    return out


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_split(work: Callable[[], object], n: int) -> tuple[float, float, float]:
    """Milliseconds per item of ``work()`` (``n`` items): wall, this process's CPU, the rest of the machine's CPU."""
    busy, own, started = machine_busy_s(), time.process_time(), time.perf_counter()
    work()
    wall, own, busy = time.perf_counter() - started, time.process_time() - own, machine_busy_s() - busy
    return 1000 * wall / n, 1000 * own / n, 1000 * max(0.0, busy - own) / n


PARTS = (
    ("waiting on the sandbox", ("select.select", "method 'poll'", "method 'acquire'", "method 'recv")),
    ("JSON", ("json/",)),
    ("the pool and the runtime", ("colbench/sandbox/",)),
    ("judging (plans, values, records)", ("colbench/domains/", "colbench/types/", "colbench/_util/")),
)


def host_parts(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of a cProfile run by part (``PARTS``; a function goes to the first part whose marker it shows)."""
    found = {name: 0.0 for name, _ in PARTS} | {"other": 0.0}
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename} {function}"
        part = next((name for name, marks in PARTS if any(mark in where for mark in marks)), "other")
        found[part] += row[2]  # own time
    return found


def profile(tasks: list[Task], answers: list[str], env: str, runtime: str, workers: int) -> None:
    """Where a cold task's time goes on ``runtime`` (see the module docstring)."""
    options = scoring_options(env)
    n = len(tasks)
    sandbox = make_sandbox(runtime, workers=workers)
    assert isinstance(sandbox, WorkerPool)
    try:
        sandbox.warm()
        trivial = ("def f(x):\n    return x\n", ["f(1)"])

        def jobs() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda _: sandbox.run_tests(*trivial, pool="answer"), range(n)))

        def cold() -> None:
            scorer = BackendScorer(sandbox, rules=options["rules"], plus=options["plus_tests"])
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(scorer.score, tasks, answers))

        def answers_through(batch_program: bool) -> None:
            def one(t: Task) -> object:
                calls = [e for _, e in t.test_cases]
                if batch_program:
                    return run_calls(sandbox, t.ground_truth, calls, pool="answer")
                return sandbox.run_tests(t.ground_truth, calls, pool="answer")

            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, tasks))

        jobs()  # the workers' first jobs (imports on demand) are not the floor
        floor = cpu_split(jobs, n)
        task = cpu_split(cold, n)
        through = {name: cpu_split(partial(answers_through, b), n) for name, b in (("runner", False), ("batch", True))}
        scorer = BackendScorer(sandbox, rules=options["rules"], plus=options["plus_tests"])
        profiler = cProfile.Profile()
        profiler.enable()
        for t, a in zip(tasks, answers, strict=True):
            scorer.score(t, a)
        profiler.disable()
    finally:
        sandbox.close()
    cores = os.cpu_count() or 1
    print(f"profile, {runtime}, {n} tasks cold, {workers} workers per pool, {cores} cores (ms of CPU per item)")
    print(f"{'item':<52}{'wall':>8}{'host CPU':>10}{'sandbox CPU':>13}")
    print(f"{'a job of one trivial test':<52}{floor[0]:>8.2f}{floor[1]:>10.2f}{floor[2]:>13.2f}")
    print(f"{'a cold task (' + env + ')':<52}{task[0]:>8.2f}{task[1]:>10.2f}{task[2]:>13.2f}")
    # the task's host CPU already holds what sending its two jobs costs the host: only their sandbox side is added
    ceiling = 1000 * cores / (2 * floor[2] + task[1])
    print(
        f"ceiling at two isolated processes a cold task (2 floor jobs' sandbox CPU + the task's host CPU over "
        f"{cores} cores): {ceiling:.0f} tasks/s"
    )
    for name, label in (("runner", "the runner's tests"), ("batch", "the batched calls")):
        wall, own, other = through[name]
        print(f"{'an answer alone, ' + label:<52}{wall:>8.2f}{own:>10.2f}{other:>13.2f}")
    parts = host_parts(pstats.Stats(profiler))
    total = sum(parts.values()) or 1.0
    print(
        "host, a serial cold pass (cProfile, own time): "
        + ", ".join(
            f"{name} {1000 * seconds / n:.2f} ms ({100 * seconds / total:.0f}%)" for name, seconds in parts.items()
        )
    )


def whole_command(tasks: list[Task], env: str, runtimes: list[str], runs: int) -> None:
    """Both whole commands, ``runs`` times each in turn; the median wall time of each, and the rate ratio."""
    with tempfile.TemporaryDirectory() as work:
        tasks_file, answers_file = Path(work, "tasks.jsonl"), Path(work, "answers.jsonl")
        write_jsonl_atomic(tasks_file, (t.to_row() for t in tasks))
        write_jsonl_atomic(answers_file, ({"task_id": t.task_id, "answer": ANSWER + t.ground_truth} for t in tasks))
        commands = {
            "exec (unsafe)": [sys.executable, str(Path(__file__).with_name("exec_baseline.py")), str(tasks_file)]
        }
        for runtime in runtimes:
            commands[f"colbench {runtime}"] = [
                *(sys.executable, "-m", "colbench", "score", "backend", "--tasks", str(tasks_file)),
                *("--answers", str(answers_file), "--out", str(Path(work, "out.jsonl")), "--env", env),
                *("--sandbox", runtime),
            ]
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                started = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True, cwd=work)
                seconds[name].append(time.perf_counter() - started)
    medians = {name: sorted(times)[len(times) // 2] for name, times in seconds.items()}
    base = rate(len(tasks), medians["exec (unsafe)"])
    print(f"whole command, {len(tasks)} answers, median of {runs} (each from a cold start, cold caches)")
    print(f"{'command':<16}{'seconds':>10}{'tasks/s':>10}{'ratio to exec':>16}")
    for name, median in medians.items():
        r = rate(len(tasks), median)
        print(f"{name:<16}{median:>10.2f}{r:>10.1f}{r / base:>16.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", default=str(DEFAULT_TASKS))
    parser.add_argument("--jobs", type=int, default=None, help="sandbox workers per pool (default: the sandbox's)")
    parser.add_argument("--runtimes", default="bwrap,docker", help="comma-separated: bwrap, docker")
    parser.add_argument("--count", type=int, default=None, help="tasks scored (copies beyond the file's)")
    parser.add_argument("--env", default="ColBench-Backend-v1", help="the env id whose rules score")
    parser.add_argument("--whole", type=int, default=0, metavar="RUNS", help="also time the whole commands")
    parser.add_argument("--profile", action="store_true", help="also say where a cold task's time goes")
    args = parser.parse_args()
    if not Path(args.tasks).exists() and args.tasks == str(DEFAULT_TASKS):
        print(f"no task file at {args.tasks}: pass a ColBench backend JSONL or split", file=sys.stderr)
        return 2
    tasks = load(args.tasks)
    tasks = copies(tasks, args.count or len(tasks))
    options = scoring_options(args.env)
    answers = [ANSWER + t.ground_truth for t in tasks]

    # references write files into their working directory
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
        warnings.simplefilter("ignore")  # numpy warnings from references (NaN) would clutter the table
        unsafe_s = math.inf
        for _ in range(EXEC_ROUNDS):
            started = time.perf_counter()
            unsafe_passed = sum(
                unsafe_exec_score(t.ground_truth, [e for _, e in t.test_cases], t.ground_truth) for t in tasks
            )
            unsafe_s = min(unsafe_s, time.perf_counter() - started)

    n = len(tasks)
    base = rate(n, unsafe_s)
    workers = args.jobs or default_workers()
    print(
        f"{n} tasks, {sum(len(t.test_cases) for t in tasks)} tests, {workers} sandbox workers per pool, "
        f"{os.cpu_count()} cores, {args.env}"
    )
    print(f"{'mode':<16}{'tasks/s':>10}{'ratio to exec':>16}{'tests passed':>15}")
    print(f"{'exec (unsafe)':<16}{base:>10.1f}{1.0:>16.3f}{unsafe_passed:>15}")
    latencies = {}
    for runtime in args.runtimes.split(","):
        sandbox = make_sandbox(runtime, workers=workers)
        assert isinstance(sandbox, WorkerPool)
        try:
            scorer = BackendScorer(sandbox, rules=options["rules"], plus=options["plus_tests"])
            sandbox.warm()  # start every worker of both pools, so start-up is not billed to the first tasks
            for label in ("cold", "warm"):
                started = time.perf_counter()
                with ThreadPoolExecutor(workers) as pool:
                    scores = list(pool.map(scorer.score, tasks, answers))
                r = rate(n, time.perf_counter() - started)
                passed = sum(s.tests_passed for s in scores)
                print(f"{runtime + ' ' + label:<16}{r:>10.1f}{r / base:>16.3f}{passed:>15}", flush=True)
            one = []
            for task, answer in zip(tasks, answers, strict=True):
                started = time.perf_counter()
                scorer.score(task, answer)
                one.append(time.perf_counter() - started)
            latencies[runtime] = one
        finally:
            sandbox.close()
    for runtime, one in latencies.items():
        ms = sorted(x * 1000 for x in one)
        p50, p99 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(f"latency of one scoring call, {runtime} warm pool: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    if args.whole:
        whole_command(tasks, args.env, args.runtimes.split(","), args.whole)
    if args.profile:
        fresh = copies(tasks, len(tasks) * 2)[len(tasks) :]  # references no phase above has run
        for runtime in args.runtimes.split(","):
            with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
                profile(fresh, answers, args.env, runtime, workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
