"""The CLI contract (DESIGN.md section 5), run as a user would: ``colbench ...`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import REPO
from plus_tasks import OVERFIT, travel, with_plus, write_tasks

from colbench.sandbox import taskenv
from colbench.tasks import Task

BUNDLED = REPO / "tasks" / "samples" / "backend-sample.jsonl"


def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=300)


def score_backend(answers: Path, out: Path, env_id: str = "ColBench-Backend-v1") -> list[str]:
    """The arguments of ``colbench score backend`` for an answers file of the bundled sample, in the bwrap sandbox,
    under ``env_id``'s rules (v1 by default here: the task's own tests, whose counts these tests know)."""
    return [
        "score",
        "backend",
        "--tasks",
        str(BUNDLED),
        "--answers",
        str(answers),
        "--out",
        str(out),
        "--sandbox",
        "bwrap",
        "--env",
        env_id,
    ]


def test_tasks_ls_ids_in_file_order(bundled_tasks: list[Task]) -> None:
    res = colbench("tasks", "ls", str(BUNDLED), "--ids")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [t.task_id for t in bundled_tasks]
    named = colbench("tasks", "ls", "backend-sample", "--ids")
    assert named.stdout == res.stdout


def test_bad_inputs_give_one_line_errors(tmp_path: Path) -> None:
    res = colbench("tasks", "ls", "no-such-split")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "known splits" in res.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem_description": "x"}\n')
    res = colbench("tasks", "ls", str(bad))
    assert res.returncode == 2 and f"{bad}:1: field 'ground_truth'" in res.stderr
    res = colbench("model", "export-hf", "--gguf", str(bad), "--out", str(tmp_path / "model"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a GGUF" in res.stderr
    assert not (tmp_path / "model").exists()


def test_score_backend(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    answers = tmp_path / "answers.jsonl"
    rows = [
        {"task_id": bundled_tasks[0].task_id, "answer": "I WANT TO ANSWER:\n" + bundled_tasks[0].ground_truth},
        {"task_id": bundled_tasks[1].task_id, "answer": "I have no idea."},
        {
            "task_id": bundled_tasks[2].task_id,
            "answer": "I WANT TO ANSWER:\n```python\n" + bundled_tasks[2].ground_truth + "\n```",
        },
    ]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "results" / "r.jsonl"
    res = colbench(*score_backend(answers, out), "--jobs", "2")
    assert res.returncode == 0, res.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in results] == [r["task_id"] for r in rows]
    assert set(results[0]) == {
        "task_id",
        "tests_passed",
        "tests_total",
        "pass_rate",
        "success",
        "status",
        "error",
        "env_id",
        "taskenv",
    }
    assert {r["env_id"] for r in results} == {"ColBench-Backend-v1"}
    assert {r["taskenv"] for r in results} == {taskenv.installed().digest}  # what the code ran with
    assert [(r["tests_passed"], r["success"], r["status"]) for r in results] == [
        (10, True, "ok"),
        (0, False, "ok"),
        (10, True, "ok"),
    ]
    assert "success 2/3" in res.stdout


def test_score_backend_env_picks_the_rules_and_defaults_to_the_newest(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    task = travel(bundled_tasks)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": task.task_id, "answer": OVERFIT}) + "\n")
    plus = write_tasks(tmp_path / "plus.jsonl", [with_plus(task)])
    rows = {}
    for env_id in (None, "ColBench-Backend-v1", "ColBench-Backend-v0"):
        out = tmp_path / f"{env_id}.jsonl"
        args = ["score", "backend", "--tasks", str(plus), "--answers", str(answers), "--out", str(out)]
        res = colbench(*args, "--sandbox", "bwrap", *(["--env", env_id] if env_id else []))
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(f"{env_id or 'ColBench-Backend-v2'}: scored 1 answers")
        rows[env_id] = json.loads(out.read_text())
    assert [(r["env_id"], r["tests_passed"], r["tests_total"]) for r in rows.values()] == [
        ("ColBench-Backend-v2", 11, 13),
        ("ColBench-Backend-v1", 10, 10),
        ("ColBench-Backend-v0", 10, 10),
    ]


def test_score_env_errors_are_one_line(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"task_id": bundled_tasks[0].task_id, "answer": "x"}) + "\n")
    valid = "backend answers are scored by ColBench-Backend-v0, ColBench-Backend-v1, ColBench-Backend-v2"
    for env_id, why in [("ColBench-Frontend-v0", "a frontend env"), ("ColBench-Backend-v7", "unknown env id")]:
        res = colbench(*score_backend(answers, tmp_path / "o.jsonl", env_id))
        assert res.returncode == 2 and res.stderr == f"colbench: error: --env {env_id}: {why}; {valid}\n"
    res = colbench(*score_backend(answers, tmp_path / "o.jsonl")[:-2])  # the default: v2, the sample's plus tests
    row = json.loads((tmp_path / "o.jsonl").read_text())
    assert res.returncode == 0 and row["env_id"] == "ColBench-Backend-v2" and row["tests_total"] > 10


def test_score_backend_rejects_unknown_task(tmp_path: Path) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text('{"task_id": "nope", "answer": "x"}\n')
    res = colbench("score", "backend", "--tasks", str(BUNDLED), "--answers", str(answers), "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and f"{answers}:1: field 'task_id'" in res.stderr


def test_score_backend_reports_a_broken_sandbox_as_infrastructure(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"task_id": bundled_tasks[0].task_id, "answer": "x"}) + "\n")
    env = {"PATH": str(tmp_path)}  # no bubblewrap on PATH: the harness, not the agent, is at fault
    res = subprocess.run(
        [sys.executable, "-m", "colbench", *score_backend(answers, tmp_path / "o.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 3 and "bubblewrap" in res.stderr and "infrastructure" in res.stderr


def test_tasks_check_runs_references() -> None:
    res = colbench("tasks", "check", "backend-sample", "--sandbox", "bwrap")
    assert res.returncode == 0, res.stderr
    assert "reference passes all counted tests on 20/20; 200/200 tests counted" in res.stdout
    assert "hole 0, degenerate success 0, constant success 2" in res.stdout  # two sample references return {} / []
    assert "02293756f991\t*\tconstant success\tan answer that returns {} passes every counted test" in res.stdout
