"""The evaluation runner: scripted agents on the bundled backend sample, the run directory, resume, errors,
request limits, the connection pool and progress output. Fault injection and kill/resume: test_eval_faults.py."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromium import frontend_scorer_or_skip
from openai_stub import InFlight, StubOpenAIServer
from plans import scripted_plan

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.domains.backend.scorer import BackendScore, BackendScorer
from colbench.env.domain import get_domain
from colbench.errors import ConfigError, DataError, LLMError
from colbench.eval import RunPlan, run_eval
from colbench.eval.progress import Progress, Tally
from colbench.humans.simulator import ScriptedSimulator
from colbench.llm import EndpointLimits
from colbench.runs import EpisodeRecord, RunConfig, final_records, first_difference, load_run, read_episode_log
from colbench.tasks import Task, load
from colbench.types.chat import Message, Usage

BACKEND = "ColBench-Backend-v1"


def config(out: Path, agent: str = "scripted:reference", **overrides: Any) -> RunPlan:
    return scripted_plan(out, **{"env_id": BACKEND, "agent": agent, "concurrency": 4, **overrides})


def read_episodes(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """Every record of an episodes file, in order (the run's domain says what a valid record is)."""
    run = path.parent / "run.json"
    domain = get_domain(json.loads(run.read_text())["domain"] if run.exists() else "backend")
    return [dict(r.row) for r in read_episode_log(path, domain.metrics, repair=repair).records]


def records(out: Path) -> list[dict[str, Any]]:
    return read_episodes(out / "episodes.jsonl")


class RecordingAgent:
    """Answers with the reference at turn ``answer_at``; asks before. Keeps every conversation it was shown."""

    name = "recording"

    def __init__(self, tasks: Sequence[Task], answer_at: int = 3) -> None:
        self.tasks = {t.task_id: t for t in tasks}
        self.answer_at = answer_at
        self.calls: list[tuple[list[Message], EpisodeContext]] = []

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        self.calls.append(([dict(m) for m in messages], context))
        if context.turn >= self.answer_at:
            return AgentReply("I WANT TO ANSWER:\n" + self.tasks[context.task_id].ground_truth, Usage(10, 5, 1))
        return AgentReply(f"question {context.turn}?", Usage(7, 3, 1))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


class FlakyAgent(RecordingAgent):
    """Raises an infrastructure error for the tasks in ``broken`` (every time), answers the rest at once."""

    def __init__(self, tasks: Sequence[Task], broken: set[str]) -> None:
        super().__init__(tasks, answer_at=1)
        self.broken = broken

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if context.task_id in self.broken:
            self.calls.append(([], context))
            raise LLMError("model 'x' at http://h/v1: gave up after 7 attempt(s); last error: APIConnectionError")
        return super().act(messages, context)


class QuickScorer:
    """Scores every answer 1/1 at once (for tests about concurrency, not scoring)."""

    sandbox = None

    def score(self, task: Task, answer: str) -> BackendScore:
        return BackendScore(task.task_id, tests_passed=1, tests_total=1)


# -- the main paths ----------------------------------------------------------------------------------------------


def test_reference_agent_scores_every_task(tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    result = run_eval(config(tmp_path / "run"), scorer=scorer)
    assert result.exit_code == 0
    assert (result.overall.ok, result.overall.success, result.overall.infra) == (20, 20, 0)
    rows = records(tmp_path / "run")
    assert sorted(r["task_id"] for r in rows) == sorted(t.task_id for t in bundled_tasks)
    for row in rows:
        assert row["status"] == "ok" and row["reward"] == 1.0 and row["success"] is True and row["error"] is None
        assert row["termination"] == "answered" and row["turns"] == 1 and row["trial"] == 0
        assert row["score"]["tests_passed"] == row["score"]["tests_total"] == 10
        assert [turn["role"] for turn in row["dialogue"]] == ["agent"] and row["answer"].startswith("I WANT TO ANSWER")
        assert set(row["timings"]) == {"started", "duration_s", "agent_s", "simulator_s", "scoring_s"}
        assert set(row["usage"]) == {"agent", "simulator"}
    assert "20/20 episodes scored, success 20/20 (100.0%)" in result.summary_line()


def test_ask_agent_ends_at_the_turn_cap(tmp_path: Path, scorer: BackendScorer) -> None:
    result = run_eval(config(tmp_path / "run", "scripted:ask", limit=3, max_turns=4), scorer=scorer)
    assert result.exit_code == 0 and result.overall.ok == 3 and result.overall.success == 0
    for row in records(tmp_path / "run"):
        assert row["status"] == "ok" and row["termination"] == "turn_limit" and row["turns"] == 4
        assert row["reward"] == 0.0 and row["success"] is False
        assert [t["role"] for t in row["dialogue"]] == ["agent", "human"] * 3 + ["agent"]
        assert all(t["text"] == "I don't know." for t in row["dialogue"] if t["role"] == "human")


def test_the_agent_sees_the_conversation_as_chat_messages(
    tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    agent = RecordingAgent(bundled_tasks, answer_at=3)
    simulator = ScriptedSimulator(["first reply", "second reply"])
    result = run_eval(config(tmp_path / "run", limit=2, trials=2), agent=agent, simulator=simulator, scorer=scorer)
    assert result.overall.ok == 4 and result.overall.success == 4
    by_episode: dict[tuple[str, int], list[tuple[list[Message], EpisodeContext]]] = {}
    for messages, context in agent.calls:
        by_episode.setdefault((context.task_id, context.trial), []).append((messages, context))
    assert sorted(by_episode) == sorted((t.task_id, k) for t in bundled_tasks[:2] for k in (0, 1))
    for calls in by_episode.values():
        assert [c.turn for _, c in calls] == [1, 2, 3] and all(c.max_turns == 10 for _, c in calls)
        last = calls[-1][0]
        assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
        assert "Write" in last[0]["content"] or len(last[0]["content"]) > 50  # the task prompt
        assert [m["content"] for m in last[1:]] == ["question 1?", "first reply", "question 2?", "second reply"]
    row = records(tmp_path / "run")[0]
    assert row["usage"]["agent"] == {"prompt_tokens": 24, "completion_tokens": 11, "calls": 3}
    assert [t["text"] for t in row["dialogue"]][1:4] == ["first reply", "question 2?", "second reply"]


def test_the_harness_closes_the_agent_and_the_simulator(
    tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    """At the end of a run the player awaits both protocols' aclose (no looking for clients inside them)."""
    closed: list[str] = []

    class ClosingAgent(RecordingAgent):
        async def aclose(self) -> None:
            closed.append("agent")

    class ClosingHuman(ScriptedSimulator):
        async def aclose(self) -> None:
            closed.append("simulator")

    agent, simulator = ClosingAgent(bundled_tasks, answer_at=2), ClosingHuman(["reply"])
    result = run_eval(config(tmp_path / "run", limit=2), agent=agent, simulator=simulator, scorer=scorer)
    assert result.overall.ok == 2 and sorted(closed) == ["agent", "simulator"]


def test_run_json_describes_the_whole_configuration(tmp_path: Path, scorer: BackendScorer) -> None:
    out = tmp_path / "run"
    run_eval(config(out, limit=2, trials=3, max_turns=5), scorer=scorer)
    run = RunConfig.read(out).as_json()  # the file, read back through the model that wrote it
    assert run == json.loads((out / "run.json").read_text())
    assert run["format"] == 1 and run["env_id"] == BACKEND and run["domain"] == "backend"
    assert run["trials"] == 3 and run["limit"] == 2 and run["max_turns"] == 5
    assert run["tasks"]["count"] == 2 and len(run["tasks"]["ids_sha256"]) == 64
    assert run["tasks"]["source"]["kind"] == "bundled" and len(run["tasks"]["source"]["sha256"]) == 64
    assert run["agent"]["spec"] == "scripted:reference" and len(run["simulator"]["prompt_sha256"]) == 64
    assert run["scoring"]["scorer_version"] and len(run["config_sha256"]) == 64
    assert len(records(out)) == 6 and {r["trial"] for r in records(out)} == {0, 1, 2}


def test_endpoint_settings_are_recorded_but_never_the_key(tmp_path: Path, scorer: BackendScorer) -> None:
    secret = "sk-test-very-secret-1234"
    with StubOpenAIServer(default=lambda request: "Use a list.") as server:
        options = {"base_url": server.base_url, "api_key": secret, "temperature": 0.3, "max_tokens": 77}
        out = tmp_path / "run"
        cfg = config(
            out, "scripted:ask", limit=1, max_turns=2, simulator="openai:stub-human", simulator_options=options
        )
        result = run_eval(cfg, scorer=scorer)
        assert server.headers[0]["authorization"] == f"Bearer {secret}"
        base_url = server.base_url
    assert result.overall.ok == 1
    sim = RunConfig.read(out).as_json()["simulator"]
    assert (sim["model"], sim["base_url"], sim["temperature"], sim["max_tokens"]) == (
        "stub-human",
        base_url,
        0.3,
        77,
    )
    for path in out.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert (out / "cache" / "simulator.sqlite").exists()
    row = records(out)[0]
    human = row["dialogue"][1]
    assert (human["role"], human["text"], human["leak"], human["leak_action"]) == (
        "human",
        "Use a list.",
        False,
        "shown",
    )
    assert row["leaks"] == 0 and row["usage"]["simulator"]["calls"] == 1


# -- the run directory and resume ---------------------------------------------------------------------------------


def test_a_fresh_run_needs_an_empty_directory(tmp_path: Path, scorer: BackendScorer) -> None:
    out = tmp_path / "run"
    run_eval(config(out, limit=1), scorer=scorer)
    with pytest.raises(ConfigError, match="is not empty: use --resume"):
        run_eval(config(out, limit=1), scorer=scorer)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty"):
        run_eval(config(other, limit=1), scorer=scorer)
    with pytest.raises(ConfigError, match="holds no colbench run"):
        run_eval(config(other, limit=1, resume=True), scorer=scorer)
    # --resume on a new directory simply starts the run
    assert run_eval(config(tmp_path / "new", limit=1, resume=True), scorer=scorer).overall.ok == 1


def test_the_run_keeps_a_snapshot_of_its_tasks(tmp_path: Path, scorer: BackendScorer) -> None:
    out = tmp_path / "run"
    run_eval(config(out, limit=3, trials=2), scorer=scorer)
    selected = load("backend-sample")[:3]
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert rows == [task.to_row() for task in selected]  # once per task, in the run's order, whatever the trials
    assert {"problem_description", "hidden_information", "ground_truth", "test_cases"} <= set(rows[0])
    assert json.loads((out / "run.json").read_text())["tasks"]["snapshot"] == "tasks.jsonl"
    snapshot = load_run(out).snapshot_tasks()
    assert snapshot is not None and [t.to_row() for t in snapshot] == rows
    assert [dataclasses.replace(t, source="") for t in snapshot] == [
        dataclasses.replace(t, source="") for t in selected
    ]  # read back identically (only where each was read from differs)

    # a resume leaves the snapshot as it is
    before = (out / "tasks.jsonl").stat().st_mtime_ns
    run_eval(config(out, limit=3, trials=2, resume=True), scorer=scorer)
    assert (out / "tasks.jsonl").stat().st_mtime_ns == before

    # a run written before snapshots resumes as it did (the key is not compared) and still has none
    older = json.loads((out / "run.json").read_text())
    del older["tasks"]["snapshot"]
    (out / "run.json").write_text(json.dumps(older))
    (out / "tasks.jsonl").unlink()
    result = run_eval(config(out, limit=3, trials=2, resume=True), scorer=scorer)
    assert result.session.finished == 0 and not (out / "tasks.jsonl").exists()
    assert load_run(out).snapshot_tasks() is None


def test_resume_refuses_a_changed_configuration_naming_the_field(tmp_path: Path, scorer: BackendScorer) -> None:
    out = tmp_path / "run"
    run_eval(config(out, limit=2), scorer=scorer)
    changes = {
        "agent": ({"agent": "scripted:ask"}, "agent.spec"),
        "turns": ({"max_turns": 5}, "max_turns"),
        "limit": ({"limit": 3}, "limit: 2 -> 3"),
        "trials": ({"trials": 2}, "trials: 1 -> 2"),
        "simulator": ({"simulator": "openai:gpt-4o", "simulator_options": {"api_key": "k"}}, "simulator.spec"),
    }
    for overrides, field in changes.values():
        with pytest.raises(ConfigError, match="cannot resume") as caught:
            run_eval(config(out, resume=True, **{"limit": 2, **overrides}), scorer=scorer)
        assert field in str(caught.value) and "\n" not in str(caught.value)
    # operational settings may change
    result = run_eval(config(out, limit=2, resume=True, concurrency=1), scorer=scorer)
    assert result.session.finished == 0 and result.overall.ok == 2 and len(records(out)) == 2


def test_two_runs_never_write_to_one_directory(tmp_path: Path, scorer: BackendScorer) -> None:
    from colbench.runs import lock_run_dir

    out = tmp_path / "run"
    run_eval(config(out, limit=1), scorer=scorer)
    with lock_run_dir(out), pytest.raises(ConfigError, match="another colbench eval is writing"):
        run_eval(config(out, limit=1, trials=1, resume=True), scorer=scorer)
    assert len(records(out)) == 1
    assert run_eval(config(out, limit=1, resume=True), scorer=scorer).exit_code == 0  # the lock went with its holder


def test_first_difference_walks_nested_fields() -> None:
    old = {"a": 1, "b": {"c": [1, 2], "d": "x"}}
    assert first_difference(old, old) is None
    assert first_difference(old, {"a": 1, "b": {"c": [1, 3], "d": "y"}}) == "b.c: [1, 2] -> [1, 3]"
    assert first_difference(old, {"a": 1, "b": {"c": [1, 2]}}) == 'b.d: "x" -> (absent)'
    assert first_difference({"t": 0}, {"t": 0.0}) is None


def test_resume_reruns_infra_errors_and_never_an_ok_episode(
    tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    out = tmp_path / "run"
    broken = {t.task_id for t in bundled_tasks[:3]}
    flaky = FlakyAgent(bundled_tasks, broken)
    first = run_eval(config(out, limit=8), agent=flaky, scorer=scorer)
    assert (first.overall.ok, first.overall.infra, first.exit_code) == (5, 3, 0)
    failed = [r for r in records(out) if r["status"] == "infra_error"]
    assert {r["task_id"] for r in failed} == broken
    for row in failed:
        assert row["reward"] is None and row["success"] is None and row["score"] is None
        assert row["error"].startswith("LLMError: model 'x'") and "\n" not in row["error"]
    healthy = FlakyAgent(bundled_tasks, set())
    second = run_eval(config(out, limit=8, resume=True), agent=healthy, scorer=scorer)
    assert {c.task_id for _, c in healthy.calls} == broken  # only the failed ones ran again
    assert (second.overall.ok, second.overall.infra, second.session.finished) == (8, 0, 3)
    rows = records(out)
    assert len(rows) == 11  # appended, never rewritten
    final = final_records(read_episode_log(out / "episodes.jsonl", get_domain("backend").metrics).records)
    assert len(final) == 8 and all(r.status == "ok" for r in final.values())
    ok_keys = [(r["task_id"], r["trial"]) for r in rows if r["status"] == "ok"]
    assert len(ok_keys) == len(set(ok_keys)) == 8


def test_resume_replays_the_simulators_replies_from_the_cache(
    tmp_path: Path, bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    class FailsAtTurn3(RecordingAgent):
        def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
            if context.turn == 3:
                raise LLMError("model 'x': gave up after 7 attempt(s)")
            return super().act(messages, context)

    out = tmp_path / "run"
    with StubOpenAIServer(default=lambda request: f"Reply to: {request['messages'][-1]['content']}") as server:
        cfg = config(
            out, limit=3, simulator="openai:human", simulator_options={"base_url": server.base_url, "api_key": "k"}
        )
        first = run_eval(cfg, agent=FailsAtTurn3(bundled_tasks, answer_at=3), scorer=scorer)
        assert first.overall.infra == 3 and server.request_count == 6  # two human replies per episode
        second = run_eval(
            dataclasses.replace(cfg, resume=True), agent=RecordingAgent(bundled_tasks, answer_at=3), scorer=scorer
        )
        assert second.overall.ok == 3 and server.request_count == 6  # the same replies, from DIR/cache
    rows = [r for r in records(out) if r["status"] == "ok"]
    assert all(r["usage"]["simulator"]["calls"] == 0 for r in rows)
    assert all(r["dialogue"][1]["text"] == "Reply to: question 1?" for r in rows)


def test_resume_cuts_a_torn_last_line(tmp_path: Path, scorer: BackendScorer) -> None:
    out = tmp_path / "run"
    run_eval(config(out, limit=3), scorer=scorer)
    path = out / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    torn = lines[2][: len(lines[2]) // 2]
    path.write_bytes(b"".join(lines[:2]) + torn)
    assert len(read_episodes(path)) == 2  # readers skip the torn line
    result = run_eval(config(out, limit=3, resume=True), scorer=scorer)
    assert result.session.finished == 1 and result.overall.ok == 3
    data = path.read_bytes()
    assert data.startswith(b"".join(lines[:2])) and data.endswith(b"\n")
    assert [json.loads(line) for line in data.splitlines()]  # every line parses
    assert len(read_episodes(path)) == 3


def test_a_bad_line_before_the_end_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    good = json.dumps({"task_id": "a", "trial": 0, "status": "ok", "reward": 1.0, "success": True})
    path.write_text(good + "\n{broken\n" + good + "\n")
    with pytest.raises(DataError, match=r"episodes\.jsonl:2"):
        read_episodes(path)
    path.write_text(good)  # no newline at the end: valid, repaired before appending
    assert len(read_episodes(path, repair=True)) == 1 and path.read_text().endswith("\n")


# -- errors and exit codes ----------------------------------------------------------------------------------------


def test_bad_configuration_fails_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for overrides, message in (
        ({"env_id": "ColBench-Nope-v0"}, "unknown env"),
        ({"agent": "nonsense"}, "bad agent spec"),
        ({"agent": "scripted:dance"}, "unknown scripted agent"),
        ({"simulator": "nonsense"}, "bad simulator spec"),
        ({"tasks": str(tmp_path / "missing.jsonl")}, "not a file and not a split"),
        ({"tasks": "frontend-sample"}, "is a frontend task"),
        ({"concurrency": 0}, "--concurrency"),
        ({"trials": 0}, "--trials"),
        ({"agent_limits": EndpointLimits(rpm=0)}, "--agent-rpm"),
    ):
        with pytest.raises(ConfigError, match=message):
            run_eval(config(out, **overrides))
        assert not (out / "run.json").exists() and not (out / "episodes.jsonl").exists()


def test_every_episode_failing_is_exit_3_with_records(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    flaky = FlakyAgent(bundled_tasks, {t.task_id for t in bundled_tasks})
    result = run_eval(config(tmp_path / "run", limit=4), agent=flaky, scorer=QuickScorer())
    assert result.exit_code == 3 and result.overall.infra == 4 and len(records(tmp_path / "run")) == 4


def test_many_infra_errors_in_a_row_stop_the_run(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    flaky = FlakyAgent(bundled_tasks, {t.task_id for t in bundled_tasks})
    result = run_eval(
        config(tmp_path / "run", concurrency=1, max_consecutive_errors=3), agent=flaky, scorer=QuickScorer()
    )
    assert result.exit_code == 3 and result.aborted and "3 infrastructure errors in a row" in result.aborted
    assert len(records(tmp_path / "run")) == 3 and result.unfinished == 17
    assert "--resume runs the rest" in result.summary_line()


def test_an_unexpected_agent_exception_is_never_a_score(tmp_path: Path) -> None:
    class Broken(RecordingAgent):
        def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
            raise ZeroDivisionError("bug in the plug-in")

    result = run_eval(config(tmp_path / "run", limit=2), agent=Broken([]), scorer=QuickScorer())
    rows = records(tmp_path / "run")
    assert [r["status"] for r in rows] == ["infra_error"] * 2 and result.exit_code == 3
    assert rows[0]["error"] == "harness error: ZeroDivisionError: bug in the plug-in"
    assert "Traceback" in (tmp_path / "run" / "eval.log").read_text()


def test_empty_agent_text_is_a_normal_turn(tmp_path: Path, scorer: BackendScorer) -> None:
    result = run_eval(config(tmp_path / "run", "scripted:empty", limit=2), scorer=scorer)
    assert result.exit_code == 0 and result.overall.ok == 2 and result.overall.success == 0
    assert all(r["status"] == "ok" and r["reward"] == 0.0 for r in records(tmp_path / "run"))


def test_empty_completion_from_an_agent_endpoint_is_the_agents_turn(tmp_path: Path, scorer: BackendScorer) -> None:
    with StubOpenAIServer() as server:
        server.enqueue(("empty",), ("empty",))
        options = {"base_url": server.base_url, "api_key": "k", "max_retries": 0}
        cfg = config(tmp_path / "run", "openai:policy", limit=1, max_turns=2, concurrency=1, agent_options=options)
        result = run_eval(cfg, scorer=scorer)
    row = records(tmp_path / "run")[0]
    assert result.exit_code == 0 and row["status"] == "ok" and row["termination"] == "turn_limit"
    assert [t["text"] for t in row["dialogue"]] == ["", "I don't know.", ""] and row["reward"] == 0.0


# -- limits, the connection pool, progress ----------------------------------------------------------------------


def test_endpoint_limits_apply_to_agent_and_simulator(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    slow = InFlight("Sure.", 0.05)
    agent = RecordingAgent(bundled_tasks, answer_at=2)
    with StubOpenAIServer(default=slow) as server:
        cfg = config(
            tmp_path / "run",
            limit=10,
            concurrency=8,
            simulator="openai:human",
            simulator_options={"base_url": server.base_url, "api_key": "k"},
            simulator_limits=EndpointLimits(max_concurrency=2),
        )
        result = run_eval(cfg, agent=agent, scorer=QuickScorer())
    assert result.overall.ok == 10 and server.request_count == 10 and slow.most <= 2


def test_concurrency_is_not_capped_by_the_connection_pool(
    tmp_path: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """128 episodes at once through the real openai client: 128 requests are in flight together at the server."""
    import openai_stub

    monkeypatch.setattr(openai_stub._Server, "request_queue_size", 256)  # the stub's listen backlog (default 5)
    lock, in_flight, most = threading.Lock(), [0], [0]
    tasks_by_prompt = {t.problem_description: t for t in bundled_tasks}

    arrived = threading.Condition(lock)

    def answer(request: dict[str, Any]) -> str:
        # Hold each request until 128 are in flight together (or 20 s pass): a pool that caps concurrency below 128
        # shows as a lower maximum, however slowly a loaded machine sends the requests.
        with arrived:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            arrived.notify_all()
            arrived.wait_for(lambda: most[0] >= 128, timeout=20.0)
            in_flight[0] -= 1
        prompt = request["messages"][0]["content"]
        task = next(t for d, t in tasks_by_prompt.items() if d in prompt)
        return "I WANT TO ANSWER:\n" + task.ground_truth

    with StubOpenAIServer(default=answer) as server:
        options = {"base_url": server.base_url, "api_key": "k"}
        cfg = config(tmp_path / "run", "openai:policy", trials=7, concurrency=128, agent_options=options)
        result = run_eval(cfg, scorer=QuickScorer())
    assert result.overall.ok == 140 and result.overall.success == 140
    assert most[0] == 128, most[0]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_and_in_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the fake terminal's width
    for stream in (FakeTTY(), io.StringIO()):
        progress = Progress(
            total=4, kept=Tally(ok=1, success=1, reward_sum=1.0), domain=get_domain("backend"), stream=stream
        )
        progress.episode_started()
        scored = {"status": "ok", "reward": 0.5, "success": False, "usage": {"agent": {"prompt_tokens": 1500}}}
        progress.episode_finished(EpisodeRecord.model_validate({"task_id": "t", "trial": 0, **scored}))
        progress.episode_started()
        lost = {"task_id": "t", "trial": 1, "status": "infra_error", "reward": None, "usage": {}}
        progress.episode_finished(EpisodeRecord.model_validate(lost))
        progress.draw()
        progress.close()
        text = stream.getvalue()
        assert "success 1/2 (50.0%)" in text and "infra errors 1" in text and "tokens 1.5k" in text
        assert "cost $0.00" not in text and "ETA" in text  # no price for the agent (unnamed): "cost n/a"
        if isinstance(stream, FakeTTY):  # a live bar: redrawn in place, the count and ETA its own columns
            assert "3/4" in text and "\x1b[" in text and "━" in text and "cost n/a" in text
        else:  # a log: whole lines, nothing redrawn: a line per tenth (2/4, 3/4), draw()'s, close()'s
            assert text.count("\n") == 4 and "\r" not in text and "\x1b" not in text
            assert "3/4 done" in text and "cost n/a" in text
    quiet = io.StringIO()
    Progress(total=1, kept=Tally(), domain=get_domain("frontend"), stream=quiet, mode="off").close()
    assert quiet.getvalue() == ""


# -- the command line ----------------------------------------------------------------------------------------------


def colbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_cli_eval_summary_and_exit_codes(tmp_path: Path) -> None:
    if not Path("/usr/bin/bwrap").exists():
        pytest.skip("bubblewrap is not installed")
    out = tmp_path / "run"
    base = ["eval", "--env", BACKEND, "--agent", "scripted:reference", "--simulator", "scripted"]
    base += ["--tasks", "backend-sample", "--limit", "3", "--sandbox", "bwrap", "--out", str(out)]
    res = colbench(*base)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1 and "3/3 episodes scored, success 3/3 (100.0%)" in res.stdout
    assert "3/3 done" in res.stderr  # the progress line (a log: plain lines)
    res = colbench(*base)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--resume" in res.stderr
    res = colbench(*base, "--resume", "--quiet")
    assert res.returncode == 0 and res.stderr == "" and "this session 0 episodes" in res.stdout
    res = colbench(*base, "--resume", "--agent-extra-body", "[1]")
    assert res.returncode == 2 and "must be a JSON object" in res.stderr
    res = colbench(*base[:-1], str(tmp_path / "new"), "--agent-api-key-env", "COLBENCH_TEST_NO_SUCH_VAR")
    assert res.returncode == 2 and "COLBENCH_TEST_NO_SUCH_VAR" in res.stderr


def test_cli_eval_all_infra_errors_exit_3(tmp_path: Path) -> None:
    with StubOpenAIServer() as server:
        server.script([("status", 503)] * 10)
        res = colbench(
            "eval", "--env", BACKEND, "--agent", "openai:policy", "--simulator", "scripted",
            "--tasks", "backend-sample", "--limit", "2", "--out", str(tmp_path / "run"),
            "--agent-base-url", server.base_url, "--agent-max-retries", "0", "--concurrency", "1",
        )  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert "infra errors 2" in res.stdout and "--resume runs the rest" in res.stdout
    rows = records(tmp_path / "run")
    assert [r["status"] for r in rows] == ["infra_error"] * 2
    assert all(r["error"].startswith("LLMError: ") and "503" in r["error"] for r in rows)


# -- frontend -------------------------------------------------------------------------------------------------------


def _assert_same_page(reference: Path, answer: Path) -> None:
    """The same page rendered twice: same size, pixels equal but for rasterisation noise (one full-suite CI run saw
    the two PNGs differ in bytes while the pages scored similarity 1.0; never reproduced alone or under load)."""
    from colbench.domains.frontend.embed import decode_png

    a, b = decode_png(reference.read_bytes()), decode_png(answer.read_bytes())
    assert a.shape == b.shape, (a.shape, b.shape)
    differing = float(np.any(a != b, axis=-1).mean())
    mean_abs = float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())
    assert differing < 0.01 and mean_abs < 1.0, f"{differing:.2%} of pixels differ, mean |diff| {mean_abs:.2f}"


@pytest.mark.browser
def test_frontend_eval_scores_similarity_and_keeps_the_final_pages(tmp_path: Path) -> None:
    with frontend_scorer_or_skip(embedder="test") as scorer:
        out = tmp_path / "run"
        common = {"env_id": "ColBench-Frontend-v0", "tasks": "frontend-sample", "limit": 2, "embedder": "test"}
        result = run_eval(config(out, **common), scorer=scorer)
        asked = run_eval(config(tmp_path / "ask", "scripted:ask", max_turns=2, **common), scorer=scorer)
        assert asked.overall.ok == 2 and asked.overall.reward_sum == 0.0
    assert result.exit_code == 0 and result.overall.ok == 2 and "mean similarity 1.000" in result.summary_line()
    scoring = RunConfig.read(out).scoring
    assert scoring is not None and scoring["embedder"].startswith("test-")
    for row in records(out):
        assert row["reward"] == 1.0 and row["success"] is None and row["score"]["similarity"] == 1.0
        assert row["answer_html"].lstrip().startswith("<html") and row["screenshot"].startswith("screens/")
        assert (out / row["screenshot"]).read_bytes().startswith(b"\x89PNG")
        # the reference page beside it, for the report: the reference agent's page is the reference itself
        assert row["reference_screenshot"] == f"screens/reference/{row['task_id']}.png"
        _assert_same_page(out / row["reference_screenshot"], out / row["screenshot"])
    assert len(list((out / "screens" / "reference").iterdir())) == 2
    for row in records(tmp_path / "ask"):  # no page ever: the documented floor, and no screenshot
        assert row["status"] == "ok" and row["termination"] == "turn_limit" and row["reward"] == 0.0
        assert row["screenshot"] is None


def test_an_eval_parses_each_model_spec_once(
    tmp_path: Path, scorer: BackendScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan is resolved once (one parse per model role); the driver, the player, the forecast, the progress
    line's prices and run.json all read the resolved specs."""
    from colbench.llm import specs

    parsed: list[str] = []
    real = specs._parse

    def counting(spec: str) -> specs.Spec | None:
        parsed.append(spec)
        return real(spec)

    monkeypatch.setattr(specs, "_parse", counting)
    with StubOpenAIServer(default=lambda request: "Use a list.") as server:
        human = {"base_url": server.base_url, "api_key": "k"}
        plan = config(
            tmp_path / "run", "scripted:ask", limit=2, max_turns=2, simulator="openai:human", simulator_options=human
        )
        assert parsed == ["scripted:ask", "openai:human"]
        result = run_eval(plan, scorer=scorer)
    assert result.overall.ok == 2 and parsed == ["scripted:ask", "openai:human"]
    # a player built from the plan elsewhere (what each Ray actor does) parses nothing either
    from colbench.eval.player import EpisodePlayer

    player = EpisodePlayer.from_config(plan, get_domain("backend"), load("backend-sample")[:2], scorer=scorer)
    asyncio.run(player.aclose())
    assert parsed == ["scripted:ask", "openai:human"]
