"""Env ids as versions of the scoring: ``ColBench-Backend-v2`` judges the plus tests after v1's, v0 and v1 judge as
they did, and every score, result row, scorer description and env info names the id that produced it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest
from plans import scripted_plan
from plus_tasks import OVERFIT, TRAVEL_PLUS, travel, with_plus, write_tasks

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend import DOMAIN as BACKEND
from colbench.domains.backend.env import BackendEnv
from colbench.domains.backend.plus.augment import AUGMENTER_VERSION
from colbench.domains.backend.plus_digest import augmenters, plus_digest
from colbench.domains.backend.scorer import BackendScore, BackendScorer, ReferenceCache
from colbench.env.versions import env_id_for, newest_env, scoring_env, scoring_envs, scoring_options
from colbench.errors import ConfigError, InfraError
from colbench.eval import RunPlan, run_eval
from colbench.humans.simulator import ScriptedSimulator
from colbench.sandbox import taskenv
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.tasks import Task
from colbench.types.task import PlusTests

V0, V1, V2 = "ColBench-Backend-v0", "ColBench-Backend-v1", "ColBench-Backend-v2"


def reference_answer(task: Task) -> str:
    return "I WANT TO ANSWER:\n" + task.ground_truth


# -- what each id judges ------------------------------------------------------------------------------------------
def test_the_ids_and_their_scoring_options_come_from_the_env_specs() -> None:
    assert [d.id for d in scoring_envs("backend")] == [V0, V1, V2]  # ColBench-Human-v0 scores no answer of its own
    assert newest_env("backend") == V2 and newest_env("frontend") == "ColBench-Frontend-v1"
    assert scoring_options(V0) == {"rules": 2, "plus_tests": False}
    assert scoring_options(V1) == {"rules": 3, "plus_tests": False}
    assert (
        scoring_options(V2)
        == {"rules": 3, "plus_tests": True}
        == {k: gym.spec(V2).kwargs[k] for k in ("rules", "plus_tests")}
    )
    assert scoring_options("ColBench-Frontend-v0") == {"reward": "clip"}
    assert scoring_options("ColBench-Frontend-v1") == {"reward": "visual"}
    assert env_id_for("frontend", {"reward": "visual"}) == "ColBench-Frontend-v1"
    assert [env_id_for("backend", {"rules": r, "plus_tests": p}) for r, p in [(2, False), (3, False), (3, True)]] == [
        V0,
        V1,
        V2,
    ]
    with pytest.raises(ConfigError, match=r"no env id scores so; the ids are ColBench-Backend-v0 \{'rules': 2"):
        env_id_for("backend", {"rules": 2, "plus_tests": True})


def test_an_id_of_another_domain_or_none_is_a_one_line_error_listing_the_valid_ones() -> None:
    valid = "backend answers are scored by ColBench-Backend-v0, ColBench-Backend-v1, ColBench-Backend-v2"
    assert scoring_env("backend", None) == V2 and scoring_env("backend", V0) == V0
    for env_id, why in [
        ("ColBench-Frontend-v0", "a frontend env"),
        ("ColBench-Human-v0", "not a version of backend scoring"),
        ("ColBench-Backend-v9", "unknown env id"),
    ]:
        with pytest.raises(ConfigError) as caught:
            scoring_env("backend", env_id)
        assert str(caught.value) == f"--env {env_id}: {why}; {valid}"


def test_v2_fails_a_wrong_answer_that_passes_every_v1_test(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    task = with_plus(travel(bundled_tasks))
    scores = {
        env_id: BackendScorer(bwrap_sandbox, rules=r, plus=p).score(task, OVERFIT)
        for env_id, (r, p) in [(V0, (2, False)), (V1, (3, False)), (V2, (3, True))]
    }
    assert [(s.tests_passed, s.tests_total, s.success) for s in scores.values()] == [
        (10, 10, True),
        (10, 10, True),
        (11, 13, False),
    ]
    v2 = scores[V2]
    assert [t.name for t in v2.tests] == [name for name, _ in task.test_cases] + ["plus1", "plus2", "plus3"]
    assert [t.name for t in v2.tests if not t.passed] == ["plus1", "plus2"]
    assert "expected 'You have traveled to Peru, Chile, Bolivia and Ecuador'" in v2.tests[10].detail
    assert {env_id: s.env_id for env_id, s in scores.items()} == {V0: V0, V1: V1, V2: V2}
    assert v2.result_row()["env_id"] == V2 and v2.details()["env_id"] == V2
    right = BackendScorer(bwrap_sandbox, rules=3, plus=True).score(task, reference_answer(task))
    assert (right.tests_passed, right.tests_total, right.success) == (13, 13, True)


def test_the_plus_tests_are_planned_by_the_same_rules(bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]) -> None:
    """A plus test written as ``print(call) == literal`` is judged on the call, as a v1 test would be."""
    task = travel(bundled_tasks)
    task = replace(task, plus=PlusTests((("plus1", f"print({TRAVEL_PLUS[0][1]}) == 'x'"),), "hand/1"))
    score = BackendScorer(bwrap_sandbox, rules=3, plus=True).score(task, OVERFIT)
    assert (score.tests_passed, score.tests_total) == (10, 11)
    assert score.tests[-1].judged == TRAVEL_PLUS[0][1]


def test_without_plus_tests_or_a_source_v2_says_how_to_get_them(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    task = travel(bundled_tasks)
    with pytest.raises(ConfigError) as caught:
        BackendScorer(bwrap_sandbox, plus=True).score(task, OVERFIT)
    message = str(caught.value)
    assert message.startswith(f"task {task.task_id} ({task.source}) has no plus tests, which {V2} judges")
    assert "colbench tasks augment" in message and "\n" not in message
    clash = replace(task, plus=PlusTests((("test1", "summarize_travel_experiences([])"),), "hand/1"))
    with pytest.raises(Exception, match="plus test 'test1' has the name of one of its test_cases"):
        BackendScorer(bwrap_sandbox, plus=True).score(clash, OVERFIT)


def test_plus_tests_from_the_source_are_made_once_per_task_id_and_content(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    made: list[str] = []

    def source(task: Task) -> PlusTests:
        made.append(task.task_id)
        plus = with_plus(task).plus
        assert plus is not None
        return plus

    scorer = BackendScorer(bwrap_sandbox, plus=True, plus_source=source)
    task = travel(bundled_tasks)
    assert scorer.score(task, OVERFIT).tests_total == 13
    assert scorer.score(replace(task), OVERFIT).tests_total == 13  # an equal task object
    assert made == [task.task_id]
    edited = replace(task, problem_description=task.problem_description + " (edited)")
    assert scorer.score(edited, OVERFIT).tests_total == 13
    assert made == [task.task_id, task.task_id]  # same id, other content: made again
    assert scorer.plus_tests(with_plus(task, "own/2")).augmenter == "own/2"  # a task's own are used as they are


def test_the_reference_cache_keeps_versions_and_plus_tests_apart(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    cache = ReferenceCache()
    task = with_plus(travel(bundled_tasks))
    v1, v2 = (BackendScorer(bwrap_sandbox, cache=cache, plus=plus) for plus in (False, True))
    assert v1.score(task, OVERFIT).tests_total == 10
    assert v2.score(task, OVERFIT).tests_total == 13
    fewer = replace(task, plus=PlusTests(TRAVEL_PLUS[2:], "hand/1"))
    assert (v2.score(fewer, OVERFIT).tests_passed, v2.score(fewer, OVERFIT).tests_total) == (11, 11)
    assert v1.score(task, OVERFIT).tests_total == 10


def test_describe_names_the_id_and_the_plus_tests_a_run_judges(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    tasks = [with_plus(t) for t in bundled_tasks[:3]]
    v1, v2 = BackendScorer(bwrap_sandbox), BackendScorer(bwrap_sandbox, plus=True)
    digest = bwrap_sandbox.environment.digest  # the task environment the code ran in: compared like the rules
    assert v1.describe() == {"sandbox": "bwrap", "scorer_version": "3", "env_id": V1, "taskenv": digest}
    assert BACKEND.describe_scoring(v1, tasks) == v1.describe()
    described = BACKEND.describe_scoring(v2, tasks)
    assert described == {**v2.describe(), "augmenter": ["hand/1"], "plus_digest": plus_digest(tasks)}
    assert described["env_id"] == V2
    cases = sorted((t.task_id, [list(c) for c in t.plus.cases]) for t in tasks if t.plus is not None)
    expected = hashlib.sha256(json.dumps(cases, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert plus_digest(tasks) == expected == plus_digest(list(reversed(tasks)))
    assert plus_digest([with_plus(tasks[0], "hand/2"), *tasks[1:]]) == expected  # the version is not the tests
    assert augmenters([with_plus(tasks[0], "hand/2"), *tasks[1:]]) == ["hand/1", "hand/2"]
    other = [replace(tasks[0], plus=PlusTests(TRAVEL_PLUS[:1], "hand/1")), *tasks[1:]]
    assert plus_digest(other) != expected


# -- envs -------------------------------------------------------------------------------------------------------------
def test_the_env_info_names_its_id_and_v2_scores_the_plus_tests(
    bwrap_sandbox: BwrapSandbox, bundled_tasks: list[Task]
) -> None:
    task = with_plus(travel(bundled_tasks))
    scorer = BackendScorer(bwrap_sandbox, plus=True)
    env = gym.make(V2, tasks=[task], simulator=ScriptedSimulator(["Sure."]), scorer=scorer).unwrapped
    _, info = env.reset(options={"task_id": task.task_id})
    assert info["env_id"] == V2
    _, reward, terminated, _, info = env.step(OVERFIT)
    assert terminated and reward == pytest.approx(11 / 13) and info["success"] is False
    assert info["env_id"] == V2 and info["score"]["env_id"] == V2 and info["tests_total"] == 13
    assert gym.make(V1, tasks=[task], rules=2).unwrapped.env_id == V0  # the options say which rules, not the name
    with pytest.raises(ConfigError, match="no env id scores so"):
        BackendEnv([task], rules=2, plus_tests=True)


def test_the_shared_scorer_is_one_per_sandbox_rules_and_plus() -> None:
    v1 = BACKEND.shared_scorer({"sandbox": "bwrap", **scoring_options(V1)})
    v2 = BACKEND.shared_scorer({"sandbox": "bwrap", **scoring_options(V2)})
    assert v1 is BACKEND.shared_scorer({"sandbox": "bwrap"}) and v2 is not v1
    assert isinstance(v2, BackendScorer) and (v2.rules, v2.plus, v2.env_id) == (3, True, V2)


# -- eval -------------------------------------------------------------------------------------------------------------
def plan(tmp_path: Path, env_id: str, tasks: Path, out: str = "run") -> RunPlan:
    return scripted_plan(tmp_path / out, env_id=env_id, tasks=str(tasks), sandbox="bwrap")


def test_an_eval_scores_by_its_ids_rules_and_run_json_names_the_plus_tests(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    tasks = [with_plus(bundled_tasks[0]), with_plus(travel(bundled_tasks))]
    path = write_tasks(tmp_path / "plus.jsonl", tasks)
    result = run_eval(plan(tmp_path, V2, path))
    assert result.exit_code == 0 and result.overall.success == 2
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["env_id"] == V2
    assert run["scoring"] == {
        "sandbox": "bwrap",
        "scorer_version": "3",
        "env_id": V2,
        "taskenv": taskenv.installed().digest,
        "augmenter": ["hand/1"],
        "plus_digest": plus_digest(tasks),
    }
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["score"]["tests_total"] for r in records) == [11, 13]
    v0 = run_eval(plan(tmp_path, V0, write_tasks(tmp_path / "plain.jsonl", bundled_tasks[:1]), out="v0"))
    assert v0.exit_code == 0  # an eval of v0 is scored by v0's rules (it once got the current ones)
    assert json.loads((tmp_path / "v0" / "run.json").read_text())["scoring"]["scorer_version"] == "2"


def test_a_resume_with_other_plus_tests_is_refused(
    tmp_path: Path, bundled_tasks: list[Task], bwrap_sandbox: BwrapSandbox
) -> None:
    """Plus tests computed on first use leave the task file (and its hash) as it is: ``plus_digest`` tells them apart."""
    path = write_tasks(tmp_path / "plain.jsonl", [travel(bundled_tasks)])

    def scorer(cases: tuple[tuple[str, str], ...]) -> BackendScorer:
        return BackendScorer(bwrap_sandbox, plus=True, plus_source=lambda task: PlusTests(cases, "hand/1"))

    assert run_eval(plan(tmp_path, V2, path), scorer=scorer(TRAVEL_PLUS)).overall.ok == 1
    assert run_eval(replace(plan(tmp_path, V2, path), resume=True), scorer=scorer(TRAVEL_PLUS)).exit_code == 0
    with pytest.raises(ConfigError, match=r"differs from its run\.json at scoring\.plus_digest"):
        run_eval(replace(plan(tmp_path, V2, path), resume=True), scorer=scorer(TRAVEL_PLUS[:1]))


def test_a_run_scored_in_another_task_environment_is_not_resumed_here_but_rescored(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """A run made where another task environment is built (say numpy 2): its scores are facts about that one, so a
    resume here is refused in one line naming both, and ``rescore`` scores its answers again under this one."""
    from colbench import rescore

    path = write_tasks(tmp_path / "plain.jsonl", bundled_tasks[:1])
    assert run_eval(plan(tmp_path, V1, path)).overall.ok == 1
    run_json = tmp_path / "run" / "run.json"
    made = json.loads(run_json.read_text())
    here = made["scoring"]["taskenv"]
    assert here == taskenv.installed().digest
    made["scoring"]["taskenv"] = "0123456789abcdef"
    run_json.write_text(json.dumps(made))
    with pytest.raises(ConfigError) as refused:
        run_eval(replace(plan(tmp_path, V1, path), resume=True))
    message = str(refused.value)
    assert "\n" not in message and "scored in task environment 0123456789abcdef" in message
    assert f"this machine's sandbox runs {here}" in message and "colbench rescore" in message
    rescore(tmp_path / "run", V1, tmp_path / "here", options={"sandbox": "bwrap"})
    again = json.loads((tmp_path / "here" / "run.json").read_text())
    assert again["scoring"]["taskenv"] == here
    assert again["rescored_from"]["scoring"]["taskenv"] == "0123456789abcdef"


def test_an_eval_of_v2_on_tasks_without_plus_tests_computes_them_before_any_episode(
    tmp_path: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLBENCH_HOME", str(tmp_path / "home"))
    path = write_tasks(tmp_path / "plain.jsonl", [replace(t, plus=None) for t in bundled_tasks[:2]])
    run_eval(plan(tmp_path, V2, path))
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["scoring"]["env_id"] == V2 and run["scoring"]["augmenter"] == [AUGMENTER_VERSION]
    assert run["scoring"]["plus_digest"]
    kept = list((tmp_path / "home" / "plus" / AUGMENTER_VERSION).glob("*.json"))
    assert len(kept) == 2  # computed on first use, one file per task
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert all(r["score"]["tests_total"] > 10 and r["score"]["env_id"] == V2 for r in records)


def test_an_episode_scored_in_another_task_environment_stops_the_run(
    tmp_path: Path, bundled_tasks: list[Task], bwrap_sandbox: BwrapSandbox
) -> None:
    """As a Ray node set up from another tarball would score: the record names another task environment than the
    run's, and the run stops rather than rank it beside the others."""

    class Elsewhere(BackendScorer):
        def score(self, task: Task, answer: str) -> BackendScore:
            return replace(super().score(task, answer), taskenv="0123456789abcdef")

    path = write_tasks(tmp_path / "plain.jsonl", bundled_tasks[:1])
    with pytest.raises(InfraError, match=r"scored in task environment 0123456789abcdef, not the run's [0-9a-f]{16}"):
        run_eval(plan(tmp_path, V1, path), scorer=Elsewhere(bwrap_sandbox))
    assert not (tmp_path / "run" / "episodes.jsonl").read_text().strip()  # nothing of it was written
