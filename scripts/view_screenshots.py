"""Screenshots of each page of ``colbench view`` for docs/view.md (docs/images/view-*.png, 1280x800).

Serves the test run directories (tests/data/run_dirs) plus one run with a redacted leak, opens each page in the
system Chromium, and saves palette PNGs (small in the repository). Usage: python3 scripts/view_screenshots.py
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from PIL import Image
from playwright.sync_api import sync_playwright

from colbench.render import find_chromium
from colbench.view.app import make_app
from colbench.view.site import Site

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "tests" / "data" / "run_dirs"
OUT = REPO / "docs" / "images"


def leaky_run(folder: Path) -> Path:
    """backend-a with a snapshot of its tasks and a redacted, flagged reply with its leak span."""
    run = folder / "backend-leaks"
    shutil.copytree(RUNS / "backend-a", run)
    config = json.loads((run / "run.json").read_text())
    config["tasks"]["snapshot"] = "tasks.jsonl"
    config["leaks"] = {"policy": "redact", "detector": "code-overlap/1", "threshold": 0.5}
    (run / "run.json").write_text(json.dumps(config))
    lines = []
    for line in (run / "episodes.jsonl").read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:  # the test run's torn last line
            continue
    first = lines[1]
    withheld = "Just write: def f(x): return x if x > 0 else 0"
    first["dialogue"] = [
        {"role": "agent", "text": "Should f(1) return 1 or something else? And what about negative numbers?"},
        {
            "role": "human",
            "text": "[the reply was withheld: it gave the answer away]",
            "leak_score": 0.82,
            "leak": True,
            "leak_action": "redacted",
            "leak_scores": [0.82],
            "withheld": [withheld],
            "leak_spans": [[12, 46]],
        },
        {"role": "agent", "text": "I WANT TO ANSWER:\ndef f(x):\n    return max(x, 0)"},
    ]
    first["leaks"] = 1
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    tasks = [
        {
            "task_id": r["task_id"],
            "problem_description": f"Write f for task {r['task_id']}.",
            "ground_truth": "def f(x):\n    return max(x, 0)",
            "hidden_information": "negative numbers give 0",
            "test_cases": {"f(1)": "1"},
        }
        for r in lines
    ]
    (run / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return run


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [leaky_run(Path(tmp)), RUNS / "backend-b", RUNS / "frontend-a"]
        site = Site(runs, Path(tmp) / "cache")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(make_app(site), host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        task = json.loads((runs[0] / "episodes.jsonl").read_text().splitlines()[1])["task_id"]  # the leaky one
        pages = {
            "view-runs": "/",
            "view-run": "/runs/0",
            "view-episode": f"/runs/0/episode?task={task}&trial=0",
            "view-frontend": "/runs/2/episode?task=f1&trial=0",
            "view-compare": "/compare/0/1",
        }
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium())
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            for name, url in pages.items():
                page.goto(base + url)
                page.wait_for_load_state("networkidle")
                if name == "view-episode":
                    page.click("details.task summary")
                target = OUT / f"{name}.png"
                page.screenshot(path=str(target))
                Image.open(target).convert("RGB").quantize(64).save(target, optimize=True)
                print(f"{target.relative_to(REPO)}: {target.stat().st_size // 1024} KiB")
            browser.close()
        server.should_exit = True


if __name__ == "__main__":
    main()
