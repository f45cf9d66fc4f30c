"""`colbench score frontend` per the CLI contract, as a user runs it (a subprocess, real Chromium)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench.domains.frontend.visual_metrics import SUBSCORES
from colbench.tasks import load

pytestmark = pytest.mark.browser
V0 = ("--env", "ColBench-Frontend-v0")


def colbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=240, env=env
    )


def score_frontend(
    tasks: str, answers: Path, out: Path, *more: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``colbench score frontend`` of an answers file, as a user types it."""
    return colbench("score", "frontend", "--tasks", tasks, "--answers", str(answers), "--out", str(out), *more, env=env)


def test_score_frontend_rows_floors_and_summary(tmp_path: Path) -> None:
    tasks = load("frontend-sample")
    answers = [
        {"task_id": tasks[0].task_id, "answer": "I WANT TO ANSWER:\n" + tasks[0].ground_truth},
        {"task_id": tasks[1].task_id, "answer": "Sorry, no page."},
        {"task_id": tasks[2].task_id, "answer": tasks[5].ground_truth},
        {"task_id": tasks[3].task_id, "answer": "<html><body><script>while(true){}</script></body></html>"},
    ]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    out = tmp_path / "out" / "results.jsonl"
    done = score_frontend("frontend-sample", tmp_path / "answers.jsonl", out, "--embedder", "test")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == [a["task_id"] for a in answers]
    v0_columns = {"task_id", "similarity", "status", "error", "env_id"}
    assert all(set(r) == v0_columns | {"reward", "success", "embedder", *SUBSCORES} for r in rows)
    assert {r["env_id"] for r in rows} == {"ColBench-Frontend-v1"}  # the default: the domain's newest id
    assert all(r["embedder"].startswith("test-") for r in rows)
    assert rows[0]["status"] == "ok" and rows[0]["similarity"] == pytest.approx(1.0, abs=1e-6)
    assert rows[0]["reward"] == pytest.approx(1.0) and rows[0]["success"] is True
    assert all(rows[0][name] == pytest.approx(1.0) for name in SUBSCORES)
    assert rows[1] == {
        "task_id": tasks[1].task_id,
        "similarity": 0.0,
        "status": "no_answer",
        "error": rows[1]["error"],
        "env_id": "ColBench-Frontend-v1",
        "reward": 0.0,
        "success": False,
        "embedder": rows[0]["embedder"],
        **dict.fromkeys(SUBSCORES, 0.0),
    }
    assert rows[2]["status"] == "ok" and 0.0 < rows[2]["similarity"] < 1.0
    assert 0.0 < rows[2]["reward"] < 0.9 and rows[2]["success"] is False  # another task's page
    assert rows[3]["status"] == "render_failed" and rows[3]["similarity"] == 0.0 and rows[3]["reward"] == 0.0
    assert done.stdout.startswith("ColBench-Frontend-v1: scored 4 answers") and "test-" in done.stdout

    old = tmp_path / "out" / "v0.jsonl"  # v0: CLIP alone, its row as before
    done = score_frontend("frontend-sample", tmp_path / "answers.jsonl", old, "--embedder", "test", *V0)
    assert done.returncode == 0, done.stderr
    rows_v0 = [json.loads(line) for line in old.read_text().splitlines()]
    assert all(set(r) == v0_columns and r["env_id"] == "ColBench-Frontend-v0" for r in rows_v0)
    assert [r["similarity"] for r in rows_v0] == [r["similarity"] for r in rows]  # the same CLIP cosine


def test_score_frontend_bad_input_is_one_line(tmp_path: Path) -> None:
    backend_answer = tmp_path / "a.jsonl"
    backend_answer.write_text(json.dumps({"task_id": load("backend-sample")[0].task_id, "answer": "x"}) + "\n")
    done = score_frontend("backend-sample", backend_answer, tmp_path / "r.jsonl", "--embedder", "test")
    assert done.returncode == 2 and "use `colbench score backend`" in done.stderr and done.stderr.count("\n") == 1

    done = score_frontend("frontend-sample", backend_answer, tmp_path / "r.jsonl", "--embedder", "nope")
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_missing_clip_weights_offline_is_a_clear_error(tmp_path: Path) -> None:
    tasks = load("frontend-sample")
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"task_id": tasks[0].task_id, "answer": tasks[0].ground_truth}) + "\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "HOME": str(tmp_path)}
    env.pop("COLBENCH_CLIP_WEIGHTS", None)
    done = score_frontend("frontend-sample", answers, tmp_path / "r.jsonl", env=env)
    assert done.returncode == 2, done.stderr
    assert "CLIP" in done.stderr and "weights" in done.stderr and done.stderr.count("\n") == 1
