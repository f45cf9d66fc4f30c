"""A run written by the real harness (scripted agent and human, the bwrap sandbox) read by the viewer while the
eval writes it: the records the eval writes are the ones the pages read."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from plans import scripted_plan
from starlette.testclient import TestClient

from colbench.domains.backend.scorer import BackendScorer
from colbench.eval import run_eval
from colbench.view.app import make_app


def test_a_scripted_eval_is_followed_while_it_writes(tmp_path: Path, scorer: BackendScorer, make_site: Any) -> None:
    out = tmp_path / "run"
    plan = scripted_plan(out, limit=6, concurrency=1)
    worker = threading.Thread(target=run_eval, args=(plan,), kwargs={"scorer": scorer})
    worker.start()
    deadline = time.monotonic() + 60
    while not (out / "run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    web = TestClient(make_app(make_site(out)))
    seen = []
    while time.monotonic() < deadline:
        seen.append(web.get("/api/runs/0/episodes").json()["total"])
        if seen[-1] == 6:
            break
        time.sleep(0.05)
    worker.join(60)
    assert seen[-1] == 6 and seen == sorted(seen)  # counts only grow
    run = web.get("/api/runs").json()[0]
    assert run["done"] == 6 and run["success"]["value"] == 1.0 and run["env_id"] == "ColBench-Backend-v1"
    for row in web.get("/api/runs/0/episodes").json()["rows"]:
        page = web.get(row["href"])
        assert page.status_code == 200 and "passed (value)" in page.text and "I WANT TO ANSWER" in page.text
