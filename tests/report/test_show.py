"""``colbench show``: one episode of a run directory as a readable dialogue with its score."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import colbench, make_run, record, run_json

from colbench.errors import ConfigError
from colbench.report.show import show

DIALOGUE = [
    {"role": "agent", "text": "What should happen with an empty list?"},
    {"role": "human", "text": "Return zero.", "leak": True, "leak_action": "redacted"},
    {"role": "agent", "text": "I WANT TO ANSWER:\ndef total(xs):\n    return sum(xs) if xs else 0"},
]


def episode(task: str, reward: float, success: bool) -> dict[str, object]:
    return record(
        task,
        0,
        reward,
        success,
        dialogue=DIALOGUE if task == "t2" else [{"role": "agent", "text": "x"}],
        answer=DIALOGUE[-1]["text"] if task == "t2" else "x",
        turns=2 if task == "t2" else 1,
        score={"tests_passed": 7, "tests_total": 10},
        usage={"agent": {"completion_tokens": 42}, "simulator": {"completion_tokens": 5}},
        timings={"duration_s": 12.5},
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    config = run_json(task_ids=("t1", "t2", "t3"))
    records = [episode("t1", 0.0, False), episode("t2", 0.7, False), record("t3", 0, None)]
    return make_run(tmp_path, "run", config, records)


def test_shows_turns_answer_and_score(run_dir: Path) -> None:
    text = show(run_dir, "t2")
    assert "task t2" in text and "agent: agent-model" in text and "human: sim-model" in text
    order = [text.index(s) for s in ("AGENT (turn 1)", "HUMAN (turn 1)", "AGENT (turn 2)", "ANSWER SCORED", "SCORE:")]
    assert order == sorted(order)
    assert "    Return zero." in text and "[leak flagged: redacted]" in text
    answer = text[text.index("ANSWER SCORED") :]
    assert "after the answer marker" in answer and "    def total(xs):" in answer and "I WANT TO ANSWER" not in answer
    assert "SCORE: reward 0.700, tests passed 7/10, no success" in text
    assert "12.5 s; tokens written: agent 42, simulator 5" in text


def test_default_is_the_first_episode_and_prefixes_pick_a_task(run_dir: Path) -> None:
    assert "task t1 " in show(run_dir)
    with pytest.raises(ConfigError, match=r"matches 3 tasks"):
        show(run_dir, "t")
    with pytest.raises(ConfigError, match=r"'zz' matches no episode"):
        show(run_dir, "zz")
    with pytest.raises(ConfigError, match=r"no trial 4"):
        show(run_dir, "t1", 4)


def test_infra_error_episode_says_why(run_dir: Path) -> None:
    assert "not scored: infrastructure error: LLMError: endpoint down" in show(run_dir, "t3")


def test_cli(run_dir: Path, tmp_path: Path) -> None:
    done = colbench("show", str(run_dir), "--task", "t2")
    assert done.returncode == 0, done.stderr
    assert "HUMAN (turn 1)" in done.stdout and "SCORE: reward 0.700" in done.stdout
    empty = make_run(tmp_path, "empty", run_json(), [])
    done = colbench("show", str(empty))
    assert done.returncode == 2 and "no finished episode" in done.stderr and "Traceback" not in done.stderr
