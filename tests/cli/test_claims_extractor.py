"""``colbench claims check --extractor``: a model (a local OpenAI-compatible stub) turns prose into calls; the
reference alone decides, and what the finder cannot read is dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hand_tasks import make_task
from openai_stub import StubOpenAIServer

from colbench.domains.backend import DOMAIN
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.claim_check import check
from colbench.env.claim_extractor import ExtractingChecker
from colbench.llm.client import Endpoint, LLMClient

PAIR = make_task("def area(width, height):\n    return width * height\n", ["area(2, 3)"], "area")
PROSE = "A square of side four covers sixteen, and a two by five one covers ten. Whatever."


def extraction(request: dict[str, Any]) -> str:
    prompt = request["messages"][-1]["content"]
    assert "area(2, 3)" in prompt and PROSE in prompt  # the task's calls as examples, the reply itself
    return "\n".join(
        [
            json.dumps({"quote": "A square of side four covers sixteen", "call": "area(4, 4)", "value": 16}),
            json.dumps({"quote": "a two by five one covers ten", "call": "area(2, 5)", "value": "11"}),
            json.dumps({"quote": "Whatever", "call": "area(x, y)", "value": "?"}),  # unreadable: dropped
            "not json at all",
        ]
    )


def test_a_model_proposes_and_the_reference_decides(scorer: BackendScorer) -> None:
    with StubOpenAIServer(default=extraction) as server:
        client = LLMClient(Endpoint(model="extractor", base_url=server.base_url, api_key="k"))
        checker = ExtractingChecker(DOMAIN.claim_checker(scorer), client, "openai:extractor")
        claims = check(checker, PAIR, PROSE)
    assert [(c.call, c.stated, c.actual, c.verdict) for c in claims] == [
        ("area(4, 4)", "16", "16", "true"),
        ("area(2, 5)", "11", "10", "false"),  # the model misread; the reference says what is true
    ]
    assert PROSE[claims[0].span[0] : claims[0].span[1]] == "A square of side four covers sixteen"
    assert checker.name == f"{DOMAIN.claim_checker(scorer).name}+extractor(openai:extractor)"


def test_the_cli_flag_runs_the_extractor(tmp_path: Path, bundled_tasks: list[Any]) -> None:
    task = bundled_tasks[0]
    call = task.test_cases[0][1]
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"task_id": task.task_id, "reply": "it gives something"}) + "\n")
    out = tmp_path / "out.jsonl"
    with StubOpenAIServer(default=lambda request: json.dumps({"quote": "it", "call": call, "value": "0"})) as server:
        done = subprocess.run(
            [sys.executable, "-m", "colbench", "claims", "check", "--tasks", "backend-sample", "--replies",
             str(replies), "--out", str(out), "--sandbox", "bwrap", "--extractor", "openai:x"],
            capture_output=True, text=True, timeout=120,
            env={"PATH": "/usr/bin:/bin", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 1 and server.requests[0]["temperature"] == 0.0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["call"] for c in row["claims"]] == [call] and row["claims"][0]["verdict"] in ("true", "false")


@pytest.mark.parametrize("answer", ["NONE", "{broken", json.dumps({"call": 3, "value": 1})])
def test_nothing_readable_adds_nothing(scorer: BackendScorer, answer: str) -> None:
    with StubOpenAIServer(default=lambda request: answer) as server:
        client = LLMClient(Endpoint(model="extractor", base_url=server.base_url, api_key="k"))
        checker = ExtractingChecker(DOMAIN.claim_checker(scorer), client, "openai:extractor")
        assert check(checker, PAIR, "area(2, 3) returns 6, and that is all.")[0].verdict == "true"
        assert len(check(checker, PAIR, "No idea.")) == 0
