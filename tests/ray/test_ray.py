"""ColBench on a local multi-node Ray cluster: several raylets on this machine (``ray.cluster_utils.Cluster``),
three of them offering the ``colbench_sandbox`` resource, the head none (the driver's node, as a learner's would be).

What must hold: results do not depend on where they ran (per-task scores with and without Ray are equal), a node
killed mid-run loses no episode and doubles none in the run directory, a killed driver continues with ``--resume``,
sandbox workers killed under a run are replaced, and the Ray vector env steps like the local one and survives the
loss of a shard's node. Answers come from a local OpenAI-compatible stub (real HTTP from every node's actors): for
every third task the reference, for the next a wrong function, for the next a hostile one that kills its runner.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import StubOpenAIServer

from colbench.cli.main import main as cli_main
from colbench.eval import EvalResult, RunPlan, run_eval
from colbench.ray.eval_actors import run_eval as run_eval_on_ray
from colbench.tasks import load_split
from colbench.types.task import Task

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'colbench[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.slow

WORKER_NODES = 3
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "resources": {"colbench_sandbox": 1},
    "object_store_memory": 80 * 1024 * 1024,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024},
    )
    for _ in range(WORKER_NODES):
        c.add_node(**NODE_ARGS)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_split("backend-sample")


def _answer(task: Task, index: int) -> str:
    name = re.search(r"def (\w+)", task.ground_truth)
    assert name is not None
    if index % 3 == 0:
        return task.ground_truth
    if index % 3 == 1:
        return f"def {name.group(1)}(*args, **kwargs):\n    return 0\n"
    return f"import os, signal\n\ndef {name.group(1)}(*args, **kwargs):\n    os.kill(os.getppid(), signal.SIGKILL)\n"


class AnsweringAgent:
    """The stub's responder: asks once, then answers with the task's scripted answer (by its description)."""

    def __init__(self, tasks: list[Task]) -> None:
        self.answers = {t.problem_description[:200]: _answer(t, i) for i, t in enumerate(tasks)}

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return "Could you tell me what the function should return for an empty input?"
        first = messages[0]["content"] if messages[0]["role"] == "user" else messages[1]["content"]
        for description, answer in self.answers.items():
            if description in first:
                return f"I WANT TO ANSWER:\n```python\n{answer}```"
        raise AssertionError("unknown task")


@pytest.fixture(scope="module")
def stub(tasks: list[Task]) -> Iterator[StubOpenAIServer]:
    with StubOpenAIServer(AnsweringAgent(tasks), latency_s=0.3) as server:
        yield server


def _config(out: Path, stub: StubOpenAIServer, **overrides: Any) -> RunPlan:
    values: dict[str, Any] = {
        "env_id": "ColBench-Backend-v1",
        "agent": "openai:stub-agent",
        "agent_options": {"base_url": stub.base_url, "max_retries": 0},
        "simulator": "scripted",
        "tasks": "backend-sample",
        "out": out,
        "concurrency": 6,
        "max_turns": 3,
        "sandbox": "bwrap",
        "progress": "off",
        **overrides,
    }
    return RunPlan.resolve(**values)


def _rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines() if line.strip()]


def _scores(run: Path) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (r["task_id"], r["trial"]): (r["status"], r["reward"], r["success"], json.dumps(r["score"], sort_keys=True))
        for r in _rows(run)
    }


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory, stub: StubOpenAIServer) -> Path:
    out = tmp_path_factory.mktemp("local") / "run"
    result = run_eval(_config(out, stub, trials=2))
    assert result.overall.ok == 40
    return out


def test_per_task_scores_are_the_same_with_and_without_ray(
    cluster: Cluster, stub: StubOpenAIServer, local_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from colbench.llm import specs

    parsed: list[str] = []
    real = specs._parse
    monkeypatch.setattr(specs, "_parse", lambda spec: parsed.append(spec) or real(spec))
    out = tmp_path / "ray"
    plan = _config(out, stub, trials=2, ray=cluster.address)
    result = run_eval_on_ray(plan)
    assert result.overall.ok == 40
    assert parsed == [plan.agent.text, plan.simulator.text]  # once per role; the actors get the parsed plan
    assert _scores(out) == _scores(local_run)
    rewards = Counter(r["reward"] for r in _rows(out))
    assert rewards[1.0] >= 7 and rewards[0.0] >= 14  # the answers differ: the comparison is not all-equal
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["runtime"]["ray"] == cluster.address
    assert "ray" not in json.loads((local_run / "run.json").read_text())["runtime"]


def test_endpoints_the_driver_resolved_reach_every_node(
    cluster: Cluster, stub: StubOpenAIServer, local_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL and key come from the driver's environment, set after the nodes started (they cannot see it)."""
    monkeypatch.setenv("COLBENCH_AGENT_BASE_URL", stub.base_url)
    monkeypatch.setenv("COLBENCH_AGENT_API_KEY", "sk-driver-only")
    out = tmp_path / "env"
    seen = len(stub.headers)
    result = run_eval_on_ray(_config(out, stub, agent_options={"max_retries": 0}, limit=3, ray=cluster.address))
    assert result.overall.ok == 3
    assert {h.get("authorization") for h in stub.headers[seen:]} == {"Bearer sk-driver-only"}
    assert "sk-driver-only" not in (out / "run.json").read_text()
    local = _scores(local_run)
    assert all(local[key] == value for key, value in _scores(out).items())


