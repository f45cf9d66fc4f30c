"""``colbench report``: reading run directories, leaderboard statistics, costs, the HTML report and the CLI.

The fixed run directories under tests/data/run_dirs/ are small enough to check by hand (their numbers are worked
out in the comments below); variations are built in tmp_path with ``make_run``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from malformed import refused
from paths import REPO, TESTS

from colbench.env.domain import get_domain
from colbench.errors import ConfigError, DataError
from colbench.report import (
    build_report,
    load_prices,
    load_run,
    render_markdown,
    render_run,
    render_text,
    write_run_report,
)
from colbench.report.costs import LIST_PRICES, Prices
from colbench.report.html_report import redact, safe_relative
from colbench.report.stats import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_ci,
    flip_rate,
    mean_estimate,
    pass_hat_k,
    success_estimate,
    wilson_ci,
    win_estimate,
    win_outcomes,
)

RUNS = TESTS / "data" / "run_dirs"


# -- helpers ----------------------------------------------------------------------------------------------------
def run_json(
    domain: str = "backend",
    *,
    task_ids: tuple[str, ...] = ("t1", "t2", "t3"),
    trials: int = 1,
    env_id: str | None = None,
    agent: str = "agent-model",
    simulator: str = "sim-model",
    scoring: dict[str, Any] | None = None,
    ids_sha256: str | None = "auto",
) -> dict[str, Any]:
    return {
        "format": 1,
        "colbench_version": "0.1.0",
        "created": "2025-01-15T10:00:00Z",
        "env_id": env_id or f"ColBench-{domain.capitalize()}-v0",
        "domain": domain,
        "tasks": {
            "spec": "unit",
            "count": len(task_ids),
            "ids_sha256": hashlib.sha256("\n".join(task_ids).encode()).hexdigest()
            if ids_sha256 == "auto"
            else ids_sha256,
        },
        "trials": trials,
        "max_turns": 10,
        "agent_prompt_sha256": "a",
        "agent": {"spec": f"openai:{agent}", "name": agent},
        "simulator": {"spec": f"openai:{simulator}", "model": simulator, "prompt_sha256": "p"},
        "scoring": scoring or ({"scorer_version": "2"} if domain == "backend" else {"embedder": "test"}),
    }


def record(task: str, trial: int, reward: float | None, success: bool | None = None, **extra: Any) -> dict[str, Any]:
    """An episode record; ``reward=None`` makes it an infrastructure error."""
    if reward is None:
        return {"task_id": task, "trial": trial, "status": "infra_error", "reward": None, "success": None,
                "error": "LLMError: endpoint down", **extra}  # fmt: skip
    return {"task_id": task, "trial": trial, "status": "ok", "reward": reward, "success": success,
            "termination": "answered", "turns": 1, "dialogue": [], "answer": "x", **extra}  # fmt: skip


def make_run(root: Path, name: str, config: dict[str, Any], records: list[dict[str, Any]], tail: str = "") -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(config))
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=120)


# -- reading ----------------------------------------------------------------------------------------------------
def test_last_record_per_key_wins_and_torn_last_line_is_ignored() -> None:
    run = load_run(RUNS / "backend-a")
    assert run.records == 5  # 5 whole lines, the 6th is torn
    assert run.torn_line == f"{RUNS / 'backend-a' / 'episodes.jsonl'}:6"
    assert any("episodes.jsonl:6: ignored a torn last line" in w for w in run.warnings)
    t3 = run.episodes[("t3", 0)]
    assert (t3.status, t3.reward, t3.attempts) == ("ok", 0.0, 2)  # the infra_error attempt was re-run
    assert run.episodes[("t4", 0)].status == "infra_error"
    assert run.infra_errors == 1
    assert [e.task_id for e in run.ordered_episodes()] == ["t1", "t2", "t3", "t4"]


def test_torn_utf8_last_line_is_ignored(tmp_path: Path) -> None:
    path = make_run(tmp_path, "r", run_json(), [record("t1", 0, 1.0, True)])
    with (path / "episodes.jsonl").open("ab") as f:
        f.write('{"task_id": "t2", "answer": "é'.encode()[:-1])  # cut inside a two-byte character
    run = load_run(path)
    assert len(run.episodes) == 1 and run.torn_line == f"{path / 'episodes.jsonl'}:2"


def test_bad_line_before_the_last_is_a_one_line_error(tmp_path: Path) -> None:
    path = make_run(
        tmp_path,
        "r",
        run_json(),
        [record("t1", 0, 1.0, True)],
        tail='{"task_id": \n' + json.dumps(record("t2", 0, 1.0, True)) + "\n",
    )
    with pytest.raises(DataError) as err:
        load_run(path)
    assert str(err.value).startswith(f"{path / 'episodes.jsonl'}:2: invalid JSON")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"task_id": "t1", "trial": 0, "status": "done"}, "field 'status': 'done' is not 'ok' or 'infra_error'"),
        ({"task_id": "t1", "trial": -1, "status": "ok"}, "field 'trial': -1"),
        ({"trial": 0, "status": "ok"}, "field 'task_id': missing"),
        ({"task_id": "t1", "trial": 0, "status": "ok", "success": True}, "field 'reward': None is not a finite number"),
        ({"task_id": "t1", "trial": 0, "status": "ok", "reward": 1.5, "success": True}, "field 'reward': 1.5"),
        ({"task_id": "t1", "trial": 0, "status": "ok", "reward": 1.0}, "field 'success': None"),
        (
            {
                "task_id": "t1",
                "trial": 0,
                "status": "ok",
                "reward": 1,
                "success": True,
                "usage": {"agent": {"calls": -2}},
            },
            "field 'usage.agent.calls': -2",
        ),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path: Path, row: Any, message: str) -> None:
    path = make_run(tmp_path, "r", run_json(), [record("t0", 0, 1.0, True), row])
    with pytest.raises(DataError, match=re.escape(f"{path / 'episodes.jsonl'}:2: {message}")):
        load_run(path)


def test_bad_run_json_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such run directory"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'empty' / 'run.json'}: not found")):
        load_run(tmp_path / "empty")
    for name, config, message in [
        ("v2", {**run_json(), "format": 2}, "field 'format': 2 is not supported"),
        ("dom", {**run_json(), "domain": "mobile"}, "field 'domain': 'mobile'"),
        ("tr", {**run_json(), "trials": 0}, "field 'trials': 0"),
    ]:
        path = make_run(tmp_path, name, config, [])
        with pytest.raises(DataError, match=re.escape(f"{path / 'run.json'}: {message}")):
            load_run(path)
    path = tmp_path / "bad"
    path.mkdir()
    (path / "run.json").write_text("{\n  oops")
    with pytest.raises(DataError, match=re.escape(f"{path / 'run.json'}:2: invalid JSON")):
        load_run(path)


def test_run_without_episodes_yet(tmp_path: Path) -> None:
    path = make_run(tmp_path, "r", run_json(), [])
    (path / "episodes.jsonl").unlink()
    report = build_report([load_run(path)])
    row = report.tables[0].rows[0]
    assert row.primary.value is None and row.n_tasks == 0
    assert "incomplete: 3 of 3 episodes not run" in row.notes
    assert "not found: no episode has finished yet" in report.warnings()[0]


# -- statistics -------------------------------------------------------------------------------------------------
def test_wilson_interval_by_hand() -> None:
    # p = 1/2, n = 4, z = 1.96: centre 0.5, half-width z / (1 + z²/4) * sqrt(1/16 + z²/64) = 0.3500
    low, high = wilson_ci(2, 4)  # type: ignore[misc]
    assert (round(low, 3), round(high, 3)) == (0.150, 0.850)
    # 0 of n: lower bound 0, upper bound z² / (n + z²)
    assert wilson_ci(0, 10) == (0.0, pytest.approx(1.959964**2 / (10 + 1.959964**2), abs=1e-6))
    assert wilson_ci(10, 10) == (pytest.approx(10 / (10 + 1.959964**2), abs=1e-6), 1.0)
    assert wilson_ci(0, 0) is None


def test_bootstrap_interval_by_hand() -> None:
    # Two tasks scoring 0 and 1: resample means are 0, 0.5, 1 with probability 1/4, 1/2, 1/4 -> [0, 1].
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)
    assert bootstrap_ci([0.4, 0.4, 0.4]) == pytest.approx((0.4, 0.4))
    assert bootstrap_ci([0.7]) is None
    # Fixed seed: the same input always gives the same interval.
    values = [0.1, 0.9, 0.3, 0.5, 0.5, 1.0, 0.0]
    assert bootstrap_ci(values) == bootstrap_ci(values)
    # Against the exact bootstrap distribution (all 5^5 equally likely resamples of five tasks).
    five = [0.0, 0.2, 0.3, 0.6, 1.0]
    exact = np.array([np.mean(c) for c in itertools.product(five, repeat=5)])
    low, high = bootstrap_ci(five)  # type: ignore[misc]
    assert low == pytest.approx(np.percentile(exact, 2.5), abs=0.02)
    assert high == pytest.approx(np.percentile(exact, 97.5), abs=0.02)


def test_trials_are_averaged_within_task_before_resampling() -> None:
    # Task a: trials 1, 0 -> 0.5; task b: 1, 1 -> 1. Mean 0.75; resampled task means 0.5, 0.75, 1 -> [0.5, 1].
    est = mean_estimate({"a": [1.0, 0.0], "b": [1.0, 1.0]})
    assert (est.value, est.low, est.high, est.n) == (0.75, 0.5, 1.0, 2)
    assert success_estimate({"a": [True, False], "b": [True, True]}).method == "bootstrap"
    assert success_estimate({"a": [True], "b": [False]}).method == "wilson"


def test_win_rate_ties_count_half() -> None:
    run = {"f1": 0.9, "f2": 0.7, "f3": 0.5, "f4": 0.6, "only-run": 1.0}
    ref = {"f1": 0.8, "f2": 0.7, "f3": 0.6, "f4": 0.4, "only-ref": 0.0}
    assert win_outcomes(run, ref) == {"f1": 1.0, "f2": 0.5, "f3": 0.0, "f4": 1.0}
    est = win_estimate(run, ref)
    assert (est.value, est.n) == (0.625, 4)  # (1 + 0.5 + 0 + 1) / 4 over the 4 common tasks
    assert win_estimate(run, run).value == 0.5  # against itself: all ties
    assert win_estimate({"a": 1.0}, {"b": 1.0}).value is None
    # Means over trials are exactly rounded, so equal trial sets tie whatever their order.
    from colbench.report.stats import task_means

    assert win_estimate(task_means({"x": [0.1, 0.2, 0.3]}), task_means({"x": [0.3, 0.1, 0.2]})).value == 0.5


def test_flip_rate() -> None:
    rate, n = flip_rate({"a": [True, False], "b": [True, True], "c": [False, False, True], "d": [True]})
    assert (rate, n) == (2 / 3, 3)  # d has one trial: not counted
    assert flip_rate({"a": [True]}) == (None, 0)


def test_pass_hat_k_by_hand() -> None:
    per_task = {"a": [True, True, False], "b": [True, True, True], "c": [False, True], "d": [True], "e": []}
    one = pass_hat_k(per_task, 1)  # a 2/3, b 1, c 1/2, d 1: plain success rate of task means
    assert (one.value, one.n, one.excluded) == (pytest.approx((2 / 3 + 1 + 1 / 2 + 1) / 4), 4, 0)
    two = pass_hat_k(per_task, 2)  # a C(2,2)/C(3,2) = 1/3, b 1, c C(1,2)/C(2,2) = 0; d has one trial
    assert (two.value, two.n, two.excluded) == (pytest.approx(4 / 9), 3, 1)
    three = pass_hat_k(per_task, 3)  # a C(2,3) = 0, b 1
    assert (three.value, three.n, three.excluded) == (0.5, 2, 2)
    assert pass_hat_k(per_task, 4).value is None and pass_hat_k(per_task, 4).excluded == 4
    # unbiased, not success ** k: a task at 50% over 4 trials gives C(2,2)/C(4,2) = 1/6, not 1/4
    assert pass_hat_k({"x": [True, True, False, False]}, 2).value == pytest.approx(1 / 6)
    with pytest.raises(ConfigError, match="k >= 1"):
        pass_hat_k(per_task, 0)


def test_pass_hat_k_in_report(tmp_path: Path) -> None:
    report = build_report([load_run(RUNS / "backend-a"), load_run(RUNS / "backend-b")])
    b, a = report.tables[0].rows
    assert a.pass_k == []  # one trial: no pass^k table row
    # backend-b: pass^1 = 0.625 over 4 tasks; pass^2: t1 1, t2 0, t3 0 over 3 tasks (t4 has one scored trial)
    assert [(p.k, p.n, p.excluded) for p in b.pass_k] == [(1, 4, 0), (2, 3, 1)]
    assert b.pass_k[1].value == pytest.approx(1 / 3)
    text = render_text(report)
    assert "pass^k: ColBench-Backend-v0" in text and "62.5 (4)" in text and "33.3 (3, -1)" in text
    assert "| 1 | backend-b | 62.5 (4) | 33.3 (3, -1) |" in render_markdown(report)
    assert "pass^k: " not in render_text(build_report([load_run(RUNS / "backend-a")]))  # no run with >= 2 trials
    # frontend: success is the env id's similarity threshold (0.8); t1 passes once of 2, t2 twice
    records = [record("t1", 0, 0.85), record("t1", 1, 0.75), record("t2", 0, 0.9), record("t2", 1, 0.95)]
    row = build_report([load_run(make_run(tmp_path, "f", run_json("frontend", trials=2), records))]).tables[0].rows[0]
    assert [p.value for p in row.pass_k] == [pytest.approx(0.75), pytest.approx(0.5)]


# -- leaderboard ------------------------------------------------------------------------------------------------
def test_backend_leaderboard_by_hand() -> None:
    report = build_report([load_run(RUNS / "backend-a"), load_run(RUNS / "backend-b")])
    (table,) = report.tables
    b, a = table.rows  # sorted best first
    # backend-a: t1 1.0 ok, t2 0.5, t3 0.0 (after an infra_error attempt), t4 infra_error (excluded, not a zero)
    assert (a.label, a.rank, a.n_tasks, a.infra) == ("backend-a", 2, 3, 1)
    assert a.secondary is not None and a.secondary.value == pytest.approx(0.5)
    assert a.primary.value == pytest.approx(1 / 3) and a.primary.method == "wilson"
    # Wilson, 1 of 3: centre (1/3 + z²/6) / (1 + z²/3) = 0.4269, half-width 0.3654
    assert (round(a.primary.low, 3), round(a.primary.high, 3)) == (0.061, 0.792)  # type: ignore[arg-type]
    assert a.flip is None and "torn last line ignored" in a.notes
    # backend-b, 2 trials: task means of success 1, 0.5, 0, 1 (t4's 2nd trial is an infra error) -> 0.625;
    # tests passed 1, 0.75, 0, 1 -> 0.6875; t2 flips, t1 and t3 do not, t4 has one scored trial -> 1/3.
    assert (b.label, b.rank, b.n_tasks, b.infra) == ("backend-b", 1, 4, 1)
    assert b.primary.value == pytest.approx(0.625) and b.primary.method == "bootstrap"
    assert b.secondary is not None and b.secondary.value == pytest.approx(0.6875)
    assert (b.flip, b.flip_n) == (pytest.approx(1 / 3), 3)
    text = render_text(report)
    assert "backend-b  gpt-4o" in text and "62.5 [" in text and "33.3 (3)" in text and "33.3 [6.1, 79.2]" in text


def test_infra_errors_are_excluded_and_counted(tmp_path: Path) -> None:
    path = make_run(
        tmp_path, "r", run_json(), [record("t1", 0, 1.0, True), record("t2", 0, None), record("t3", 0, None)]
    )
    row = build_report([load_run(path)]).tables[0].rows[0]
    assert (row.primary.value, row.n_tasks, row.infra) == (1.0, 1, 2)  # 100% of 1 task, not 33%


def test_frontend_win_rate_against_reference_run() -> None:
    ref = load_run(RUNS / "frontend-gpt4o")
    report = build_report([load_run(RUNS / "frontend-a"), ref], reference=ref)
    (table,) = report.tables
    a, gpt = table.rows
    assert a.label == "frontend-a" and a.primary.value == pytest.approx(0.675)  # (0.9 + 0.7 + 0.5 + 0.6) / 4
    assert a.secondary is not None and a.secondary.value == 0.625
    assert gpt.secondary is not None and gpt.secondary.value == 0.5 and gpt.notes == ["reference run"]
    assert "win % vs frontend-gpt4o" in render_text(report)
    assert "no win rate" in render_text(build_report([load_run(RUNS / "frontend-a")]))


def test_win_rate_over_common_tasks_only(tmp_path: Path) -> None:
    run = make_run(tmp_path, "run", run_json("frontend", task_ids=("a", "b", "c")), [record(t, 0, 0.5) for t in "abc"])
    ref = make_run(
        tmp_path, "ref", run_json("frontend", task_ids=("a", "b")), [record("a", 0, 0.4), record("b", 0, 0.6)]
    )
    row = build_report([load_run(run)], reference=load_run(ref)).tables[0].rows[0]
    assert row.secondary is not None and (row.secondary.value, row.secondary.n) == (0.5, 2)
    assert "win rate over 2 common tasks" in row.notes
    assert "reference run differs in task set" in row.notes


def test_frontend_flip_rate_uses_similarity_threshold(tmp_path: Path) -> None:
    records = [
        record("t1", 0, 0.85),
        record("t1", 1, 0.75),
        record("t2", 0, 0.9),
        record("t2", 1, 0.95),
        record("t3", 0, 0.3),
    ]
    path = make_run(tmp_path, "r", run_json("frontend", trials=2), records)
    row = build_report([load_run(path)]).tables[0].rows[0]
    assert (row.flip, row.flip_n) == (0.5, 2)
    assert row.primary.value == pytest.approx((0.8 + 0.925 + 0.3) / 3)


def test_backend_reference_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="win rate is a metric of frontend runs"):
        build_report([load_run(RUNS / "frontend-a")], reference=load_run(RUNS / "backend-a"))


def test_mismatched_runs_are_annotated_not_mixed_silently(tmp_path: Path) -> None:
    runs = [
        make_run(tmp_path, "base1", run_json(), [record("t1", 0, 1.0, True)]),
        make_run(tmp_path, "base2", run_json(), [record("t1", 0, 0.0, False)]),
        make_run(tmp_path, "tasks", run_json(task_ids=("x", "y")), [record("x", 0, 1.0, True)]),
        make_run(tmp_path, "env", run_json(env_id="ColBench-Backend-v1"), [record("t1", 0, 1.0, True)]),
        make_run(tmp_path, "sim", run_json(simulator="other-sim"), [record("t1", 0, 1.0, True)]),
        make_run(tmp_path, "scorer", run_json(scoring={"scorer_version": "1", "sandbox": "docker"}), []),
        make_run(tmp_path, "unknown", run_json(ids_sha256=None), []),
        make_run(tmp_path, "turns", {**run_json(), "max_turns": 5, "agent_prompt_sha256": "b"}, []),
        make_run(tmp_path, "front", run_json("frontend"), [record("t1", 0, 0.5)]),
    ]
    report = build_report([load_run(p) for p in runs])
    backend, backend_v1, frontend = report.tables
    assert (backend.env_id, backend_v1.env_id) == ("ColBench-Backend-v0", "ColBench-Backend-v1")
    assert [row.label for row in backend_v1.rows] == ["env"]  # versions never share a table
    assert [row.rank for row in backend_v1.rows] == [1] and backend_v1.rows[0].notes == [
        "incomplete: 2 of 3 episodes not run"
    ]
    notes = {row.label: row.notes for row in backend.rows}
    assert not [n for n in notes["base1"] + notes["base2"] if not n.startswith("incomplete")]
    assert notes["tasks"][0].startswith("other task set: unit, 2 tasks, ids ")
    assert notes["sim"][0] == "simulator other-sim, not sim-model"
    assert notes["scorer"][0] == 'scoring {"scorer_version": "1"}, not {"scorer_version": "2"}'  # sandbox ignored
    assert notes["unknown"][0] == "task set unknown (no tasks.ids_sha256)"
    assert notes["turns"][:2] == ["max_turns 5, not 10", "other agent instructions"]
    assert [row.label for row in frontend.rows] == ["front"]  # domains never share a table
    assert notes["base1"] == ["incomplete: 2 of 3 episodes not run"]
    text = render_text(report)
    assert "Backend leaderboard: ColBench-Backend-v0 (7 runs)" in text and "Frontend leaderboard" in text
    assert "Backend leaderboard: ColBench-Backend-v1 (1 run)" in text
    assert (
        "backend runs of ColBench-Backend-v0 and ColBench-Backend-v1 are in separate tables: scores of different env "
        "ids are not comparable across versions" in text
    )
    assert "## Backend leaderboard: ColBench-Backend-v1 (1 run)" in render_markdown(report)


def test_rows_without_scores_sort_last_and_names_stay_unique(tmp_path: Path) -> None:
    a = make_run(tmp_path / "x", "run", run_json(), [record("t1", 0, None)])
    b = make_run(tmp_path / "y", "run", run_json(), [record("t1", 0, 0.5, False)])
    rows = build_report([load_run(a), load_run(b)]).tables[0].rows
    assert [r.label for r in rows] == [str(b), str(a)]
    assert rows[1].primary.value is None and "-" in render_text(build_report([load_run(a)]))


def test_markdown_escapes_table_cells(tmp_path: Path) -> None:
    path = make_run(tmp_path, "r", run_json(agent="weird|<b>model"), [record("t1", 0, 1.0, True)])
    markdown = render_markdown(build_report([load_run(path)]))
    assert "weird\\|&lt;b&gt;model" in markdown and markdown.startswith("# colbench report")


# -- tokens and cost --------------------------------------------------------------------------------------------
def test_tokens_per_role_and_unknown_prices(tmp_path: Path) -> None:
    prices_file = tmp_path / "prices.json"
    prices_file.write_text(json.dumps({"as_of": "2025-01-15", "gpt-4o-mini": {"input": 0.15, "output": 0.6}}))
    prices = load_prices(prices_file)
    report = build_report([load_run(RUNS / "backend-a")], prices=prices)
    ((_, (agent, simulator)),) = report.costs
    # every attempt counts (the infra_error attempts were paid for too); per episode = / 4 distinct episodes
    assert (agent.usage.prompt_tokens, agent.usage.completion_tokens, agent.usage.calls) == (3100, 400, 7)
    assert (agent.per_episode(agent.usage.prompt_tokens), agent.per_episode(agent.usage.completion_tokens)) == (
        775,
        100,
    )
    assert agent.cost == pytest.approx((3100 * 0.15 + 400 * 0.6) / 1e6)
    assert (simulator.model, simulator.usage.prompt_tokens, simulator.cost) == ("gpt-4o", 900, None)
    text = render_text(report)
    line = next(ln for ln in text.splitlines() if ln.startswith("backend-a") and "simulator" in ln)
    assert line.endswith("unknown  unknown") and "$0.00" not in line
    assert "as of 2025-01-15" in text
    # without a table: colbench's dated list prices, named with their date; gpt-4o is on them
    listed = build_report([load_run(RUNS / "backend-a")])
    assert listed.costs[0][1][1].cost == pytest.approx((900 * 2.5 + 100 * 10.0) / 1e6)
    assert f"prices: colbench's list prices, as of {LIST_PRICES.as_of}" in render_text(listed)


def test_price_table_toml_and_spec_lookup(tmp_path: Path) -> None:
    toml = tmp_path / "prices.toml"
    toml.write_text('["openai:gpt-4o"]\ninput = 2.5\noutput = 10\n')
    prices = load_prices(toml)
    report = build_report([load_run(RUNS / "backend-a")], prices=prices)
    simulator = report.costs[0][1][1]
    assert simulator.cost == pytest.approx((900 * 2.5 + 100 * 10) / 1e6)  # found by its spec, openai:gpt-4o


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"m": {"input": -1, "output": 1}}', "model 'm': field 'input': -1 is not a price"),
        ('{"m": {"input": 1}}', "model 'm': field 'output': missing"),
        ('{"m": {"input": 1, "output": 1, "cached": 0.5}}', "unknown field 'cached'"),
        ('{"m": 3}', "model 'm': expected"),
        ("[1]", "expected an object"),
        ('{"m": ', "invalid JSON"),
    ],
)
def test_bad_price_tables_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    refused(load_prices, tmp_path / "p.json", content, message)


def test_a_model_not_in_the_table_costs_unknown_never_zero() -> None:
    run = load_run(RUNS / "backend-b")  # gpt-4o in both roles: on the list prices
    assert all(c.cost is not None for _, costs in build_report([run]).costs for c in costs)
    report = build_report([run], prices=Prices(source="a table without gpt-4o"))
    assert all(c.cost is None for _, costs in report.costs for c in costs)
    text = render_text(report)
    assert "prices: a table without gpt-4o" in text and "unknown" in text and "$0.00" not in text


# -- HTML -------------------------------------------------------------------------------------------------------
def _html(run_dir: Path, **kwargs: Any) -> str:
    run = load_run(run_dir)
    return render_run(run, build_report([run], **kwargs))


def test_html_escapes_untrusted_text() -> None:
    page = _html(RUNS / "backend-a")
    # The agent's first turn holds a <script> and an <img onerror>: both must be text, not markup.
    assert not re.search(r"<script", page, re.I)
    assert not re.search(r"<img[^>]*onerror", page, re.I)
    assert "Plan: &lt;script&gt;document.title=&quot;PWNED&quot;&lt;/script&gt;&lt;img src=x onerror=" in page
    assert "Content-Security-Policy" in page and "default-src &#x27;none&#x27;" in page
    # Self-contained: no external URL in any src/href (only in-page anchors and the run's own screens/).
    assert all(v.startswith(("#", "screens/")) for v in re.findall(r'(?:src|href)="([^"]*)"', page))


def test_html_lists_every_episode_with_a_transcript_link() -> None:
    page = _html(RUNS / "backend-a")
    for index, task in enumerate(["t1", "t2", "t3", "t4"]):
        assert f'<a href="#ep-{index}">{task}</a>' in page and f'id="ep-{index}"' in page
    assert "SandboxError: worker crashed" in page and "infra_error" in page
    assert "expected 1, got None" in page  # backend per-test outcome
    assert "33.3 [6.1, 79.2]" in page  # the summary row


def test_html_frontend_screenshot_by_relative_path() -> None:
    page = _html(RUNS / "frontend-a")
    assert '<img class="shot" src="screens/f1.0.png"' in page and "file missing" not in page
    for unsafe in ("../../etc/passwd", "/etc/passwd", "https://evil.example/x.png", "javascript:alert(1)", "a\\b"):
        assert safe_relative(unsafe) is None
    assert safe_relative("screens/a b.png") == "screens/a%20b.png"


def test_html_config_never_shows_keys() -> None:
    config = {"agent": {"api_key": "sk-1", "base_url": "https://user:pw@host/v1", "headers": {"Authorization": "x"}},
              "simulator": {"max_tokens": 5, "prompt_tokens": 1}}  # fmt: skip
    assert redact(config) == {
        "agent": {
            "api_key": "[redacted]",
            "base_url": "https://[redacted]@host/v1",
            "headers": {"Authorization": "[redacted]"},
        },
        "simulator": {"max_tokens": 5, "prompt_tokens": 1},
    }


def test_write_run_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "backend-a"
    shutil.copytree(RUNS / "backend-a", run_dir)
    run = load_run(run_dir)
    target = write_run_report(run, build_report([run]))
    assert target == run_dir / "report.html" and target.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.browser
def test_html_script_in_agent_turn_does_not_run(tmp_path: Path) -> None:
    """Open the report in headless Chromium: the injected script and onerror handler never run."""
    pytest.importorskip("playwright")
    from playwright.sync_api import Dialog, sync_playwright

    from colbench.errors import ConfigError as NoChromium
    from colbench.render import find_chromium

    try:
        chromium = find_chromium()
    except NoChromium as exc:
        pytest.skip(str(exc))
    run_dir = tmp_path / "backend-a"
    shutil.copytree(RUNS / "backend-a", run_dir)
    run = load_run(run_dir)
    target = write_run_report(run, build_report([run]))
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_page()

        def on_dialog(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(target.as_uri())
        page.wait_for_timeout(300)
        title = page.title()
        text = page.inner_text("#ep-0")
        browser.close()
    assert title == "colbench report: backend-a" and not dialogs
    assert '<script>document.title="PWNED"</script>' in text


# -- CLI --------------------------------------------------------------------------------------------------------
def test_cli_report_table_markdown_and_html(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    md = tmp_path / "board.md"
    res = colbench(
        "report", *(str(p) for p in sorted(runs.iterdir())), "--markdown", str(md), "--html",
        "--reference-run", str(runs / "frontend-gpt4o"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Backend leaderboard: ColBench-Backend-v0 (3 runs)")
    assert "Frontend leaderboard" in res.stdout and "win % vs frontend-gpt4o" in res.stdout
    assert "other task set: backend-test" in res.stdout
    assert "ignored a torn last line" in res.stderr and f"wrote {md}" in res.stderr
    assert md.read_text().startswith("# colbench report")
    assert all((p / "report.html").is_file() for p in runs.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/nope"], "nope: no such run directory"),
        (["{runs}/backend-a", "--prices", "{tmp}/missing.json"], "missing.json: cannot read price table"),
        (["{runs}/frontend-a", "--reference-run", "{runs}/backend-a"], "win rate is a metric of frontend runs"),
        (["{runs}/backend-a", "--markdown", "{tmp}/no/such/dir/board.md"], "board.md: cannot write"),
        (["{tmp}/bad"], "episodes.jsonl:1: field 'status'"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    make_run(tmp_path, "bad", run_json(), [{"task_id": "t1", "trial": 0}, record("t2", 0, 1.0, True)])
    res = colbench("report", *(a.format(tmp=tmp_path, runs=RUNS) for a in args))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("colbench: error: ") and res.stderr.count("\n") == 1 and message in res.stderr
    assert res.stdout == ""


def test_bootstrap_constant_is_documented() -> None:
    doc = (REPO / "docs" / "report.md").read_text()
    assert f"{BOOTSTRAP_RESAMPLES:,}" in doc or str(BOOTSTRAP_RESAMPLES) in doc


def test_success_reads_by_the_env_ids_own_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An env id may judge success by a threshold of its own (``Domain.metrics_for``): pass^k and the flip rate
    follow the run's env id, never only the domain's first rule (test-only metrics until a v1 scorer defines them)."""
    domain = get_domain("frontend")
    strict = dataclasses.replace(domain.metrics, success_threshold=0.9)
    monkeypatch.setattr(
        type(domain), "metrics_for", lambda self, env_id: strict if env_id == "ColBench-Frontend-v1" else self.metrics
    )
    records = [record("t1", 0, 0.85), record("t1", 1, 0.75), record("t2", 0, 0.9), record("t2", 1, 0.95)]
    v0 = make_run(tmp_path, "v0", run_json("frontend", trials=2), records)
    v1 = make_run(tmp_path, "v1", run_json("frontend", trials=2, env_id="ColBench-Frontend-v1"), records)
    report = build_report([load_run(v0), load_run(v1)])
    rows = {table.env_id: table.rows[0] for table in report.tables}
    assert len(report.tables) == 2  # different env ids: separate tables, never ranked together
    assert [p.value for p in rows["ColBench-Frontend-v0"].pass_k] == [pytest.approx(0.75), pytest.approx(0.5)]
    assert [p.value for p in rows["ColBench-Frontend-v1"].pass_k] == [0.5, 0.5]  # t1 fails both at 0.9
    assert rows["ColBench-Frontend-v0"].flip == 0.5 and rows["ColBench-Frontend-v1"].flip == 0.0
    assert "frontend success: similarity >= 0.80" in render_text(report) and ">= 0.90" in render_text(report)


