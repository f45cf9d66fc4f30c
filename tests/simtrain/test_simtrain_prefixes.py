"""Prefixes (colbench.simtrain.prefixes): from a real run directory (a scripted ``colbench eval`` on the bundled
backend sample), by playing the same agent through the env, the split by reference, and the prefix file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from malformed import refused
from plans import scripted_plan

from colbench.errors import ConfigError, DataError
from colbench.eval import run_eval
from colbench.humans.simulator import DEFAULT_SCRIPTED_REPLY
from colbench.runs import load_run
from colbench.simtrain.prefixes import (
    Prefix,
    prefixes_by_playing,
    prefixes_from_runs,
    read_prefixes,
    reference_group,
    split_by_reference,
    write_prefixes,
)
from colbench.tasks import load_split
from colbench.types.dialogue import Turn

ENV = "ColBench-Backend-v1"
TURNS = 3  # agent turns: two asked questions (the human replies to each) and the final one


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: the scripted asking agent and the scripted human on three bundled tasks, three turns each."""
    out = tmp_path_factory.mktemp("simtrain") / "ask-run"
    plan = scripted_plan(out, env_id=ENV, agent="scripted:ask", limit=3, max_turns=TURNS, sandbox="bwrap")
    assert run_eval(plan).overall.ok == 3
    return out


def test_prefixes_from_a_run_are_its_dialogues_before_each_human_reply(run_dir: Path) -> None:
    prefixes = prefixes_from_runs([run_dir])
    run = load_run(run_dir)
    records = run.ordered_episodes()
    assert len(prefixes) == 3 * (TURNS - 1)  # the final turn has no reply: no prefix
    for record in records:
        mine = [p for p in prefixes if p.task.task_id == record.task_id]
        assert [p.source for p in mine] == [f"run:ask-run/{record.task_id}.0#{n}" for n in (1, 2)]
        turns = [(row["role"], row["text"]) for row in record.dialogue or []]
        for n, prefix in enumerate(mine):
            assert [(t.role, t.text) for t in prefix.dialogue] == turns[: 2 * n + 1]
            assert prefix.dialogue[-1].role == "agent" and prefix.weight == 1.0
            assert prefix.task == next(t for t in run.snapshot_tasks() or [] if t.task_id == record.task_id)
        assert mine[1].dialogue[1].text == DEFAULT_SCRIPTED_REPLY  # the human's reply, as the agent saw it
    assert len(prefixes_from_runs([run_dir], max_per_episode=1)) == 3


def test_identical_prefixes_fold_with_their_weights(run_dir: Path) -> None:
    twice = prefixes_from_runs([run_dir, run_dir])
    once = prefixes_from_runs([run_dir])
    assert [p.key() for p in twice] == [p.key() for p in once]
    assert [p.weight for p in twice] == [2.0] * len(once)


def test_playing_the_agent_gives_the_runs_prefixes(run_dir: Path) -> None:
    from_run = prefixes_from_runs([run_dir])
    ids = {p.task.task_id for p in from_run}
    tasks = [t for t in load_split("backend-sample") if t.task_id in ids]
    played = prefixes_by_playing(
        tasks,
        env_id=ENV,
        agent="scripted:ask",
        simulator="scripted",
        simulator_options={},
        max_turns=TURNS,
        seed=0,
    )
    assert sorted(p.key() for p in played) == sorted(p.key() for p in from_run)
    assert {p.source for p in played} == {"played:scripted:ask#1", "played:scripted:ask#2"}
    with pytest.raises(ConfigError, match="max_turns must be >= 2"):
        prefixes_by_playing(
            tasks, env_id=ENV, agent="scripted:ask", simulator="scripted", simulator_options={}, max_turns=1, seed=0
        )
    with pytest.raises(ConfigError, match="unknown"):
        prefixes_by_playing(
            tasks,
            env_id="ColBench-Nope-v0",
            agent="scripted:ask",
            simulator="scripted",
            simulator_options={},
            max_turns=3,
            seed=0,
        )