def test_a_run_without_ray_never_imports_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from colbench.cli.main import main\n"
        f"code = main(['eval', '--env', 'ColBench-Backend-v1', '--agent', 'scripted:reference', '--simulator', "
        f"'scripted', '--tasks', 'backend-sample', '--limit', '2', '--sandbox', 'bwrap', '--quiet', "
        f"'--out', {str(tmp_path / 'run')!r}])\n"
        "assert code == 0, code\n"
        "print('ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_scoring_on_ray_gives_the_local_results_in_answer_order(
    cluster: Cluster, tasks: list[Task], tmp_path: Path
) -> None:
    answers = tmp_path / "answers.jsonl"
    rows = [{"task_id": t.task_id, "answer": _answer(t, i)} for i, t in enumerate(tasks)] * 3
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["score", "backend", "--tasks", "backend-sample", "--answers", str(answers), "--sandbox", "bwrap"]
    common += ["--env", "ColBench-Backend-v1"]  # the task's own tests: what these scores are compared with
    assert cli_main([*common, "--out", str(tmp_path / "local.jsonl"), "--jobs", "2"]) == 0
    assert cli_main([*common, "--out", str(tmp_path / "ray.jsonl"), "--jobs", "1", "--ray", cluster.address]) == 0
    local = (tmp_path / "local.jsonl").read_text().splitlines()
    remote = (tmp_path / "ray.jsonl").read_text().splitlines()
    assert len(remote) == len(rows) == 60
    assert remote == local
    assert [json.loads(line)["task_id"] for line in remote] == [r["task_id"] for r in rows]


@pytest.mark.browser
def test_frontend_scoring_on_ray_renders_on_the_nodes_and_agrees(cluster: Cluster, tmp_path: Path) -> None:
    pages = load_split("frontend-sample")[:8]
    rows = [
        {"task_id": t.task_id, "answer": t.ground_truth if i % 2 == 0 else pages[(i + 3) % 8].ground_truth}
        for i, t in enumerate(pages)
    ]
    rows.append({"task_id": pages[0].task_id, "answer": "<html><body><script>while(true){}</script></body></html>"})
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["score", "frontend", "--tasks", "frontend-sample", "--answers", str(answers), "--embedder", "test"]
    assert cli_main([*common, "--out", str(tmp_path / "local.jsonl")]) == 0
    assert cli_main([*common, "--out", str(tmp_path / "ray.jsonl"), "--jobs", "1", "--ray", cluster.address]) == 0
    local = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    remote = [json.loads(line) for line in (tmp_path / "ray.jsonl").read_text().splitlines()]
    assert [r["status"] for r in remote] == [r["status"] for r in local] == ["ok"] * 8 + ["render_failed"]
    for got, want in zip(remote, local, strict=True):
        assert got["task_id"] == want["task_id"] and got["similarity"] == pytest.approx(want["similarity"], abs=1e-6)
    assert remote[0]["similarity"] == pytest.approx(1.0, abs=1e-6) and remote[1]["similarity"] < 0.99


