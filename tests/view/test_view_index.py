"""The run index: incremental reads of appended bytes, the record that counts, filters, search and pages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from view_runs import append, backend_record, infra_record, write_run

from colbench.errors import DataError
from colbench.view.index import RunIndex, fts_phrase


def test_appended_episodes_are_read_from_where_the_last_look_ended(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [backend_record("t1"), backend_record("t2", passed=1)])
    index = RunIndex(run, cache)
    assert index.count() == 2 and not index.refresh()
    append(run, [backend_record("t3")])
    with open(run / "episodes.jsonl", "ab") as out:
        out.write(b'{"task_id": "t4", "tri')  # a write in progress: not indexed yet, nothing lost
    assert index.refresh() and index.count() == 3
    with open(run / "episodes.jsonl", "ab") as out:
        out.write(('al": 0' + json.dumps(backend_record("t4"))[len('{"task_id": "t4", "trial": 0') :] + "\n").encode())
    assert index.refresh() and [r.task_id for r in index.rows()] == ["t1", "t2", "t3", "t4"]
    again = RunIndex(run, cache)  # a second viewer reuses the index on disk: nothing left to read
    assert again.db_path == index.db_path and not again.refresh() and again.count() == 4


def test_the_first_ok_record_counts_and_attempts_are_kept(tmp_path: Path, cache: Path) -> None:
    run = write_run(
        tmp_path / "run",
        [infra_record("t1"), backend_record("t1", passed=1), backend_record("t1", passed=2), infra_record("t2")],
    )
    index = RunIndex(run, cache)
    rows = {r.task_id: r for r in index.rows()}
    assert rows["t1"].reward == 0.5 and rows["t1"].attempts == 3 and rows["t2"].status == "infra_error"
    record = index.record("t1", 0)
    assert record is not None and record.reward == 0.5 and record.attempts == 3
    assert index.record("t1", 5) is None


def test_a_replaced_or_shrunk_log_is_indexed_again(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [backend_record("t1"), backend_record("t2")])
    index = RunIndex(run, cache)
    (run / "episodes.jsonl").write_text(json.dumps(backend_record("other")) + "\n")
    index.refresh()
    assert [r.task_id for r in index.rows()] == ["other"]


def test_a_torn_last_line_is_reported_and_a_bad_middle_line_is_an_error(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [backend_record("t1")])
    with open(run / "episodes.jsonl", "ab") as out:
        out.write(b"not json at all")
    index = RunIndex(run, cache)
    assert index.count() == 1 and index.torn_line is not None and index.torn_line.endswith(":2")
    bad = write_run(tmp_path / "bad", [backend_record("t1")])
    with open(bad / "episodes.jsonl", "ab") as out:
        out.write(b"{broken\n" + json.dumps(backend_record("t2")).encode() + b"\n")
    with pytest.raises(DataError, match=r"episodes.jsonl:2"):
        RunIndex(bad, cache)
    invalid = write_run(tmp_path / "invalid", [backend_record("t1", reward=7.0)])
    with pytest.raises(DataError, match="reward"):
        RunIndex(invalid, cache)


def test_filters_search_sort_and_pages(tmp_path: Path, cache: Path) -> None:
    records = [backend_record(f"t{i:03}", 0, passed=i % 3, total=2) for i in range(120)]
    records += [backend_record("t000", 1, passed=0), backend_record("t001", 1, passed=2)]
    records.append(backend_record("leaky", leaks=2, answer="secret SENTINEL-WORD here"))
    records.append(infra_record("down"))
    index = RunIndex(write_run(tmp_path / "run", records), cache)
    page = index.page(0, 50)
    assert page.total == 124 and len(page.rows) == 50 and index.page(2, 50).rows[-1].task_id == "down"
    failed = index.page(0, 500, filters=("failed",))
    assert failed.total == sum(1 for r in records if r["status"] == "ok" and not r["success"])
    every = {r.task_id for r in index.page(0, 500, filters=("failed_all",)).rows}
    assert "t000" in every and "t001" not in every and "t002" not in every
    assert [r.task_id for r in index.page(0, 10, filters=("leaked",)).rows] == ["leaky"]
    assert [r.task_id for r in index.page(0, 10, filters=("infra",)).rows] == ["down"]
    assert [r.task_id for r in index.page(0, 10, search="sentinel-word").rows] == ["leaky"]
    for hostile in ['" OR 1', "NEAR(a b)", "*", "col:umn", "\x00", "'; DROP TABLE episodes; --"]:
        assert index.page(0, 10, search=hostile).total >= 0  # user text is never FTS syntax
    assert index.count() == 124
    by_reward = index.page(0, 5, sort="reward", descending=True).rows
    assert all(r.reward == 1.0 for r in by_reward)
    with pytest.raises(DataError, match="filter 'nope'"):
        index.page(filters=("nope",))
    assert fts_phrase('a "b') == '"a" """b"'


def test_frontend_v0_has_no_failures_and_costs_need_prices(tmp_path: Path, cache: Path) -> None:
    record = {
        "task_id": "f1",
        "trial": 0,
        "status": "ok",
        "reward": 0.2,
        "success": None,
        "turns": 1,
        "score": {"similarity": 0.2},
        "dialogue": [],
        "answer": "<p>x</p>",
        "usage": {"agent": {"prompt_tokens": 10, "completion_tokens": 1, "calls": 1}},
    }
    index = RunIndex(write_run(tmp_path / "fe", [record], source="frontend-a"), cache)
    (row,) = index.rows()
    assert row.tokens == 11
    metrics = index.metrics
    if metrics.has_success or metrics.success_threshold is not None:
        assert row.failed is (not index.domain.success_of(0.2, None))
    else:
        assert row.failed is None


def test_a_changed_run_json_rebuilds_the_index(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [backend_record("t1", passed=1)])
    assert (next(RunIndex(run, cache).rows()).cost or 0) > 0  # gpt-4o-mini and gpt-4o at list prices
    free = {"spec": "llamacpp", "name": "llamacpp", "model": "llamacpp"}
    write_run(run, [], agent=free, simulator=free)  # another run.json in the same place, the log as it was
    (row,) = RunIndex(run, cache).rows()
    assert row.task_id == "t1" and row.cost == 0.0


def test_two_viewers_of_one_run_share_its_index_and_a_removed_log_empties_it(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [backend_record("t1")])
    first, second = RunIndex(run, cache), RunIndex(run, cache)
    append(run, [infra_record("t2"), backend_record("t2")])
    assert first.refresh() and not second.refresh()  # the second finds the work done
    assert [(r.task_id, r.attempts) for r in second.rows()] == [("t1", 1), ("t2", 2)]
    (run / "episodes.jsonl").unlink()
    assert first.refresh() and first.count() == 0 and first.record("t1", 0) is None
