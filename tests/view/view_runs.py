"""Run directories written by hand in the formats of docs/run-format.md (and the fields being added: tasks.jsonl,
leak spans, per-turn screenshots, v1 blocks), for the viewer's tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from paths import REPO

RUN_DIRS = REPO / "tests" / "data" / "run_dirs"


def backend_record(task: str, trial: int = 0, *, passed: int = 2, total: int = 2, **extra: Any) -> dict[str, Any]:
    tests = [
        {
            "name": f"test{i}",
            "expression": f"f({i})",
            "passed": i < passed,
            "judgeable": True,
            "outcome": "value",
            "detail": "" if i < passed else f"expected {i}, got None",
        }
        for i in range(total)
    ]
    record = {
        "task_id": task,
        "trial": trial,
        "status": "ok",
        "reward": passed / total,
        "success": passed == total,
        "termination": "answered",
        "turns": 2,
        "score": {
            "tests_passed": passed,
            "tests_total": total,
            "pass_rate": passed / total,
            "success": passed == total,
            "tests": tests,
        },
        "dialogue": [
            {"role": "agent", "text": f"question about {task}?"},
            {
                "role": "human",
                "text": "use a loop",
                "leak_score": 0.1,
                "leak": False,
                "leak_action": "shown",
                "leak_scores": [0.1],
                "withheld": [],
                "leak_spans": [],
            },
            {"role": "agent", "text": "I WANT TO ANSWER:\ndef f(x): return x"},
        ],
        "leaks": 0,
        "answer": "def f(x): return x",
        "usage": {
            "agent": {"prompt_tokens": 100, "completion_tokens": 10, "calls": 2},
            "simulator": {"prompt_tokens": 50, "completion_tokens": 5, "calls": 1},
        },
        "timings": {"started": "2026-11-26T10:00:00Z", "duration_s": 1.0},
        "screenshot": None,
        "error": None,
    }
    record.update(extra)
    return record


def infra_record(task: str, trial: int = 0) -> dict[str, Any]:
    return {
        "task_id": task,
        "trial": trial,
        "status": "infra_error",
        "reward": None,
        "success": None,
        "termination": None,
        "turns": 1,
        "score": None,
        "dialogue": [],
        "leaks": None,
        "answer": None,
        "usage": {},
        "timings": {},
        "screenshot": None,
        "error": "LLMError: endpoint down",
    }


def write_run(
    path: Path,
    records: list[dict[str, Any]],
    *,
    source: str = "backend-a",
    tasks: list[dict[str, Any]] | None = None,
    **config: Any,
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    run = json.loads((RUN_DIRS / source / "run.json").read_text())
    run.update(config)
    if tasks is not None:
        run["tasks"]["snapshot"] = "tasks.jsonl"
        (path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (path / "run.json").write_text(json.dumps(run))
    append(path, records)
    if (RUN_DIRS / source / "screens").is_dir() and not (path / "screens").exists():
        shutil.copytree(RUN_DIRS / source / "screens", path / "screens")
    return path


def append(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path / "episodes.jsonl", "a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
