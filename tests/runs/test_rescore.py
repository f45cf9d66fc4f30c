"""``colbench rescore``: a run's final answers scored again under another env id, into a new run directory that
report, show and compare read; the original never touched; infrastructure errors never scored."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from chromium import frontend_scorer_or_skip
from plans import scripted_plan
from plus_tasks import OVERFIT, TRAVEL, travel, with_plus, write_tasks

from colbench import rescore, rescore_answers
from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.domains.frontend.visual_metrics import SUBSCORES
from colbench.errors import ConfigError, DataError, LLMError
from colbench.eval import RunPlan, run_eval
from colbench.llm.specs import ModelSpec
from colbench.render import PageBlock
from colbench.runs import load_run
from colbench.tasks import Task, load
from colbench.types.chat import Message, Usage

V1, V2 = "ColBench-Backend-v1", "ColBench-Backend-v2"
BWRAP = {"sandbox": "bwrap"}


class OverfitAgent:
    """Answers at once: ``OVERFIT`` on the travel task, the reference elsewhere; the endpoint fails on ``broken``."""

    name = "overfit"

    def __init__(self, tasks: Sequence[Task], broken: str) -> None:
        self.tasks = {t.task_id: t for t in tasks}
        self.broken = broken

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if context.task_id == self.broken:
            raise LLMError("model 'x' at http://h/v1: gave up after 7 attempt(s); last error: APIConnectionError")
        task = self.tasks[context.task_id]
        right = "I WANT TO ANSWER:\n" + task.ground_truth
        return AgentReply(OVERFIT if TRAVEL in task.ground_truth else right, Usage(9, 4, 1))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled_tasks: list[Task]) -> dict[str, Path]:
    """A v1 run of three tasks (one answered by ``OVERFIT``, one lost to the endpoint), its tasks, and the same
    tasks with plus tests."""
    root = tmp_path_factory.mktemp("rescore")
    tasks = [replace(t, plus=None) for t in bundled_tasks[:3]]  # plain: without the plus tests the sample ships
    assert travel(bundled_tasks) in tasks
    plain = write_tasks(root / "tasks.jsonl", tasks)
    plus = write_tasks(root / "plus.jsonl", [with_plus(t) for t in tasks])
    plan = RunPlan.resolve(
        env_id=V1,
        agent=ModelSpec.named("overfit"),
        simulator="scripted",
        out=root / "v1",
        tasks=str(plain),
        sandbox="bwrap",
        progress="off",
        max_consecutive_errors=0,
    )
    result = run_eval(plan, agent=OverfitAgent(tasks, broken=tasks[1].task_id))
    assert (result.overall.ok, result.overall.infra) == (2, 1)
    return {"root": root, "v1": root / "v1", "plain": plain, "plus": plus}


def tree(path: Path) -> dict[str, str]:
    """Every file under ``path`` and the hash of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def lines(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]


def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=300)


# -- rescoring --------------------------------------------------------------------------------------------------------
def test_v1_to_v2_and_back_keeps_the_old_scores_and_never_touches_the_source(
    made: dict[str, Path], bundled_tasks: list[Task], tmp_path: Path
) -> None:
    source = made["v1"]
    before = tree(source)
    result = rescore(source, V2, tmp_path / "v2", tasks=str(made["plus"]), options=BWRAP)
    assert (result.changed, result.kept_infra, result.unjudged, result.exit_code) == (1, 1, 0, 0)
    assert result.summary_line() == (
        f"rescored 2 episodes of {source} from {V1} to {V2}: success 2/2 (100.0%), mean reward 1.000 -> "
        f"success 1/2 (50.0%), mean reward 0.923; 1 rewards changed; infrastructure errors kept 1 -> {tmp_path / 'v2'}"
    )
    old, new = lines(source), lines(tmp_path / "v2")
    assert [(r["task_id"], r["status"]) for r in new] == [(r["task_id"], r["status"]) for r in old]
    by_task = {r["task_id"]: r for r in new}
    trip = by_task[travel(bundled_tasks).task_id]
    assert (trip["reward"], trip["success"]) == (pytest.approx(11 / 13), False)
    assert trip["score"]["tests_total"] == 13 and trip["score"]["env_id"] == V2  # type: ignore[index]
    old_trip = next(r for r in old if r["task_id"] == trip["task_id"])
    assert trip["rescored_from"] == {"env_id": V1, "reward": 1.0, "success": True, "score": old_trip["score"]}
    assert {k: v for k, v in trip.items() if k not in ("reward", "success", "score", "rescored_from")} == {
        k: v for k, v in old_trip.items() if k not in ("reward", "success", "score")
    }  # dialogue, answer, usage, timings: the episode as it was played
    infra = [r for r in new if r["status"] == "infra_error"]
    assert infra == [r for r in old if r["status"] == "infra_error"] and "rescored_from" not in infra[0]

    config = json.loads((tmp_path / "v2" / "run.json").read_text())
    original = json.loads((source / "run.json").read_text())
    assert config["env_id"] == V2 and config["scoring"]["env_id"] == V2 and config["scoring"]["augmenter"] == ["hand/1"]
    assert config["rescored_from"] == {
        "run": str(source.resolve()),
        "config_sha256": original["config_sha256"],
        "env_id": V1,
        "scoring": original["scoring"],
        "rules": {"rules": 3, "plus_tests": True},
    }
    assert config["config_sha256"] != original["config_sha256"]
    # the task snapshot travels with the answers: the tasks the run was played on, not those rescored against
    assert (tmp_path / "v2" / "tasks.jsonl").read_bytes() == (source / "tasks.jsonl").read_bytes()
    assert config["tasks"]["snapshot"] == "tasks.jsonl"
    assert {k: config[k] for k in ("agent", "simulator", "tasks", "leaks")} == {
        k: original[k] for k in ("agent", "simulator", "tasks", "leaks")
    }

    back = rescore(tmp_path / "v2", V1, tmp_path / "v1-again", options=BWRAP)  # the run's own tasks: no plus tests
    assert (back.changed, back.kept_infra) == (1, 1)
    again = lines(tmp_path / "v1-again")
    assert [(r["reward"], r["success"]) for r in again] == [(r["reward"], r["success"]) for r in old]
    assert {r["rescored_from"]["env_id"] for r in again if r["status"] == "ok"} == {V2}  # type: ignore[index]
    assert tree(source) == before  # read only: not a byte, not a file more (no lock, no report)
    assert load_run(tmp_path / "v1-again").env_id == V1