def _v1_copy(source: Path, out: Path, parts: dict[str, list[float]]) -> Path:
    """A frontend run rewritten as ColBench-Frontend-v1 records: each episode's parts, its reward their mean, its
    success reward >= 0.9; the similarity kept (the plain CLIP cosine)."""
    out.mkdir()
    config = json.loads((source / "run.json").read_text())
    config["env_id"] = "ColBench-Frontend-v1"
    (out / "run.json").write_text(json.dumps(config))
    lines = []
    for i, line in enumerate((source / "episodes.jsonl").read_text().splitlines()):
        row = json.loads(line)
        sub = {name: values[i] for name, values in parts.items()}
        reward = sum(sub.values()) / len(sub)
        row.update(reward=reward, success=reward >= 0.9)
        row["score"] = {**row["score"], "reward": reward, "success": reward >= 0.9, "subscores": sub}
        lines.append(json.dumps(row))
    (out / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_v1_reports_the_parts_of_the_reward_hal_s_clip_rate_and_the_win_rate(tmp_path: Path) -> None:
    names = ("block_match", "text", "position", "color", "clip")
    good = _v1_copy(RUNS / "frontend-a", tmp_path / "good", {n: [1.0, 0.9, 0.95, 0.5] for n in names})
    weak = _v1_copy(RUNS / "frontend-gpt4o", tmp_path / "weak", {n: [0.2, 0.9, 0.3, 0.4] for n in names})
    report = build_report([load_run(good), load_run(weak)], reference=load_run(weak))
    (table,) = report.tables
    row = next(r for r in table.rows if r.label == "good")
    assert row.parts["text"].value == pytest.approx((1.0 + 0.9 + 0.95 + 0.5) / 4)
    assert row.parts["CLIP >= 0.8"].value == pytest.approx(0.25)  # the similarities 0.9, 0.7, 0.5, 0.6
    assert row.parts["win rate"].value == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    assert row.primary.value == pytest.approx(0.75)  # success: rewards 1.0, 0.9, 0.95 reach the threshold
    text = render_text(report)
    assert "parts of the reward: ColBench-Frontend-v1" in text and "block_match" in text and "CLIP >= 0.8 %" in text
    assert "0.838 [" in text  # a part on the reward's own scale, with its interval


def test_hal_s_rate_is_never_shown_for_the_test_embedder(tmp_path: Path) -> None:
    names = ("block_match", "text", "position", "color", "clip")
    run = _v1_copy(RUNS / "frontend-a", tmp_path / "test-embedder", {n: [1.0, 1.0, 1.0, 1.0] for n in names})
    config = json.loads((run / "run.json").read_text())
    config["scoring"] = {"embedder": "test-thumb32-edges-v1", "env_id": "ColBench-Frontend-v1"}
    (run / "run.json").write_text(json.dumps(config))
    row = build_report([load_run(run)]).tables[0].rows[0]
    assert "CLIP >= 0.8" not in row.parts and set(row.parts) == set(names)


def test_the_html_report_of_a_v1_run_plots_the_parts_of_its_reward(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    names = ("block_match", "text", "position", "color", "clip")
    run = _v1_copy(RUNS / "frontend-a", tmp_path / "v1", {n: [1.0, 0.8, 0.6, 0.4] for n in names})
    page = _html(run)
    assert "Parts of the reward (ColBench-Frontend-v1)" in page
    assert all(f'part-{name}-bar-0"' in page for name in names)  # one bar per part for the run
    assert "Parts of the reward" not in _html(RUNS / "frontend-a")  # v0's reward has no parts
