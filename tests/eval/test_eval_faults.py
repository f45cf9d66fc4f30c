"""The runner under faults: endpoints that answer 429/5xx, time out, send empty or malformed replies or drop the
connection (through the real openai client and the stub server), and a ``colbench eval`` killed with SIGKILL or
interrupted with Ctrl-C, then resumed. An infrastructure failure is never a score: every 0 is a wrong answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from openai_stub import StubOpenAIServer

from colbench.domains.backend.scorer import BackendScorer
from colbench.env.domain import get_domain
from colbench.eval import RunPlan, run_eval
from colbench.runs import final_records, read_episode_log
from colbench.tasks import Task


def read_episodes(path: Path) -> list[dict[str, Any]]:
    return [dict(r.row) for r in read_episode_log(path, get_domain("backend").metrics).records]


BACKEND = "ColBench-Backend-v1"
WRONG_CODE = "def not_the_function():\n    return None"
FAST_RETRIES = {"timeout_s": 0.5, "backoff_s": 0.01, "backoff_cap_s": 0.05}


def wrong_tasks(tasks: list[Task]) -> set[str]:
    """Every third task gets a wrong answer from the stub agent: the only episodes that may score below 1."""
    return {t.task_id for t in tasks[::3]}


def stub_agent(tasks: list[Task], wrong: set[str]) -> Callable[[dict[str, Any]], str]:
    """A policy behind the stub server: asks one question, then answers (right, or wrong for ``wrong``)."""

    def respond(request: dict[str, Any]) -> str:
        messages = request["messages"]
        task = next(t for t in tasks if t.problem_description in messages[0]["content"])
        if sum(m["role"] == "user" for m in messages) < 2:
            return "Which edge cases matter to you?"
        return "I WANT TO ANSWER:\n" + (WRONG_CODE if task.task_id in wrong else task.ground_truth)

    return respond


def faults(kinds: Iterable[tuple[Any, ...]], *, every: int = 1) -> list[tuple[Any, ...]]:
    """The fault actions, each followed by ``every - 1`` normal replies."""
    script: list[tuple[Any, ...]] = []
    for action in kinds:
        script += [action] + [("default",)] * (every - 1)
    return script


AGENT_FAULTS = [
    ("status", 429),
    ("status", 500),
    ("sleep", 1.5),  # longer than the client's timeout
    ("malformed",),
    ("disconnect",),
    ("no_choices",),
    ("status", 503, {"Retry-After": "0.05"}),
    ("empty",),  # an agent's empty completion is its own (empty) turn, not a fault
]
SIMULATOR_FAULTS = [
    ("status", 429),
    ("status", 502),
    ("sleep", 1.5),
    ("empty",),  # a simulator's empty completion is a fault: retried, then an infra error
    ("malformed",),
    ("disconnect",),
    ("no_choices",),
]


def check_never_scored_for_infra(rows: list[dict[str, Any]], wrong: set[str]) -> None:
    """Every record is scored or an infra error; a score below 1 only ever comes from a wrong answer."""
    for row in rows:
        assert row["status"] in ("ok", "infra_error"), row
        if row["status"] == "infra_error":
            assert row["reward"] is None and row["success"] is None and row["score"] is None
            assert row["error"] and "\n" not in row["error"] and row["error"].startswith("LLMError: ")
        elif row["task_id"] in wrong:
            assert row["reward"] == 0.0 and WRONG_CODE in row["answer"], row
        else:
            assert row["reward"] == 1.0 and row["success"] is True, row


def eval_config(out: Path, agent_url: str, simulator_url: str, max_retries: int, **overrides: Any) -> RunPlan:
    settings: dict[str, Any] = {
        "env_id": BACKEND,
        "agent": "openai:policy",
        "simulator": "openai:human",
        "out": out,
        "tasks": "backend-sample",
        "concurrency": 4,
        "progress": "off",
        "agent_options": {"base_url": agent_url, "api_key": "k", "max_retries": max_retries, **FAST_RETRIES},
        "simulator_options": {"base_url": simulator_url, "api_key": "k", "max_retries": max_retries, **FAST_RETRIES},
    }
    settings.update(overrides)
    return RunPlan.resolve(**settings)


def test_retries_absorb_every_kind_of_fault(tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    wrong = wrong_tasks(bundled_tasks)
    with (
        StubOpenAIServer(default=stub_agent(bundled_tasks, wrong)) as agent_server,
        StubOpenAIServer(default=lambda request: "Only the usual ones.") as human_server,
    ):
        agent_server.script(AGENT_FAULTS)
        human_server.script(SIMULATOR_FAULTS)
        config = eval_config(tmp_path / "run", agent_server.base_url, human_server.base_url, max_retries=8)
        result = run_eval(config, scorer=scorer)
        assert agent_server.pending == 0 and human_server.pending == 0  # every fault was served
    rows = read_episodes(tmp_path / "run" / "episodes.jsonl")
    assert result.exit_code == 0 and len(rows) == 20 and all(r["status"] == "ok" for r in rows)
    check_never_scored_for_infra(rows, wrong)
    assert result.overall.success == 20 - len(wrong)
    # the empty agent completion became an empty agent turn, answered by the human like any other
    assert sum(t["text"] == "" for r in rows for t in r["dialogue"] if t["role"] == "agent") == 1


def test_exhausted_retries_are_infra_errors_and_resume_completes_the_run(
    tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    wrong = wrong_tasks(bundled_tasks)
    out = tmp_path / "run"
    with (
        StubOpenAIServer(default=stub_agent(bundled_tasks, wrong)) as agent_server,
        StubOpenAIServer(default=lambda request: "Only the usual ones.") as human_server,
    ):
        agent_server.script(faults(AGENT_FAULTS, every=3))
        human_server.script(faults(SIMULATOR_FAULTS, every=2))
        first = run_eval(eval_config(out, agent_server.base_url, human_server.base_url, max_retries=0), scorer=scorer)
        rows = read_episodes(out / "episodes.jsonl")
        assert len(rows) == 20
        check_never_scored_for_infra(rows, wrong)
        failed = [r for r in rows if r["status"] == "infra_error"]
        # 7 agent faults and 7 simulator faults end an episode each (the agent's empty reply does not)
        assert 1 <= len(failed) <= 14 and first.overall.ok == 20 - len(failed) and first.exit_code == 0
        assert any("Timeout" in r["error"] for r in failed) or any("timed out" in r["error"] for r in failed)

        agent_requests = agent_server.request_count
        second = run_eval(
            eval_config(out, agent_server.base_url, human_server.base_url, max_retries=0, resume=True), scorer=scorer
        )
        assert second.session.finished == len(failed) and second.overall.ok == 20
        # only the failed episodes ran again: two agent requests each (question, answer)
        assert agent_server.request_count - agent_requests == 2 * len(failed)
    rows = read_episodes(out / "episodes.jsonl")
    check_never_scored_for_infra(rows, wrong)
    ok_keys = [(r["task_id"], r["trial"]) for r in rows if r["status"] == "ok"]
    assert len(ok_keys) == len(set(ok_keys)) == 20
    final = final_records(read_episode_log(out / "episodes.jsonl", get_domain("backend").metrics).records)
    assert sorted(k for k, r in final.items() if (r.reward or 0) < 1) == sorted((t, 0) for t in wrong)


# -- killed and interrupted runs ---------------------------------------------------------------------------------


def eval_args(out: Path, base_url: str) -> list[str]:
    return [
        sys.executable, "-m", "colbench", "eval",
        "--env", BACKEND, "--agent", "openai:policy", "--simulator", "scripted",
        "--tasks", "backend-sample", "--out", str(out), "--sandbox", "bwrap", "--concurrency", "2",
        "--agent-base-url", base_url, "--agent-api-key-env", "COLBENCH_TEST_AGENT_KEY", "--agent-max-retries", "0",
    ]  # fmt: skip


def wait_for_records(path: Path, count: int, proc: subprocess.Popen[str], deadline_s: float = 90.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            pytest.fail(f"eval ended early with {proc.returncode}: {proc.communicate()[1]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {count} records in {deadline_s}s")


def default_sigint() -> None:
    """Ctrl-C as a terminal's user sends it: a test run started in the background of a non-interactive shell
    inherits SIGINT ignored, and a Python started so never raises KeyboardInterrupt (it ran all 20 episodes and
    exited 0 in one such run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def secret_env() -> dict[str, str]:
    return {**os.environ, "COLBENCH_TEST_AGENT_KEY": "sk-kill-test-secret-42"}


def test_a_killed_run_resumes_without_losing_or_duplicating_episodes(
    tmp_path: Path, bundled_tasks: list[Task], secret_env: dict[str, str]
) -> None:
    if not Path("/usr/bin/bwrap").exists():
        pytest.skip("bubblewrap is not installed")
    out = tmp_path / "run"
    path = out / "episodes.jsonl"
    with StubOpenAIServer(default=stub_agent(bundled_tasks, set()), latency_s=0.15) as server:
        args = eval_args(out, server.base_url)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=secret_env)
        wait_for_records(path, 4, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        kept = read_episodes(path)
        assert 4 <= len(kept) < 20 and all(r["status"] == "ok" for r in kept)
        with open(path, "ab") as torn:  # as if the kill had landed in the middle of a write
            torn.write(b'{"task_id": "' + kept[0]["task_id"].encode() + b'", "trial": 0, "sta')
        requests_before = server.request_count

        res = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=120, env=secret_env)
        assert res.returncode == 0, res.stderr
        assert "20/20 episodes scored, success 20/20" in res.stdout
        rows = read_episodes(path)
        assert rows[: len(kept)] == kept  # finished episodes kept as they were
        keys = [(r["task_id"], r["trial"]) for r in rows]
        assert len(keys) == len(set(keys)) == 20  # none lost, none twice
        assert server.request_count - requests_before == 2 * (20 - len(kept))  # nothing finished ran again
        assert all(json.loads(line) for line in path.read_bytes().splitlines())  # the torn line is gone

        changed = subprocess.run(
            [*args, "--resume", "--agent-temperature", "0.5"],
            capture_output=True,
            text=True,
            timeout=60,
            env=secret_env,
        )
    assert changed.returncode == 2 and changed.stderr.count("\n") == 1
    assert "agent.temperature: 0.0 -> 0.5" in changed.stderr
    assert read_episodes(path) == rows
    run = json.loads((out / "run.json").read_text())
    assert run["runtime"]["agent_api_key_env"] == "COLBENCH_TEST_AGENT_KEY"
    for file in out.rglob("*"):
        if file.is_file():
            assert b"sk-kill-test-secret-42" not in file.read_bytes(), file


def test_ctrl_c_keeps_finished_episodes_and_exits_130(
    tmp_path: Path, bundled_tasks: list[Task], secret_env: dict[str, str]
) -> None:
    out = tmp_path / "run"
    path = out / "episodes.jsonl"
    with StubOpenAIServer(default=stub_agent(bundled_tasks, set()), latency_s=0.15) as server:
        args = [*eval_args(out, server.base_url), "--sandbox", "bwrap"]
        if not Path("/usr/bin/bwrap").exists():
            pytest.skip("bubblewrap is not installed")
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=secret_env,
            preexec_fn=default_sigint,
        )
        wait_for_records(path, 3, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "--resume" in stderr and "episodes scored" in stdout
    data = path.read_bytes()
    assert data.endswith(b"\n") and all(json.loads(line)["status"] == "ok" for line in data.splitlines())
    assert 3 <= data.count(b"\n") < 20
