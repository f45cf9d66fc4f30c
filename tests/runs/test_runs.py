"""One rule decides which record of an episode counts, and resume, report and leaderboard all get it from
colbench.runs: the first ``ok`` record; with none, the last record."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS
from plans import scripted_plan

from colbench.domains.backend.scorer import BackendScore
from colbench.env.domain import get_domain
from colbench.errors import DataError
from colbench.eval import RunPlan, run_eval
from colbench.report import build_report
from colbench.runs import EpisodeRecord, counted, final_records, load_run, parse_record
from colbench.tasks import Task

METRICS = get_domain("backend").metrics


class QuickScorer:
    """Every answer scores 1/1 at once: these tests are about records, not scoring."""

    def score(self, task: Task, answer: str) -> BackendScore:
        return BackendScore(task.task_id, tests_passed=1, tests_total=1)

    def describe(self) -> dict[str, Any]:
        return {"scorer": "quick"}


class ForbiddenAgent:
    """Fails the test if the harness runs an episode the rule says is done."""

    name = "scripted:reference"  # stands in for the run's own agent (run.json names it)

    def __init__(self, done: set[str]) -> None:
        self.done = done
        self.ran: list[str] = []

    def act(self, messages: Any, context: Any) -> Any:
        from colbench.agents.agent import AgentReply

        assert context.task_id not in self.done, f"{context.task_id} has an ok record: it must never run again"
        self.ran.append(context.task_id)
        return AgentReply("I WANT TO ANSWER:\nx")

    async def aact(self, messages: Any, context: Any) -> Any:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


def row(task_id: str, status: str, reward: float | None = None, success: bool | None = None) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "trial": 0,
        "status": status,
        "reward": reward,
        "success": success,
        "error": None if status == "ok" else "LLMError: gave up",
        "usage": {"agent": {"prompt_tokens": 1, "completion_tokens": 1, "calls": 1}},
    }


FAILED = row("t", "ok", 0.2, False)  # scored, and not a success
INFRA = row("t", "infra_error")
OK_HALF = row("t", "ok", 0.5, False)
OK_FULL = row("t", "ok", 1.0, True)


def config(out: Path, limit: int) -> RunPlan:
    return scripted_plan(out, limit=limit)


def records(rows: list[dict[str, Any]]) -> list[EpisodeRecord]:
    return [parse_record(r, f"f:{i + 1}", METRICS) for i, r in enumerate(rows)]


def test_counted_prefers_a_held_score_over_anything_later() -> None:
    failed, infra, ok = records([FAILED, INFRA, OK_FULL])
    assert counted(None, infra) is infra
    assert counted(infra, ok) is ok  # an infrastructure error is replaced by the next attempt
    assert counted(failed, ok) is failed  # a score is final
    assert counted(infra, infra) is infra


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_resume_report_and_leaderboard_count_the_same_record(tmp_path: Path, order: tuple[int, ...]) -> None:
    rows = [[FAILED, INFRA, OK_HALF, OK_FULL][i] for i in order]
    expected = next(r for r in rows if r["status"] == "ok")  # the rule: the first ok record
    out = tmp_path / "run"
    cfg = config(out, limit=2)
    first = run_eval(cfg, scorer=QuickScorer())
    assert first.overall.ok == 2
    task_ids = [json.loads(line)["task_id"] for line in (out / "episodes.jsonl").read_text().splitlines()]
    target, other = task_ids
    written = [json.dumps({**r, "task_id": target}) for r in rows]
    other_row = json.dumps({**OK_FULL, "task_id": other})
    (out / "episodes.jsonl").write_text("\n".join([other_row, *written]) + "\n")

    # resume: the episode is done (it has an ok record), its counted reward is the first ok one
    agent = ForbiddenAgent({target, other})
    resumed = run_eval(dataclasses.replace(cfg, resume=True), agent=agent, scorer=QuickScorer())
    assert agent.ran == [] and resumed.session.finished == 0
    assert resumed.overall.ok == 2 and resumed.overall.reward_sum == pytest.approx(1.0 + expected["reward"])
    assert resumed.overall.success == 1 + int(expected["success"])

    # report: the same record, with every attempt counted
    run = load_run(out)
    episode = run.episodes[(target, 0)]
    assert (episode.reward, episode.success, episode.attempts) == (expected["reward"], expected["success"], 4)
    assert run.usage["agent"].calls == 5  # tokens: every attempt was paid for

    # leaderboard: built from the same records
    table = build_report([run]).tables[0]
    (entry,) = table.rows
    assert entry.secondary is not None and entry.secondary.value == pytest.approx((1.0 + expected["reward"]) / 2)
    assert entry.primary.value == pytest.approx((1 + int(expected["success"])) / 2)
    assert entry.infra == 0


def test_an_episode_with_only_infrastructure_errors_runs_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = config(out, limit=1)
    run_eval(cfg, scorer=QuickScorer())
    (task_id,) = [json.loads(line)["task_id"] for line in (out / "episodes.jsonl").read_text().splitlines()]
    (out / "episodes.jsonl").write_text(
        json.dumps({**INFRA, "task_id": task_id}) + "\n" + json.dumps({**INFRA, "task_id": task_id}) + "\n"
    )
    counted_before = load_run(out).episodes[(task_id, 0)]
    assert counted_before.status == "infra_error" and counted_before.where.endswith(":2")  # the last one
    assert build_report([load_run(out)]).tables[0].rows[0].infra == 1
    agent = ForbiddenAgent(set())
    result = run_eval(dataclasses.replace(cfg, resume=True), agent=agent, scorer=QuickScorer())
    assert agent.ran == [task_id] and result.overall.ok == 1
    after = load_run(out).episodes[(task_id, 0)]
    assert after.ok and after.attempts == 3


def test_final_records_keep_first_appearance_order() -> None:
    rows = [row("b", "infra_error"), row("a", "ok", 1.0, True), row("b", "ok", 0.0, False)]
    final = final_records(records(rows))
    assert list(final) == [("b", 0), ("a", 0)]
    assert final[("b", 0)].reward == 0.0 and final[("b", 0)].attempts == 2


def test_older_run_dirs_have_no_task_snapshot() -> None:
    for path in sorted((TESTS / "data" / "run_dirs").iterdir()):
        assert load_run(path).snapshot_tasks() is None, path


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("../tasks.jsonl", None, "tasks.snapshot must be a file name in the run directory"),
        ("/etc/passwd", None, "tasks.snapshot must be a file name in the run directory"),
        ("", None, "tasks.snapshot must be a file name"),
        ("tasks.jsonl", None, "not found, though run.json names it"),
        (
            "tasks.jsonl",
            '{"task_id": "t1", "problem_description": ""}\n',
            r"tasks.jsonl:1: field 'problem_description'",
        ),
        ("tasks.jsonl", "[1, 2]\n", "tasks.jsonl:1: expected a JSON object"),
    ],
)
def test_a_bad_task_snapshot_is_a_one_line_error(tmp_path: Path, name: str, content: str | None, error: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(TESTS / "data" / "run_dirs" / "backend-a", run)
    config = json.loads((run / "run.json").read_text())
    config["tasks"]["snapshot"] = name
    (run / "run.json").write_text(json.dumps(config))
    if content is not None:
        (run / name).write_text(content)
    with pytest.raises(DataError, match=error) as caught:
        load_run(run).snapshot_tasks()
    assert "\n" not in str(caught.value)