def test_report_show_and_compare_read_a_rescored_run(
    made: dict[str, Path], bundled_tasks: list[Task], tmp_path: Path
) -> None:
    v1, v2, again = made["v1"], tmp_path / "v2", tmp_path / "again"
    done = colbench(
        "rescore", str(v1), "--env", V2, "--out", str(v2), "--tasks", str(made["plus"]), "--sandbox", "bwrap"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"rescored 2 episodes of {v1} from {V1} to {V2}")
    assert colbench("rescore", str(v2), "--env", V1, "--out", str(again), "--sandbox", "bwrap").returncode == 0

    report = colbench("report", str(v1), str(v2), str(again))
    assert report.returncode == 0, report.stderr
    assert (
        f"Backend leaderboard: {V1} (2 runs)" in report.stdout and f"Backend leaderboard: {V2} (1 run)" in report.stdout
    )
    assert "not comparable across versions" in report.stdout

    trip = travel(bundled_tasks).task_id
    show = colbench("show", str(v2), "--task", trip)
    assert show.returncode == 0, show.stderr
    assert f"rescored from the {V1} run {v1.resolve()} (no model was called)" in show.stdout
    assert show.stdout.endswith(
        "SCORE: reward 0.846, tests passed 11/13, no success\n"
        f"BEFORE RESCORING ({V1}): reward 1.000, tests passed 10/10, success\n"
    )

    compare = colbench("compare", str(v1), str(v2))
    assert compare.returncode == 0, compare.stderr
    assert f"v2 ({V2}) vs v1 ({V1}): not comparable across versions" in compare.stdout
    assert "per-task changes: 1 of 2 tasks changed" in compare.stdout
    change = next(line for line in compare.stdout.splitlines() if line.startswith(trip))
    assert change.split() == [trip, "1.000", "0.846", "-0.154"]
    same = colbench("compare", str(v1), str(again))
    assert "not comparable" not in same.stdout and "+0.000" in same.stdout