def _prefix(task_id: str, reference: str, question: str = "What do you need?") -> Prefix:
    task = load_split("backend-sample")[0]
    task = replace(task, task_id=task_id, ground_truth=reference, hidden_information=reference)
    return Prefix(task, (Turn("agent", question),), f"test:{task_id}")


def test_split_keeps_a_shared_reference_on_one_side_even_under_two_task_ids() -> None:
    """``twin`` and ``orig`` are different task ids with the same reference (but for layout): a split by id could put
    them on both sides; the split by reference never does, whatever the seed."""
    references = [f"def f{i}(x):\n    return x + {i}\n" for i in range(8)]
    prefixes = [_prefix(f"t{i}", ref, q) for i, ref in enumerate(references) for q in ("What?", "Why?")]
    prefixes.append(_prefix("twin", references[0].replace("    return", "  return")))
    for seed in range(20):
        train, held = split_by_reference(prefixes, held_out=0.3, seed=seed)
        assert len(train) + len(held) == len(prefixes) and train and held
        assert not {reference_group(p.task) for p in train} & {reference_group(p.task) for p in held}
        assert not {p.task.task_id for p in train} & {p.task.task_id for p in held}
        side = {p.task.task_id: p in held for p in prefixes}
        assert side["twin"] == side["t0"]
        assert len(held) >= 0.3 * len(prefixes)
    assert split_by_reference(prefixes, held_out=0.3, seed=3) == split_by_reference(prefixes, held_out=0.3, seed=3)
    with pytest.raises(ConfigError, match="at least two"):
        split_by_reference([p for p in prefixes if p.task.task_id in ("t0", "twin")], held_out=0.5, seed=0)
    with pytest.raises(ConfigError, match="held_out"):
        split_by_reference(prefixes, held_out=1.0, seed=0)


def test_the_prefix_file_round_trips(run_dir: Path, tmp_path: Path) -> None:
    prefixes = prefixes_from_runs([run_dir, run_dir])
    path = tmp_path / "prefixes.jsonl"
    assert write_prefixes(path, prefixes) == len(prefixes)
    back = read_prefixes(path)
    assert [p.to_row() for p in back] == [p.to_row() for p in prefixes]
    assert [replace(p.task, source="") for p in back] == [replace(p.task, source="") for p in prefixes]


def test_a_bad_prefix_row_is_one_line_naming_the_file_and_line(run_dir: Path, tmp_path: Path) -> None:
    good = prefixes_from_runs([run_dir])[0].to_row()
    path = tmp_path / "bad.jsonl"

    def with_(**fields: object) -> str:
        return json.dumps(good) + "\n" + json.dumps({**good, **fields}) + "\n"

    refused(read_prefixes, path, json.dumps(good) + "\n{oops\n", "invalid JSON")
    refused(read_prefixes, path, json.dumps(good) + "\n[1]\n", "expected a JSON object")
    where = ":2"  # after the file named first: its line
    refused(read_prefixes, path, with_(weight=0), f"{where}: field 'weight'")
    refused(
        read_prefixes,
        path,
        with_(dialogue=[{"role": "agent", "text": "hi"}, {"role": "human", "text": "yo"}]),
        f"{where}: field 'dialogue': must end with an agent turn",
    )
    refused(read_prefixes, path, with_(dialogue=[{"role": "robot", "text": "hi"}]), f"{where}: field 'dialogue'[0]")
    refused(read_prefixes, path, with_(key="0" * 16), f"{where}: field 'key'")
    refused(
        read_prefixes, path, with_(task={**good["task"], "ground_truth": ""}), f"{where}: task: field 'ground_truth'"
    )
    refused(read_prefixes, path, with_(source=""), f"{where}: field 'source'")
    refused(read_prefixes, path, "\n", "no prefixes")
    with pytest.raises(DataError, match="cannot open"):
        read_prefixes(tmp_path / "missing.jsonl")
