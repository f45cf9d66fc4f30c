"""RL rollout throughput in one process: episodes/s of N episodes stepped together, for a rollout worker.

    python bench/rollouts.py [--n 1,16,64,256] [--latency 0.5] [--rounds 2] [--humans scripted,stub]
                             [--modes vector,sync-shared,sync-private]

Every episode asks one question (one simulated-human reply) and then answers with the task's reference, scored in
the bubblewrap sandbox: the work of a real rollout without a policy model. Rounds of N episodes: round 1 with a
cold reference cache, the next rounds warm. Modes, all measured in this run:

- ``vector``: ``gym.make_vec(id, num_envs=N)``, colbench's vector env (all sub-envs step together on one event loop;
  one simulator client; the process's shared scorer: one sandbox pool, one reference cache);
- ``sync-shared``: Gymnasium's sync vector env over the same envs (one sub-env after the other, shared scorer);
- ``sync-private``: Gymnasium's sync vector env where each sub-env has its own scorer and so its own reference cache
  (colbench's default before 0.3: the baseline);
- ``vector-truth-off`` (ask for it with ``--modes``): ``vector`` with the human's claims not checked
  (``truth_policy="off"``): ``claims`` prints what checking them (the default) costs, in this run.

Humans: ``scripted`` (instant canned replies: the CPU cost of the env and of scoring) and ``stub`` (an
OpenAI-compatible server in its own process answering after exactly ``--latency`` seconds, through the real openai
client). With the stub, the question step of a round cannot take less than one latency (every reply in flight at
once: N / latency replies per second, the ideal); ``replies vs ideal`` is latency / the step's time, and ``CPU
ms/reply`` this process's CPU in that step per episode (what delays the step past one latency; the stub server's own
CPU is printed at the end, to show it is not what is measured). ``vs baseline``
compares each mode with sync-private at the same N and human, in this run. Figures depend on the machine and its load; ratios from one run compare.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from stub_server import start_stub

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.humans.simulator import ScriptedSimulator
from colbench.sandbox import shared_sandbox
from colbench.tasks import Task, load

ASK = "What should happen with an empty input?"
ENV_ID = "ColBench-Backend-v1"


def make(mode: str, n: int, tasks: list[Task], human: dict[str, Any]) -> Any:
    """A fresh vector env of ``mode`` whose scorers start with empty reference caches."""
    sandbox = shared_sandbox("bwrap")
    if mode == "vector":
        return gym.make_vec(ENV_ID, num_envs=n, tasks=tasks, scorer=BackendScorer(sandbox), **human)
    if mode == "vector-truth-off":  # the human's claims not checked: what checking them costs, in the same run
        return gym.make_vec(ENV_ID, num_envs=n, tasks=tasks, scorer=BackendScorer(sandbox), truth_policy="off", **human)
    if mode == "sync-shared":
        scorer = BackendScorer(sandbox)
        return gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync", tasks=tasks, scorer=scorer, **human)
    if mode == "sync-private":
        fns = [lambda: gym.make(ENV_ID, tasks=tasks, scorer=BackendScorer(sandbox), **human) for _ in range(n)]
        return gym.vector.SyncVectorEnv(fns)
    raise ValueError(mode)


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds of this process (all its threads) or of another one (Linux /proc; 0 elsewhere)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rounds(vec: Any, tasks: dict[str, Task], count: int) -> list[tuple[float, float, float]]:
    """(seconds of the round, seconds of its question step, CPU seconds of this process in that step) per round of
    N episodes (ask, answer; the autoreset step that starts the next round is not counted)."""
    n = vec.num_envs
    _, infos = vec.reset(seed=0)
    times = []
    for _ in range(count):
        start, cpu = time.perf_counter(), cpu_seconds()
        vec.step([ASK] * n)
        asked, asked_cpu = time.perf_counter(), cpu_seconds()
        _, rewards, terms, _, _ = vec.step([f"I WANT TO ANSWER:\n{tasks[t].ground_truth}" for t in infos["task_id"]])
        times.append((time.perf_counter() - start, asked - start, asked_cpu - cpu))
        assert terms.all() and (rewards == 1.0).all(), "a reference answer did not score 1"
        _, _, _, _, infos = vec.step([None] * n)  # the autoreset: the next episodes' first observations
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1,16,64,256")
    parser.add_argument("--latency", type=float, default=0.5, help="the stub human's seconds per reply")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per measurement (the first is cold)")
    parser.add_argument("--humans", default="scripted,stub")
    parser.add_argument("--modes", default="vector,sync-shared,sync-private")
    parser.add_argument(
        "--sync-max-n",
        type=int,
        default=64,
        help="stub human: skip the sync modes above this N (N x latency per round)",
    )
    parser.add_argument("--tasks", default="backend-sample")
    args = parser.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    modes, humans = args.modes.split(","), args.humans.split(",")
    tasks = load(args.tasks)
    by_id = {t.task_id: t for t in tasks}
    # Start the sandbox's workers and fill its pools (they start on demand) so no mode pays for them.
    rounds(make("vector", 16, tasks, {"simulator": ScriptedSimulator(["Return 0."])}), by_id, 1)
    stub, port = start_stub(args.latency)
    stub_human = {
        "simulator": "openai:bench",
        "simulator_options": {"base_url": f"http://127.0.0.1:{port}/v1", "api_key": "bench"},
    }
    print(
        f"{len(tasks)} tasks ({args.tasks}), one question + one answer per episode, bwrap scoring; stub latency "
        f"{args.latency}s; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start"
    )
    print(
        f"{'human':>8} {'N':>4} {'mode':>12} {'cold ep/s':>10} {'warm ep/s':>10} {'replies vs ideal':>17} "
        f"{'CPU ms/reply':>12}"
    )
    stub_cpu = cpu_seconds(stub.pid)
    try:
        for human_name in humans:
            for n in sizes:
                measured: dict[str, tuple[float, float]] = {}
                for mode in modes:
                    if human_name == "stub" and not mode.startswith("vector") and n > args.sync_max_n:
                        print(f"{human_name:>8} {n:>4} {mode:>12} skipped (--sync-max-n {args.sync_max_n})")
                        continue
                    human = stub_human if human_name == "stub" else {"simulator": ScriptedSimulator(["Return 0."])}
                    vec = make(mode, n, tasks, human)
                    times = rounds(vec, by_id, args.rounds)
                    vec.close()
                    warm_times = times[1:] or times
                    cold = n / times[0][0]
                    warm = n / (sum(t for t, _, _ in warm_times) / len(warm_times))
                    measured[mode] = (cold, warm)
                    asked = sum(a for _, a, _ in warm_times) / len(warm_times)
                    ideal = f"{args.latency / asked:>17.1%}" if human_name == "stub" else f"{'-':>17}"
                    per_reply = 1000 * sum(c for _, _, c in warm_times) / len(warm_times) / n
                    print(f"{human_name:>8} {n:>4} {mode:>12} {cold:>10.1f} {warm:>10.1f} {ideal} {per_reply:>12.2f}")
                    sys.stdout.flush()
                unchecked = measured.get("vector-truth-off")
                if unchecked is not None and "vector" in measured:
                    print(
                        f"{'':>8} {n:>4} {'claims':>12}  checked / not checked: {measured['vector'][1] / unchecked[1]:.3f}x warm"
                    )
                base = measured.get("sync-private")
                if base is not None and len(measured) > 1:
                    ratios = ", ".join(
                        f"{m} {c / base[0]:.2f}x cold, {w / base[1]:.2f}x warm"
                        for m, (c, w) in measured.items()
                        if m != "sync-private"
                    )
                    print(f"{'':>8} {n:>4} {'vs baseline':>12}  {ratios}")
        stub_cpu = cpu_seconds(stub.pid) - stub_cpu
    finally:
        stub.terminate()
        stub.join(timeout=5)
    print(
        "ep/s = episodes per second of a round, question and scored answer (cold: the first round, empty reference "
        "caches; warm: the rest); replies vs ideal = latency / time of the question step (all N replies in flight "
        "at once = 100%), stub human only; CPU ms/reply = this process's CPU in the question step per episode (env, "
        "openai client, leak check: what N replies cost before the last one is sent and after the first is back); "
        "baseline = sync-private (one reference cache per env); "
        f"the stub server used {stub_cpu:.2f} CPU s in all; load average {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