def test_what_cannot_be_rescored_is_a_one_line_error(
    made: dict[str, Path], bundled_tasks: list[Task], tmp_path: Path
) -> None:
    source = made["v1"]
    before = tree(source)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    cases: list[tuple[Path | str, str, Path, type[Exception], str]] = [
        (source, V2, source, ConfigError, "is the run being rescored: it is never overwritten"),
        (source, V2, source / "inside", ConfigError, "is inside the run being rescored"),
        (source, V2, tmp_path / "full", ConfigError, "exists and is not an empty directory"),
        (source, "ColBench-Frontend-v0", tmp_path / "f", ConfigError, "--env ColBench-Frontend-v0: a frontend env"),
        (source, "ColBench-Backend-v9", tmp_path / "u", ConfigError, "--env ColBench-Backend-v9: unknown env id"),
        (tmp_path / "nowhere", V1, tmp_path / "n", DataError, "no such run directory"),
    ]
    for run, env_id, out, error, message in cases:
        with pytest.raises(error) as caught:
            rescore(run, env_id, out, options=BWRAP)
        assert message in str(caught.value) and "\n" not in str(caught.value), (env_id, out)
        assert not out.exists() or out == source or out == tmp_path / "full"

    broken = tmp_path / "broken"
    shutil.copytree(source, broken)
    records = lines(broken)
    trip = travel(bundled_tasks).task_id
    at = next(i for i, r in enumerate(records) if r["task_id"] == trip)
    del records[at]["answer"]
    (broken / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DataError) as caught:
        rescore(broken, V1, tmp_path / "b", options=BWRAP)
    assert str(caught.value) == (
        f"{broken}: episode task {trip} trial 0 ({broken}/episodes.jsonl:{at + 1}): a scored episode without its "
        "final answer cannot be rescored"
    )
    (broken / "episodes.jsonl").write_text('{"task_id": "t", "trial": 0, "status": "ok", "reward": 7}\n')
    with pytest.raises(DataError, match=r"episodes\.jsonl:1: field 'reward'"):
        rescore(broken, V1, tmp_path / "b", options=BWRAP)
    assert tree(source) == before

    done = colbench("rescore", str(source), "--env", "ColBench-Frontend-v0", "--out", str(tmp_path / "cli"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"colbench: error: cannot rescore {source} (a backend run of {V1}): --env ")


def test_answers_in_memory_are_rescored_by_id(bundled_tasks: list[Task]) -> None:
    task = with_plus(travel(bundled_tasks))
    v1, v2 = (rescore_answers(env_id, [(task, OVERFIT)], options=BWRAP)[0] for env_id in (V1, V2))
    assert (v1.reward, v1.success, v1.result_row(task.task_id)["env_id"]) == (1.0, True, V1)
    assert (v2.reward, v2.success, v2.result_row(task.task_id)["env_id"]) == (pytest.approx(11 / 13), False, V2)
    page = load("frontend-sample")[0]
    with pytest.raises(ConfigError, match=f"task {page.task_id} is a frontend task; {V2} scores backend answers"):
        rescore_answers(V2, [(page, "<html></html>")])
    with pytest.raises(ConfigError, match="env id ColBench-Human-v0: not a version of backend scoring"):
        rescore_answers("ColBench-Human-v0", [(task, OVERFIT)])


@pytest.mark.browser
def test_a_frontend_run_is_rescored_from_its_pages(tmp_path: Path) -> None:
    with frontend_scorer_or_skip(embedder="test") as scorer:
        plan = scripted_plan(
            tmp_path / "run", env_id="ColBench-Frontend-v0", tasks="frontend-sample", limit=2, embedder="test"
        )
        assert run_eval(plan, scorer=scorer).overall.ok == 2
    result = rescore(tmp_path / "run", "ColBench-Frontend-v0", tmp_path / "again", options={"embedder": "test"})
    assert (result.changed, result.after[0]) == (0, 2)
    again = lines(tmp_path / "again")
    assert [r["reward"] for r in again] == [r["reward"] for r in lines(tmp_path / "run")]
    assert all((tmp_path / "again" / str(r["screenshot"])).is_file() for r in again)  # screens/ came along
    # v0 -> v1 (Design2Code's metrics) from the stored pages, without a model: the blocks a viewer draws are kept
    result = rescore(tmp_path / "run", "ColBench-Frontend-v1", tmp_path / "v1", options={"embedder": "test"})
    assert result.after[0] == 2
    v1 = lines(tmp_path / "v1")
    assert all(r["reward"] == pytest.approx(1.0) and r["success"] is True for r in v1)  # the reference pages
    assert all(set(r["score"]["subscores"]) == set(SUBSCORES) for r in v1)
    assert all(
        r["score"]["env_id"] == "ColBench-Frontend-v1" and r["score"]["embedder"].startswith("test-") for r in v1
    )
    assert all(r["rescored_from"]["env_id"] == "ColBench-Frontend-v0" for r in v1)
    for record in v1:
        blocks = record["score"]["blocks"]
        reference = [PageBlock.from_record(b) for b in blocks["reference"]]
        assert reference and len(blocks["matches"]) == len(blocks["answer"]) == len(reference)
    run = load_run(tmp_path / "v1")  # read under v1's own rules: a bool success, rewards in [0, 1]
    assert run.env_id == "ColBench-Frontend-v1" and run.config.scoring["embedder"].startswith("test-")


@pytest.mark.browser
def test_a_v1_eval_records_the_reward_its_parts_and_the_embedder(tmp_path: Path) -> None:
    plan = scripted_plan(
        tmp_path / "run", env_id="ColBench-Frontend-v1", tasks="frontend-sample", limit=1, embedder="test"
    )
    assert run_eval(plan).overall.ok == 1
    (record,) = lines(tmp_path / "run")
    assert record["reward"] == pytest.approx(1.0) and record["success"] is True
    assert record["score"]["subscores"] == dict.fromkeys(SUBSCORES, 1.0)
    scoring = json.loads((tmp_path / "run" / "run.json").read_text())["scoring"]
    assert scoring["env_id"] == "ColBench-Frontend-v1" and scoring["embedder"] == record["score"]["embedder"]
    # the page the human saw at each agent turn, beside the record that names it
    turns = [turn for turn in record["dialogue"] if turn["role"] == "agent"]
    assert [turn["screenshot"] for turn in turns] == [f"screens/turns/{record['task_id']}.0.1.png"]
    seen = (tmp_path / "run" / turns[0]["screenshot"]).read_bytes()
    assert seen.startswith(b"\x89PNG") and seen == (tmp_path / "run" / record["screenshot"]).read_bytes()
