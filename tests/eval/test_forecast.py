"""``colbench eval --dry-run``: a forecast of tokens, cost and time from what is known before a run, no model called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai_stub import StubOpenAIServer
from plans import forecast_by_hand, forecast_plan, scripted_plan

from colbench.cli.main import main as cli_main
from colbench.env.domain import get_domain
from colbench.eval import RunPlan, run_eval
from colbench.eval.dry_run import dry_run
from colbench.eval.forecast import AGENT_TOKENS, CALL_BASE_S, TOKENS_PER_S, forecast, tokens
from colbench.llm.limits import EndpointLimits
from colbench.report import load_run
from colbench.report.costs import LIST_PRICES, Price, Prices
from colbench.tasks import load_split


def _config(**overrides: object) -> RunPlan:
    return forecast_plan(**{"agent": "openai:gpt-4o-mini", "simulator": "openai:gpt-4o", **overrides})


def test_the_arithmetic_by_hand() -> None:
    domain, task, prompts = forecast_by_hand()
    (typical, cap) = forecast(_config(max_turns=4), domain, prompts, [task, task], turns=2)
    kept = min(120, domain.max_reply_chars // 4)
    per_turn = AGENT_TOKENS + kept
    agent, human = typical.roles
    assert typical.turns == 2 and cap.turns == 4 and typical.episodes == 2
    assert agent.calls == 4 and agent.prompt_tokens == 2 * (2 * 100 + per_turn)
    assert agent.completion_tokens == 4 * AGENT_TOKENS
    hidden = tokens(domain.prompt_template("simulator")) + tokens(task.hidden_information)
    assert human.calls == 2 and human.prompt_tokens == 2 * (hidden + per_turn)
    mini, big = LIST_PRICES.models["gpt-4o-mini"], LIST_PRICES.models["gpt-4o"]
    expected = (agent.prompt_tokens * mini.input + agent.completion_tokens * mini.output) / 1e6
    assert agent.cost_usd == pytest.approx(expected)
    assert typical.cost_usd == pytest.approx(expected + (human.prompt_tokens * big.input + 240 * big.output) / 1e6)
    episode_s = 2 * (CALL_BASE_S + AGENT_TOKENS / TOKENS_PER_S) + (CALL_BASE_S + 120 / TOKENS_PER_S)
    assert typical.wall_s == pytest.approx(2 / (8 / episode_s)) and typical.bound == "latency at concurrency 8"
    assert cap.cost_usd is not None and cap.cost_usd > typical.cost_usd


def test_rate_limits_and_unknown_models_and_scripted_roles() -> None:
    domain = get_domain("backend")
    tasks = load_split("backend-sample")
    prompts = {t.task_id: t.problem_description for t in tasks}
    limited = _config(simulator_limits=EndpointLimits(rpm=6), concurrency=64)
    typical = forecast(limited, domain, prompts, tasks)[0]
    assert typical.bound == "simulator rpm 6"
    assert typical.wall_s == pytest.approx(len(tasks) / (6 / 60 / (typical.turns - 1)))
    unknown = forecast(_config(agent="openai:my-finetune"), domain, prompts, tasks)[0]
    assert unknown.roles[0].cost_usd is None and unknown.cost_usd is None
    priced = Prices({"my-finetune": Price(1.0, 1.0), "gpt-4o": Price(0.0, 0.0)})
    paid = forecast(_config(agent="openai:my-finetune"), domain, prompts, tasks, prices=priced)[0]
    agent = paid.roles[0]
    assert paid.cost_usd == pytest.approx((agent.prompt_tokens + agent.completion_tokens) / 1e6)
    offline = forecast(_config(agent="scripted:reference", simulator="scripted"), domain, prompts, tasks)[0]
    assert offline.cost_usd == 0.0 and offline.wall_s == 0.0 and offline.bound == "no model calls"


def test_dry_run_calls_no_model_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with StubOpenAIServer() as stub:
        out = tmp_path / "run"
        argv = ["eval", "--env", "ColBench-Backend-v1", "--agent", "openai:gpt-4o-mini", "--agent-base-url"]
        argv += [stub.base_url, "--simulator", "openai:gpt-4o", "--simulator-base-url", stub.base_url]
        argv += ["--tasks", "backend-sample", "--trials", "3", "--out", str(out), "--dry-run"]
        assert cli_main(argv) == 0
        assert stub.request_count == 0
    assert not out.exists()
    text = capsys.readouterr().out
    assert "forecast for 60 episodes" in text and "typical: 5 agent turns" in text and "cap: 10 agent turns" in text
    assert "gpt-4o-mini: 300 calls" in text and "wall time ~" in text


def test_a_dry_run_needs_no_run_directory_but_a_run_and_a_resume_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "--env", "ColBench-Backend-v1", "--agent", "openai:gpt-4o-mini", "--simulator", "openai:gpt-4o"]
    argv += ["--tasks", "backend-sample", "--limit", "2"]
    assert cli_main([*argv, "--dry-run"]) == 0
    assert "forecast for 2 episodes" in capsys.readouterr().out and not list(tmp_path.iterdir())
    for extra in ([], ["--dry-run", "--resume"]):
        assert cli_main([*argv, *extra]) == 2
        assert "--out DIR is required" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_run_records_its_forecast_and_the_report_sets_it_beside_the_actual(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = scripted_plan(out, limit=4, trials=2, sandbox="bwrap")
    run_eval(config)
    recorded = json.loads((out / "run.json").read_text())["forecast"]
    assert recorded["scenario"] == "typical" and recorded["episodes"] == 8
    assert run_eval(RunPlan.resolve(**{**config.__dict__, "resume": True})).overall.ok == 8  # not compared on resume
    assert cli_main(["report", str(out), "--html"]) == 0
    html = (out / "report.html").read_text()
    assert "Forecast and actual" in html and "forecast (5 turns per episode)" in html
    # a dry run of a resume forecasts only the episodes without a record
    assert len(load_run(out).episodes) == 8
    more = RunPlan.resolve(**{**config.__dict__, "resume": True, "limit": 6, "agent": "openai:gpt-4o-mini"})
    assert "forecast for 4 episodes" in dry_run(more)
