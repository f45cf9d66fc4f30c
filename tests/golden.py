"""Golden outputs of the command line, recorded before the layered restructuring (issue 25) and compared after it;
recorded again when every score came to name its env id (issue 26: ``env_id`` in result rows, score records and
run.json's ``scoring``; the numbers unchanged), and when every human reply came to carry its claims (issue 38: the
human turns' ``claims``/``untrue``/``truth_action``, run.json's ``truth``, the leaderboard's untrue columns; the
numbers unchanged), and when every backend score came to name its task environment (issue 47: ``taskenv`` in
result rows, score records and run.json's ``scoring``, whose digest, and so ``config_sha256``, is the machine's;
the numbers unchanged).

``produce(workdir)`` runs a fixed set of ``colbench`` commands (scripted evals of both domains, ``show``,
``report``, ``compare``, ``score``, ``tasks ls``) in ``workdir`` and returns every output as normalised text, one
entry per name. ``python tests/golden.py --record`` writes them to ``tests/data/golden/``; ``tests/test_golden.py``
produces them again and compares. Normalising removes only what differs from run to run or names a module path
that the restructuring moves (:data:`VOLATILE`); everything else must be byte-equal.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from paths import TESTS

GOLDEN = TESTS / "data" / "golden"

# Fields (dotted paths into run.json and episode records) that differ between two runs of the same commands, or
# name the Python module a class lives in. Everything else must be equal.
VOLATILE = frozenset(
    {
        "created",
        "colbench_version",
        "simulator.class",
        "timings",
        "duration_s",
        "started",
        "finished",
        "taskenv",  # the task environment's digest: the machine's Debian packages decide it (docs/sandbox.md)
        "config_sha256",  # a hash of run.json that holds the task environment's digest
    }
)

BACKEND = ["--env", "ColBench-Backend-v1", "--tasks", "backend-sample", "--sandbox", "bwrap", "--quiet"]
FRONTEND = ["--env", "ColBench-Frontend-v0", "--tasks", "frontend-sample", "--embedder", "test", "--quiet"]

# name -> the colbench arguments of an eval run directory
RUNS: dict[str, list[str]] = {
    "reference": ["eval", *BACKEND, "--agent", "scripted:reference", "--simulator", "scripted", "--limit", "3"],
    "ask-leaky": [
        "eval",
        *BACKEND,
        "--agent",
        "scripted:ask",
        "--simulator",
        "scripted:leaky",
        "--leak-policy",
        "redact",
        "--limit",
        "3",
        "--max-turns",
        "3",
        "--trials",
        "2",
    ],
    "empty": ["eval", *BACKEND, "--agent", "scripted:empty", "--simulator", "scripted", "--limit", "3"],
    "frontend": ["eval", *FRONTEND, "--agent", "scripted:reference", "--simulator", "scripted", "--limit", "2"],
}


def _colbench(workdir: Path, *args: str) -> str:
    done = subprocess.run(
        [shutil.which("colbench") or "colbench", *args], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise AssertionError(f"colbench {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def _scrub(value: Any, path: str = "") -> Any:
    if isinstance(value, dict):
        return {
            key: "<volatile>"
            if (f"{path}.{key}".lstrip(".") in VOLATILE or key in VOLATILE)
            else _scrub(item, f"{path}.{key}")
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_scrub(item, path) for item in value]
    return value


def _json_text(value: Any) -> str:
    return json.dumps(_scrub(value), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _text(text: str, workdir: Path) -> str:
    text = text.replace(str(workdir), "<workdir>")
    text = re.sub(r"\b\d+(\.\d+)? ?s\b", "<s>", text)  # durations in summary and show lines
    return text


def produce(workdir: Path) -> dict[str, str]:
    """Every golden output, produced afresh under ``workdir``."""
    out: dict[str, str] = {}
    for name, args in RUNS.items():
        summary = _colbench(workdir, *args, "--out", name)
        out[f"{name}.summary.txt"] = _text(summary, workdir)
        run = workdir / name
        out[f"{name}.run.json"] = _json_text(json.loads((run / "run.json").read_text(encoding="utf-8")))
        records = [json.loads(line) for line in (run / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
        records.sort(key=lambda r: (r["task_id"], r["trial"]))
        out[f"{name}.episodes.json"] = _json_text(records)
        out[f"{name}.files.txt"] = "".join(
            f"{p.relative_to(run)}\n" for p in sorted(run.rglob("*")) if p.is_file() and p.suffix != ".html"
        )
        first = min(r["task_id"] for r in records)  # the file's order is the order episodes finished in
        out[f"{name}.show.txt"] = _text(
            _colbench(workdir, "show", name, "--task", first, "--trial", "1" if name == "ask-leaky" else "0"), workdir
        )
    out["report.backend.txt"] = _text(_colbench(workdir, "report", "reference", "ask-leaky", "empty"), workdir)
    out["report.frontend.txt"] = _text(_colbench(workdir, "report", "frontend"), workdir)
    out["compare.txt"] = _text(_colbench(workdir, "compare", "reference", "empty"), workdir)
    out["tasks-ls.txt"] = _colbench(workdir, "tasks", "ls", "backend-sample", "--ids")

    ids = out["tasks-ls.txt"].split()[:3]
    reference = json.loads(out["reference.episodes.json"])
    answers = [{"task_id": r["task_id"], "answer": r["answer"]} for r in reference]
    answers += [{"task_id": ids[0], "answer": "I WANT TO ANSWER:\ndef f(*a, **k):\n    return None"}]
    answers += [{"task_id": ids[1], "answer": "no code at all"}]
    (workdir / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    summary = _colbench(
        workdir,
        "score",
        "backend",
        "--tasks",
        "backend-sample",
        "--answers",
        "answers.jsonl",
        "--out",
        "scores.jsonl",
        "--sandbox",
        "bwrap",
        "--env",
        "ColBench-Backend-v1",  # the default is the newest id, v2, whose plus tests the bundled sample lacks
    )
    out["score.backend.summary.txt"] = _text(summary, workdir)
    out["score.backend.jsonl"] = (workdir / "scores.jsonl").read_text(encoding="utf-8")
    return out


def record() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = produce(Path(tmp))
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for old in GOLDEN.iterdir():
        old.unlink()
    for name, text in outputs.items():
        (GOLDEN / name).write_text(text, encoding="utf-8")
    print(f"recorded {len(outputs)} golden outputs -> {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/golden.py --record")
    record()
