"""Adding a domain is one package and a registration: a toy domain from tests/plugins runs as an env, through
``colbench eval`` and into the leaderboard, and is scored offline by ``colbench score`` with the options it
declares, with nothing in colbench changed."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import gymnasium as gym
import pytest

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.cli.main import main as cli_main
from colbench.env.domain import get_domain
from colbench.errors import ConfigError, DataError
from colbench.eval import RunPlan, run_eval
from colbench.humans.simulator import ScriptedSimulator
from colbench.llm.specs import ModelSpec
from colbench.report import build_report, render_text
from colbench.runs import load_run
from colbench.tasks import load_jsonl
from colbench.tasks.domain_registry import DOMAINS, domain_names, register_domain
from colbench.types.chat import Message

WORDS = [("a fruit, yellow", "banana"), ("a colour of the sky", "blue"), ("a pet that purrs", "cat")]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setattr(DOMAINS, "_entry_points", dict(DOMAINS._entry_points))  # restored after the test
    monkeypatch.setattr(DOMAINS, "_loaded", dict(DOMAINS._loaded))
    register_domain("toy", "plugins.toy_domain:DOMAIN")
    if "Toy-v0" not in gym.registry:
        gym.register(id="Toy-v0", entry_point="plugins.toy_domain:ToyEnv", kwargs={"max_turns": 3})
    path = tmp_path / "words.jsonl"
    rows = [{"domain": "toy", "problem_description": hint, "ground_truth": word} for hint, word in WORDS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    yield path


class Guesser:
    """Asks once, then guesses what the human said."""

    name = "guesser"

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if context.turn == 1:
            return AgentReply("What is it?")
        return AgentReply("I WANT TO ANSWER: " + str(messages[-1]["content"]))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


def test_a_registered_domain_loads_its_tasks_by_its_schema(toy: Path) -> None:
    assert "toy" in domain_names() and get_domain("toy").name == "toy"
    tasks = load_jsonl(toy)
    assert [t.domain for t in tasks] == ["toy"] * 3 and tasks[0].ground_truth == "banana"
    bad = toy.with_name("bad.jsonl")
    bad.write_text(json.dumps({"domain": "toy", "problem_description": "x", "ground_truth": "two words"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: field 'ground_truth': a toy task's answer is one word"):
        load_jsonl(bad)
    with pytest.raises(ConfigError, match="already registered"):
        register_domain("toy", "elsewhere:DOMAIN")


def test_the_domain_runs_as_an_env_through_eval_and_into_the_leaderboard(toy: Path, tmp_path: Path) -> None:
    tasks = load_jsonl(toy)
    human = ScriptedSimulator(lambda task, dialogue: task.hidden_information)
    env = gym.make("Toy-v0", tasks=tasks, simulator=human)
    obs, info = env.reset(options={"task_id": tasks[1].task_id})
    assert obs.startswith("Guess the word in at most 3 turns") and "blue" not in obs
    obs, reward, terminated, _, info = env.step("What is it?")
    assert obs == "blue" and not terminated
    obs, reward, terminated, _, info = env.step("I WANT TO ANSWER: blue")
    assert terminated and reward == 1.0 and info["success"] is True

    out = tmp_path / "run"
    config = RunPlan.resolve(
        env_id="Toy-v0", agent=ModelSpec.named("guesser"), simulator="scripted", tasks=str(toy), out=out, progress="off"
    )
    result = run_eval(config, agent=Guesser(), simulator=human)
    assert result.overall.ok == 3 and result.overall.success == 3
    assert "success 3/3 (100.0%)" in result.summary_line()
    run = load_run(out)
    assert run.domain_name == "toy" and run.config.scoring == {"scorer": "exact word"}
    (table,) = build_report([run]).tables
    assert table.domain == "toy" and table.rows[0].primary.value == 1.0
    assert "right %" in render_text(build_report([run]))


def test_the_domain_is_scored_offline_with_the_options_it_declares(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [t.task_id for t in load_jsonl(toy)]
    answers = tmp_path / "answers.jsonl"
    rows = [{"task_id": ids[0], "answer": "I WANT TO ANSWER: Banana"}, {"task_id": ids[1], "answer": "red"}]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "scores.jsonl"
    command = ["score", "toy", "--tasks", str(toy), "--answers", str(answers), "--out", str(out)]
    assert cli_main(command) == 0
    assert capsys.readouterr().out == f"1/2 words right -> {out}\n"
    assert [json.loads(line)["right"] for line in out.read_text().splitlines()] == [True, False]
    assert cli_main([*command, "--case", "exact"]) == 0
    assert capsys.readouterr().out == f"0/2 words right -> {out}\n"
    with pytest.raises(SystemExit):
        cli_main([*command, "--case", "upper"])
    assert "invalid choice: 'upper'" in capsys.readouterr().err
