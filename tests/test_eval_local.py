"""An end-to-end eval through the real embedded llama.cpp server (agent and human), then its report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from local_model import needs_model


@pytest.mark.slow
@needs_model
@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (the set-up command installs it)"
)
def test_eval_with_the_local_model_as_agent_and_human(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "colbench", "eval", "--env", "ColBench-Backend-v1"]
    command += ["--agent", "llamacpp", "--simulator", "llamacpp", "--tasks", "backend-sample", "--limit", "2"]
    command += ["--max-turns", "2", "--agent-max-tokens", "48", "--simulator-max-tokens", "24"]
    command += ["--sandbox", "bwrap", "--quiet", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr
    assert "2/2 episodes scored" in done.stdout

    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["status"] for r in records} == {"ok"}
    for record in records:
        roles = [turn["role"] for turn in record["dialogue"]]
        assert roles in (["agent"], ["agent", "human", "agent"])  # answered at once, or one exchange then the cap
        assert all(turn["text"] is not None for turn in record["dialogue"])
        assert record["usage"]["agent"]["completion_tokens"] > 0 and record["usage"]["agent"]["calls"] >= 1
        assert 0.0 <= record["reward"] <= 1.0 and record["termination"] in ("answered", "turn_limit")
    run = json.loads((out / "run.json").read_text())
    assert run["agent"]["spec"] == "llamacpp" and "SmolLM2" in json.dumps(run["agent"])
    assert "127.0.0.1" not in json.dumps(run)  # the per-run port is not part of the configuration

    report = subprocess.run(
        [sys.executable, "-m", "colbench", "report", str(out)], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    assert "SmolLM2" in report.stdout


@pytest.mark.slow
@needs_model
@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (the set-up command installs it)"
)
def test_eval_with_the_embedded_defaults_alone_is_bounded(tmp_path: Path) -> None:
    """No caps given: the embedded model's own defaults (colbench.llm.llamacpp.ROLE_DEFAULTS) keep an episode short
    (about a minute on 2 cores: each turn is capped, the human writes no code, the last turn delivers code)."""
    from colbench.llm import llamacpp

    out = tmp_path / "run"
    command = [sys.executable, "-m", "colbench", "eval", "--env", "ColBench-Backend-v1"]
    command += ["--agent", "llamacpp", "--simulator", "llamacpp", "--tasks", "backend-sample", "--limit", "1"]
    command += ["--sandbox", "bwrap", "--quiet", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["status"] == "ok" and record["timings"]["duration_s"] < 300
    humans = [t["text"] for t in record["dialogue"] if t["role"] == "human"]
    assert all("```" not in text and "def " not in text for text in humans)
    usage = record["usage"]
    agent_cap = llamacpp.ROLE_DEFAULTS["agent"]["max_tokens"]
    assert usage["simulator"]["completion_tokens"] <= len(humans) * llamacpp.ROLE_DEFAULTS["simulator"]["max_tokens"]
    assert usage["agent"]["completion_tokens"] <= record["turns"] * llamacpp.AGENT_ANSWER_MAX_TOKENS
    if record["turns"] == 10:  # the last turn was written from the answer's prefill (so it counts as answered)
        assert record["termination"] == "answered"
        assert record["answer"].startswith(llamacpp.AGENT_ANSWER_PREFILL)
    run = json.loads((out / "run.json").read_text())
    assert run["agent"]["max_tokens"] == agent_cap
    assert run["simulator"]["max_tokens"] == llamacpp.ROLE_DEFAULTS["simulator"]["max_tokens"]
    # the answer's own settings are part of the configuration (a resume with other ones is refused)
    assert run["agent"]["answer"]["max_tokens"] == llamacpp.AGENT_ANSWER_MAX_TOKENS
    assert run["agent"]["answer"]["prefill"] == llamacpp.AGENT_ANSWER_PREFILL
