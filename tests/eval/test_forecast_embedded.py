"""The embedded model's forecast: timed by its measured speed on this machine (prompt processing and generation),
measured once per model and machine and cached, never by a hosted endpoint's assumed latency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from local_model import needs_model
from plans import forecast_by_hand, forecast_plan

from colbench.env.domain import get_domain
from colbench.eval import RunPlan
from colbench.eval.dry_run import dry_run
from colbench.eval.forecast import AGENT_TOKENS, forecast, forecast_text, tokens
from colbench.llm.llamacpp import AGENT_ANSWER_MAX_TOKENS, ROLE_DEFAULTS, server
from colbench.llm.llamacpp.server import LlamaCppConfig
from colbench.llm.llamacpp.speed import Speed, cached_speed, measured_speed, speed_file
from colbench.report.costs import LIST_PRICES
from colbench.tasks import load_split

RECORDED = Speed(prompt_tps=120.0, gen_tps=40.0, measured_at="2026-11-26T21:54:34Z", model="m", machine="cpu", slots=4)


def _plan(**overrides: object) -> RunPlan:
    return forecast_plan(**{"agent": "llamacpp", "simulator": "llamacpp", **overrides})


def test_the_embedded_models_time_is_its_measured_speed_by_hand() -> None:
    domain, task, prompts = forecast_by_hand()
    speeds = {"agent": RECORDED, "simulator": RECORDED}
    typical = forecast(_plan(max_turns=4), domain, prompts, [task, task], turns=2, speeds=speeds)[0]
    agent_out = round((1 * ROLE_DEFAULTS["agent"]["max_tokens"] + AGENT_ANSWER_MAX_TOKENS) / 2)
    human_out = min(120, ROLE_DEFAULTS["simulator"]["max_tokens"])
    agent, human = typical.roles
    assert agent.completion_tokens == 2 * 2 * agent_out and human.completion_tokens == 2 * 1 * human_out
    per_turn = agent_out + min(human_out, domain.max_reply_chars // 4)
    hidden = tokens(domain.prompt_template("simulator")) + tokens(task.hidden_information)
    # 2 episodes x 2 roles fit the 4 slots: each call processes only what is new since the role's last call
    new_prompt = 2 * (100 + per_turn) + 2 * (hidden + per_turn)
    generated = agent.completion_tokens + human.completion_tokens
    assert typical.wall_s == pytest.approx(new_prompt / 120.0 + generated / 40.0)
    assert typical.bound == "the embedded model's measured speed"
    text = forecast_text([typical], LIST_PRICES)
    assert "120 prompt tokens/s, 40.0 generated tokens/s, measured on this machine at 2026-11-26T21:54:34Z" in text

    # more episodes at once than slots: every call processes its whole prompt
    many = forecast(_plan(max_turns=4), domain, prompts, [task] * 3, turns=2, speeds=speeds)[0]
    assert many.wall_s == pytest.approx(
        (many.roles[0].prompt_tokens + many.roles[1].prompt_tokens) / 120.0
        + (many.roles[0].completion_tokens + many.roles[1].completion_tokens) / 40.0
    )
    # a faster machine, a shorter forecast; the concurrency cannot hide a CPU-bound model
    fast = Speed(1200.0, 400.0, "2026-11-26T22:00:00Z", "m", "cpu", 4)
    quick = forecast(
        _plan(max_turns=4), domain, prompts, [task, task], turns=2, speeds={"agent": fast, "simulator": fast}
    )
    assert quick[0].wall_s == pytest.approx(typical.wall_s / 10)


def test_an_embedded_role_without_a_measurement_says_its_speed_is_assumed() -> None:
    domain = get_domain("backend")
    tasks = load_split("backend-sample")[:3]
    prompts = {t.task_id: t.problem_description for t in tasks}
    unmeasured = forecast(_plan(), domain, prompts, tasks)[0]
    assert unmeasured.bound.startswith("latency") and "not measured on this machine yet" in unmeasured.speeds[0]
    mixed = forecast(_plan(agent="openai:gpt-4o-mini"), domain, prompts, tasks, speeds={"simulator": RECORDED})[0]
    assert mixed.speeds == (RECORDED.describe(),)
    assert mixed.roles[0].completion_tokens == mixed.episodes * mixed.turns * AGENT_TOKENS  # the API agent's habit


def test_a_cached_measurement_of_another_machine_or_a_broken_file_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLBENCH_HOME", str(tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    path = speed_file(LlamaCppConfig.from_env(gguf))
    assert path.parent == tmp_path / "speed" and cached_speed(gguf) is None
    path.parent.mkdir(parents=True)
    for broken in ("{", "[]", json.dumps({"prompt_tps": 1.0}), json.dumps({**RECORDED.__dict__, "gen_tps": 0})):
        path.write_text(broken)
        assert cached_speed(gguf) is None
    path.write_text(json.dumps(RECORDED.__dict__))
    assert cached_speed(gguf) == RECORDED
    assert speed_file(LlamaCppConfig.from_env(gguf, threads=7)) != path  # another thread count: measured again
    gguf.write_bytes(b"GGUF" + bytes(90))
    assert cached_speed(gguf) is None  # another model file


@needs_model
def test_a_real_measurement_is_cached_and_a_dry_run_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLBENCH_HOME", str(tmp_path))
    speed = measured_speed()
    assert speed.prompt_tps > 0 and speed.gen_tps > 0 and speed.slots == LlamaCppConfig.from_env().parallel
    assert json.loads(speed_file(LlamaCppConfig.from_env()).read_text())["measured_at"] == speed.measured_at
    server.close()
    assert measured_speed() == speed and not server._servers  # from the cache: no server started again
    plan = _plan(tasks="backend-sample", limit=2)
    text = dry_run(plan)
    assert f"measured on this machine at {speed.measured_at}" in text and "embedded model's measured speed" in text
    assert not server._servers
