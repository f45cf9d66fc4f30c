"""Task validation: every bad row is named by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paths import BUNDLED_SAMPLE, REPO, SHARED

from colbench.errors import ConfigError, DataError
from colbench.tasks import (
    Task,
    content_id,
    get_split,
    get_task,
    iter_tasks,
    known_splits,
    load,
    load_jsonl,
    task_from_row,
)

GOOD = {"problem_description": "Write f.", "ground_truth": "def f():\n    return 1", "test_cases": {"test1": "f()"}}


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "row, field",
    [
        ({**GOOD, "problem_description": ""}, "problem_description"),
        ({k: v for k, v in GOOD.items() if k != "ground_truth"}, "ground_truth"),
        ({**GOOD, "test_cases": ["f()"]}, "test_cases"),
        ({**GOOD, "test_cases": {"test1": 3}}, "test_cases.test1"),
        ({**GOOD, "hidden_information": 5}, "hidden_information"),
        ({**GOOD, "task_id": ""}, "task_id"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path: Path, row: dict[str, object], field: str) -> None:
    path = write(tmp_path, [json.dumps(GOOD), "", json.dumps(row)])
    with pytest.raises(DataError) as err:
        load_jsonl(path, domain="backend")
    assert str(err.value).startswith(f"{path}:3: field '{field}'")
    assert "\n" not in str(err.value)


def test_invalid_json_and_non_objects(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"tasks.jsonl:2: invalid JSON"):
        load_jsonl(write(tmp_path, [json.dumps(GOOD), "{oops"]))
    with pytest.raises(DataError, match=r"tasks.jsonl:1: expected a JSON object, got list"):
        load_jsonl(write(tmp_path, ["[1, 2]"]))
    with pytest.raises(DataError, match="cannot open"):
        load_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="no tasks"):
        load_jsonl(write(tmp_path, [""]))


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r":2: duplicate task_id .* \(first at .*:1\)"):
        load_jsonl(write(tmp_path, [json.dumps(GOOD), json.dumps(GOOD)]))


def test_task_ids_are_stable_content_hashes() -> None:
    a = task_from_row(GOOD)
    b = task_from_row(dict(reversed(list(GOOD.items()))))
    assert a.task_id == b.task_id == content_id("backend", GOOD) and len(a.task_id) == 12
    assert task_from_row({**GOOD, "ground_truth": "def f():\n    return 2"}).task_id != a.task_id
    assert task_from_row({**GOOD, "task_id": "mine"}).task_id == "mine"
    assert a.hidden_information == a.ground_truth and a.domain == "backend"
    frontend = task_from_row({"problem_description": "A page.", "ground_truth": "<html></html>"})
    assert frontend.domain == "frontend" and frontend.test_cases == ()


def test_rows_round_trip(tmp_path: Path) -> None:
    task = task_from_row(GOOD)
    path = write(tmp_path, [json.dumps(task.to_row())])
    assert load_jsonl(path)[0] == task.__class__(**{**task.__dict__, "source": f"{path}:1"})


def test_the_real_sample_loads(shared_backend_sample: list[object]) -> None:
    assert len(shared_backend_sample) == 300
    assert len({t.task_id for t in shared_backend_sample}) == 300  # type: ignore[attr-defined]


SAMPLES = REPO / "tasks" / "samples"


def test_bundled_frontend_sample_loads_as_frontend() -> None:
    tasks = load("frontend-sample")
    spec = get_split("frontend-sample")
    assert (spec.kind, spec.domain, spec.path) == ("bundled", "frontend", "samples/frontend-sample.jsonl")
    assert len(tasks) == 20 and {t.domain for t in tasks} == {"frontend"} and all(t.test_cases == () for t in tasks)
    assert all(t.hidden_information == t.ground_truth for t in tasks)
    path = SAMPLES / "frontend-sample.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(set(row) == {"problem_description", "ground_truth"} for row in rows)
    assert [t.task_id for t in tasks] == [content_id("frontend", row) for row in rows]
    assert [t.task_id for t in tasks] == [t.task_id for t in load_jsonl(path)]  # inferred domain, same ids
    assert all("tailwindcss@2.2.19" in t.ground_truth for t in tasks)
    backend = load("backend-sample")
    assert {t.domain for t in backend} == {"backend"} and len(backend) == 20


def test_bundled_frontend_sample_is_the_start_of_the_shared_sample() -> None:
    shared = SHARED / "data" / "colbench" / "frontend_test_sample.jsonl"
    if not shared.is_file():
        pytest.skip(f"the ColBench frontend sample is not present at {shared}")
    bundled = SAMPLES / "frontend-sample.jsonl"
    assert bundled.read_bytes() == b"".join(shared.read_bytes().splitlines(keepends=True)[:20])


# -- the public API ------------------------------------------------------------------------------------------------


def test_load_get_and_iterate_by_split_name_or_file(tmp_path: Path) -> None:
    tasks = load("backend-sample")
    assert [t.task_id for t in iter_tasks("backend-sample")] == [t.task_id for t in tasks]
    picked = tasks[7]
    assert get_task("backend-sample", picked.task_id) == picked
    with pytest.raises(ConfigError, match=r"backend-sample: no task 'nope' among its 20 tasks"):
        get_task("backend-sample", "nope")
    path = write(tmp_path, [json.dumps(t.to_row()) for t in tasks[:3]])
    assert [t.task_id for t in load(str(path))] == [t.task_id for t in tasks[:3]]
    assert get_task(str(path), tasks[2].task_id).problem_description == tasks[2].problem_description
    assert {"backend-sample", "frontend-sample", "backend-test", "frontend-test"} <= set(known_splits())
    with pytest.raises(ConfigError, match=r"'nope' is not a file and not a split; known splits: backend-sample"):
        load("nope")
    with pytest.raises(ConfigError, match="bundled with colbench: it has no revisions"):
        load("backend-sample@abc")


def test_a_row_may_name_its_domain_and_an_unknown_one_is_named(tmp_path: Path) -> None:
    page = {"problem_description": "A page.", "ground_truth": "<html></html>"}
    assert task_from_row({**page, "domain": "frontend"}).domain == "frontend"
    path = write(tmp_path, [json.dumps({**page, "domain": "mobile"})])
    with pytest.raises(DataError, match=rf"{path}:1: unknown domain 'mobile'; expected one of backend, frontend"):
        load_jsonl(path)
    with pytest.raises(DataError, match=r"field 'test_cases'"):  # asked for backend: its schema applies
        task_from_row(page, domain="backend", where="w")


def test_prompt_dataset_rows_are_the_envs_first_observations(bundled_tasks: list[Task]) -> None:
    import gymnasium as gym

    import colbench  # noqa: F401 (registers the ids)
    from colbench import prompt_dataset

    data = prompt_dataset("backend-sample", max_turns=4)
    assert data.column_names == ["task_id", "domain", "prompt"] and len(data) == len(bundled_tasks)
    env = gym.make("ColBench-Backend-v1", tasks="backend-sample", max_turns=4)
    for row in data.select(range(3)):
        first, _ = env.reset(options={"task_id": row["task_id"]})
        assert row["prompt"] == [{"role": "user", "content": first}] and row["domain"] == "backend"
        assert get_task("backend-sample", row["task_id"]).task_id == row["task_id"]
    plain = prompt_dataset(bundled_tasks[:2], conversational=False)
    assert isinstance(plain[0]["prompt"], str) and "Python function" in plain[0]["prompt"]
    with pytest.raises(ConfigError, match="max_turns"):
        prompt_dataset(bundled_tasks, max_turns=0)


def test_prompt_rows_take_a_split_name_or_a_task_file_as_prompt_dataset_does(bundled_tasks: list[Task]) -> None:
    """The rows OpenRLHF's and verl's datasets are written from: by split name, by file, or from tasks, the same."""
    from colbench import prompt_rows

    by_name = prompt_rows("backend-sample", max_turns=10)
    assert by_name == prompt_rows(bundled_tasks, max_turns=10) == prompt_rows(str(BUNDLED_SAMPLE), max_turns=10)
    assert [row["task_id"] for row in by_name] == [task.task_id for task in bundled_tasks]
    assert "10" in by_name[0]["prompt"][0]["content"] and by_name != prompt_rows("backend-sample", max_turns=3)
    with pytest.raises(ConfigError, match="no-such-split"):
        prompt_rows("no-such-split")


def test_shared_loads_read_a_file_again_only_when_it_changes(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    from colbench.tasks import load_shared

    path = tmp_path / "t.jsonl"
    lines = BUNDLED_SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:3]), encoding="utf-8")
    first = load_shared(str(path))
    assert load_shared(str(path))[0] is first[0] and len(first) == 3  # read once, the same records shared
    path.write_text("".join(lines[:5]), encoding="utf-8")
    assert len(load_shared(str(path))) == 5
