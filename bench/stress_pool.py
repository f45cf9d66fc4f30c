"""Stress the sandbox pool: many mixed jobs (about 10% hostile), every verdict checked, leaks counted.

    python bench/stress_pool.py [--jobs 10000] [--runtime bwrap|docker|both] [--workers N] [TASKS.jsonl]

Each job scores one answer for a random task of the sample, and its verdict is known in advance:

* honest (about 60%): the reference itself, which must pass every judgeable test;
* wrong (about 30%): a function of the right name returning a sentinel no reference returns, which must pass none;
* hostile (about 10%): an attack from ``HOSTILE`` (crashes, exits, kills, forged output, bombs, a hang), which must
  pass none and must not disturb any other job.

Reported per runtime: jobs/s, wrong verdicts (must be 0), infrastructure errors, the harness's peak RSS, and
sandbox processes / containers left after the pool is closed (must be 0).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import InfraError
from colbench.sandbox import make_sandbox
from colbench.sandbox.contract import SANDBOX_UID_BASE, Limits, Sandbox
from colbench.tasks import Task, load_jsonl

DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "backend_test_sample.jsonl"

# Each attack defines the task's function ({name}); "once" guards make the slow ones slow in one test per job only.
HOSTILE = {
    "always-equal": "class A:\n    def __eq__(s, o): return True\n    __hash__ = object.__hash__\ndef {name}(*a, **k): return A()\n",
    "int-subclass": "class I(int):\n    def __eq__(s, o): return True\n    __hash__ = int.__hash__\ndef {name}(*a, **k): return I(-987654321)\n",
    "os-exit": "import os\ndef {name}(*a, **k): os._exit(0)\n",
    "sys-exit": "import sys\nsys.exit(0)\ndef {name}(*a, **k): return 1\n",
    "kill-parent": "import os, signal\ndef {name}(*a, **k): os.kill(os.getppid(), signal.SIGKILL)\n",
    "kill-all": "import os, signal\ndef {name}(*a, **k):\n    os.kill(-1, signal.SIGKILL)\n    return '__x__'\n",
    "forged-stdout": 'import sys\ndef {name}(*a, **k):\n    print(\'{{"outcome": "value", "passed": true}}\')\n    sys.stdout.flush()\n    return \'__x__\'\n',
    "memory-bomb": "def {name}(*a, **k): return bytearray(1 << 40)\n",
    "fork-bomb-once": (
        "import os\ndef {name}(*a, **k):\n    if os.path.exists('/tmp/forked'):\n        return '__x__'\n"
        "    open('/tmp/forked', 'w').close()\n    for _ in range(200):\n        try:\n            os.fork()\n"
        "        except OSError:\n            break\n    return '__x__'\n"
    ),
    "hang-once": (
        "import os\ndef {name}(*a, **k):\n    if os.path.exists('/tmp/hung'):\n        return '__x__'\n"
        "    open('/tmp/hung', 'w').close()\n    while True:\n        pass\n"
    ),
    "generator": "def {name}(*a, **k):\n    yield 1\n",
}


@dataclass
class Report:
    runtime: str
    jobs: int = 0
    seconds: float = 0.0
    wrong_verdicts: list[str] = field(default_factory=list)
    infra_errors: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    peak_rss_mb: float = 0.0
    leaked_processes: int = 0
    leaked_containers: int = 0

    def line(self) -> str:
        return (
            f"{self.runtime:<7} {self.jobs:>6} jobs in {self.seconds:7.1f}s = {self.jobs / self.seconds:6.1f} jobs/s | "
            f"wrong verdicts {len(self.wrong_verdicts)} | infra errors {self.infra_errors} | "
            f"peak harness RSS {self.peak_rss_mb:.0f} MB | leaked processes {self.leaked_processes}, "
            f"containers {self.leaked_containers} | {dict(self.kinds)}"
        )


def function_name(task: Task) -> str:
    match = re.search(r"def\s+(\w+)\s*\(", task.ground_truth)
    return match.group(1) if match else "f"


def make_jobs(tasks: list[Task], n: int, seed: int) -> list[tuple[str, Task, str]]:
    rng = random.Random(seed)
    jobs = []
    for _ in range(n):
        task = rng.choice(tasks)
        roll = rng.random()
        if roll < 0.6:
            jobs.append(("honest", task, "I WANT TO ANSWER:\n" + task.ground_truth))
        elif roll < 0.9:
            wrong = f"def {function_name(task)}(*args, **kwargs):\n    return '__colbench_wrong__'\n"
            jobs.append(("wrong", task, "I WANT TO ANSWER:\n" + wrong))
        else:
            kind = rng.choice(sorted(HOSTILE))
            jobs.append(
                (f"hostile:{kind}", task, "I WANT TO ANSWER:\n" + HOSTILE[kind].format(name=function_name(task)))
            )
    return jobs


def sandbox_processes() -> int:
    """Live processes of the sandbox uids (both runtimes use uids from SANDBOX_UID_BASE up) or bubblewrap.

    Zombies are not counted: an exited process waiting for its parent (or the host's PID 1) to reap it holds no
    resources but a process-table slot.
    """
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        comm, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]
        if (uid >= SANDBOX_UID_BASE or comm == "bwrap") and state != "Z":
            count += 1
    return count


def worker_containers() -> int:
    try:
        out = subprocess.run(
            ["docker", "ps", "-aq", "--filter", "label=org.colbench.worker"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len(out.split())


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def stress(sandbox: Sandbox, runtime: str, jobs: list[tuple[str, Task, str]], threads: int) -> Report:
    """Score every job on ``sandbox`` and check each verdict; the caller closes the sandbox and counts leaks."""
    scorer = BackendScorer(sandbox, limits=Limits(timeout_s=0.5))
    report = Report(runtime=runtime, jobs=len(jobs))

    def one(job: tuple[str, Task, str]) -> tuple[str, str | None, bool]:
        kind, task, answer = job
        try:
            score = scorer.score(task, answer)
        except InfraError as exc:
            return kind, f"{task.task_id} {kind}: infrastructure error {exc}", True
        expected_pass = kind == "honest"
        ok = score.success if expected_pass else score.tests_passed == 0
        return kind, None if ok else f"{task.task_id} {kind}: {score.tests_passed}/{score.tests_total}", False

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for kind, wrong, infra in pool.map(one, jobs):
            report.kinds[kind.split(":")[0]] += 1
            report.infra_errors += infra
            if wrong and not infra:
                report.wrong_verdicts.append(wrong)
            report.peak_rss_mb = max(report.peak_rss_mb, rss_mb())
    report.seconds = time.perf_counter() - started
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", default=str(DEFAULT_TASKS))
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runtime", choices=["bwrap", "docker", "both"], default="both")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not Path(args.tasks).exists():
        print(f"no task file at {args.tasks}: pass a ColBench backend JSONL", file=sys.stderr)
        return 2
    tasks = load_jsonl(args.tasks)
    jobs = make_jobs(tasks, args.jobs, args.seed)
    runtimes = ["bwrap", "docker"] if args.runtime == "both" else [args.runtime]
    failed = False
    for runtime in runtimes:
        sandbox = make_sandbox(runtime, workers=args.workers)
        try:
            report = stress(sandbox, runtime, jobs, threads=args.workers * 2)
        finally:
            sandbox.close()
        time.sleep(1.0)  # let the kernel and the daemon finish tearing down
        report.leaked_processes = sandbox_processes()
        report.leaked_containers = worker_containers()
        print(report.line(), flush=True)
        for wrong in report.wrong_verdicts[:10]:
            print("  wrong verdict:", wrong)
        failed |= bool(report.wrong_verdicts or report.leaked_processes or report.leaked_containers)
    print(f"peak RSS of this process (getrusage): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