def _wait_for_rows(run: Path, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = run / "episodes.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{run}: fewer than {count} episodes after {timeout}s")


def _run_interrupted(
    out: Path, stub: StubOpenAIServer, cluster: Cluster, after_rows: int, interrupt: Callable[[], object]
) -> EvalResult:
    """A 40-episode run on the cluster, ``interrupt()`` called once ``after_rows`` episodes are written."""
    results: list[EvalResult] = []
    runner = threading.Thread(
        target=lambda: results.append(run_eval_on_ray(_config(out, stub, trials=2, ray=cluster.address)))
    )
    runner.start()
    _wait_for_rows(out, after_rows)
    interrupt()
    runner.join(timeout=300)
    assert not runner.is_alive() and results
    return results[0]


def _assert_each_episode_once(out: Path) -> None:
    keys = Counter((r["task_id"], r["trial"]) for r in _rows(out))
    assert len(keys) == 40 and set(keys.values()) == {1}


def test_a_node_killed_mid_run_loses_no_episode_and_doubles_none(
    cluster: Cluster, stub: StubOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    victim = next(node for node in cluster.worker_nodes)
    result = _run_interrupted(out, stub, cluster, 6, lambda: cluster.remove_node(victim, allow_graceful=False))
    assert result.overall.ok == 40
    _assert_each_episode_once(out)
    assert _scores(out) == _scores(local_run)
    assert "lost" in (out / "eval.log").read_text()  # an actor really was lost, and its episodes ran elsewhere
    cluster.add_node(**NODE_ARGS)  # back to three worker nodes for the next tests
    cluster.wait_for_nodes()


def test_a_killed_driver_continues_with_resume(
    cluster: Cluster, stub: StubOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "driver"
    argv = [
        shutil.which("colbench") or "colbench", "eval", "--env", "ColBench-Backend-v1", "--agent", "openai:stub-agent",
        "--agent-base-url", stub.base_url, "--agent-max-retries", "0", "--simulator", "scripted",
        "--tasks", "backend-sample", "--trials", "2", "--concurrency", "6", "--max-turns", "3",
        "--sandbox", "bwrap", "--quiet", "--out", str(out), "--ray", cluster.address,
    ]  # fmt: skip
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for_rows(out, 5)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    before = len(_rows(out))
    assert before < 40
    done = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _assert_each_episode_once(out)
    assert _scores(out) == _scores(local_run)


def test_sandbox_workers_killed_under_a_run_are_replaced(
    cluster: Cluster, stub: StubOpenAIServer, local_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sandbox"
    killed: list[int] = []
    result = _run_interrupted(out, stub, cluster, 4, lambda: killed.append(_kill_runners()))
    assert killed[0] >= 1
    assert result.overall.ok == 40
    assert _scores(out) == _scores(local_run)


def _kill_runners() -> int:
    """SIGKILL every warm sandbox worker on this machine (every node's), as a crash or the OOM killer would."""
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"/opt/colbench/runner.py" in cmdline and b"--program" not in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def _vector_actions(tasks: list[Task], ids: list[str], turn: int) -> list[str]:
    by_id = {t.task_id: (t, i) for i, t in enumerate(tasks)}
    if turn == 0:
        return ["What should happen with an empty input?"] * len(ids)
    return [f"I WANT TO ANSWER:\n{_answer(*by_id[task_id])}" for task_id in ids]


def test_the_ray_vector_env_steps_like_the_local_one(cluster: Cluster, tasks: list[Task]) -> None:
    import gymnasium as gym

    from colbench.ray import RayVectorEnv

    ids = [t.task_id for t in tasks[:6]]
    options = [{"task_id": task_id} for task_id in ids]
    kwargs: dict[str, Any] = {"tasks": "backend-sample", "sandbox": "bwrap"}
    local = gym.make_vec("ColBench-Backend-v1", num_envs=6, **kwargs)
    remote = RayVectorEnv("ColBench-Backend-v1", 6, workers=2, **kwargs)
    try:
        got = [local.reset(seed=0, options=options), remote.reset(seed=0, options=options)]
        assert got[0][0] == got[1][0]
        for turn in range(2):
            actions = _vector_actions(tasks, ids, turn)
            steps = [local.step(actions), remote.step(actions)]
            assert steps[0][0] == steps[1][0]
            for k in (1, 2, 3):
                assert (steps[0][k] == steps[1][k]).all()
            assert steps[0][4]["turn"].tolist() == steps[1][4]["turn"].tolist()
        assert steps[1][2].all() and 0 < steps[1][1].sum() < 6
        for i in range(6):
            assert remote.finished(i) == local.finished(i)
    finally:
        local.close()
        remote.close()


def test_the_ray_vector_env_survives_the_loss_of_a_shards_node(cluster: Cluster) -> None:
    from colbench.ray import RayVectorEnv

    with StubOpenAIServer(latency_s=1.5) as human:
        env = RayVectorEnv(
            "ColBench-Backend-v1",
            4,
            workers=2,
            tasks="backend-sample",
            sandbox="bwrap",
            simulator="openai:stub-human",
            simulator_options={"base_url": human.base_url, "max_retries": 0},
        )
        try:
            env.reset(seed=0)
            victim_id = ray.get(env._shards[0].ready.remote())
            victim = next(node for node in cluster.worker_nodes if node.node_id == victim_id)
            stepped: list[Any] = []
            stepper = threading.Thread(target=lambda: stepped.append(env.step(["Any constraints?"] * 4)))
            stepper.start()
            time.sleep(0.5)  # the human's replies are in flight on every shard
            cluster.remove_node(victim, allow_graceful=False)
            stepper.join(timeout=300)
            observations, rewards, terminations, truncations, infos = stepped[0]
            assert truncations.tolist() == [True, True, False, False]  # shard 0's episodes lost, never a reward
            assert rewards.tolist() == [0.0] * 4 and not terminations.any()
            assert "lost" in infos["error"][0] and not infos["_error"][2]
            assert observations[2].startswith("echo")  # shard 1 went on
            assert env.losses == 1
            observations, rewards, _, truncations, infos = env.step(["Any constraints?"] * 4)
            assert not truncations.any()  # the new shard reset its sub-envs (next_step autoreset)
            assert observations[0].startswith("You are working with a person") and observations[2].startswith("echo")
        finally:
            env.close()
            cluster.add_node(**NODE_ARGS)
            cluster.wait_for_nodes()


def test_an_unreachable_cluster_is_a_one_line_error_not_a_hang(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # nothing listens there once the socket is closed
    argv = ["eval", "--env", "ColBench-Backend-v1", "--agent", "scripted:reference", "--simulator", "scripted"]
    argv += ["--tasks", "backend-sample", "--limit", "1", "--out", str(tmp_path / "run"), "--ray", f"127.0.0.1:{port}"]
    done = subprocess.run([shutil.which("colbench") or "colbench", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert lines and f"cannot reach the Ray cluster at 127.0.0.1:{port}" in lines[-1]
