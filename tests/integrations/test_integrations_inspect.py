"""Inspect: ``inspect eval colbench/backend`` as users run it (Inspect's CLI in its own process, the task found
through the entry point pyproject.toml declares, both roles on a local OpenAI-compatible stub), against ``colbench
eval`` with the same scripted agent and human; a failing human as a sample error that ``inspect eval-retry`` runs
again; colbench's report reading the log; bad arguments as Inspect's one-line errors; Inspect's mockllm provider at
the turn cap; the frontend through the same renderer and reward; the documented launch through Inspect's parser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("inspect_ai")

from chromium import renderer_or_skip
from doc_launches import launch, shell_words
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ChatMessage, ContentImage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolChoice, ToolInfo
from openai_stub import Action, StubOpenAIServer
from paths import REPO

from colbench.cli.main import main as colbench_main
from colbench.errors import DataError
from colbench.integrations import inspect_tasks
from colbench.report import build_report, load_run
from colbench.report.inspect_log import read_inspect_log
from colbench.tasks import load
from colbench.types.dialogue import ANSWER_MARKER

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
HIDDEN = re.compile(r"cannot see it\):\n(.*?)\n\nHow to answer:", re.S)
FAULTY = "a7dc44af494e"  # the backend-sample task whose human fails in the first Inspect run


@pytest.fixture(scope="module")
def inspect_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a user who installed ``colbench[inspect]``: this checkout, and beside it the entry point
    pyproject.toml declares (the wheel's, tests/test_wheel.py), in a distribution's metadata of its own (the
    editable install the tests run from may predate it)."""
    site = tmp_path_factory.mktemp("site")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    info = site / "colbench_inspect_entry-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: colbench-inspect-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)]), "STUB_API_KEY": "stub-key"}


def run(argv: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(process: subprocess.Popen[str]) -> str:
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    return output


def only_log(folder: Path) -> EvalLog:
    (path,) = folder.glob("*.eval")
    return read_eval_log(str(path))


class ScriptedPair:
    """The same scripted agent and human behind both harnesses' model clients: a human who pastes the function it
    has in mind (colbench's ``scripted:leaky``), an agent that asks for the code and answers with the reply it gets
    (``scripted:copycat``). While ``failing``, Inspect's human fails on one task (the endpoint refuses it)."""

    def __init__(self) -> None:
        self.failing = True
        self.faulty = next(t for t in load("backend-sample") if t.task_id == FAULTY).problem_description

    def __call__(self, body: dict[str, Any]) -> str | Action:
        messages = body["messages"]
        if body["model"].endswith("human"):
            hidden = HIDDEN.search(messages[0]["content"])
            assert hidden is not None, messages[0]["content"]
            if self.failing and body["model"] == "human" and self.faulty in messages[0]["content"]:
                return ("status", 400)
            return hidden[1]
        if len(messages) == 1:
            return "Could you paste the code you have in mind? Exactly as you have it, please."
        return f"{ANSWER_MARKER}\n{messages[-1]['content']}"


@pytest.mark.slow
@needs_bwrap
def test_inspect_eval_gives_colbench_evals_rewards_and_retries_a_lost_sample(
    inspect_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = ScriptedPair()
    with StubOpenAIServer(pair) as stub:
        env = {**inspect_env, "STUB_BASE_URL": stub.base_url}
        logs = tmp_path / "logs"
        inspect = [sys.executable, "-m", "inspect_ai", "eval", "colbench/backend", "--model", "openai-api/stub/agent"]
        inspect += ["--model-role", "human=openai-api/stub/human", "-T", "tasks=backend-sample", "-T", "sandbox=bwrap"]
        inspect += ["--log-dir", str(logs), "--display", "none"]
        colbench = [sys.executable, "-m", "colbench", "eval", "--env", "ColBench-Backend-v2", "--quiet"]
        colbench += ["--agent", "openai:colbench-agent", "--agent-base-url", stub.base_url, "--sandbox", "bwrap"]
        colbench += ["--simulator", "openai:colbench-human", "--simulator-base-url", stub.base_url]
        colbench += ["--tasks", "backend-sample", "--out", str(tmp_path / "run")]
        first, theirs = run(inspect, env, tmp_path), run(colbench, env, tmp_path)
        finished(first)
        lost = only_log(logs)
        assert lost.status == "error"  # Inspect's default: the first sample error fails the eval, to be retried
        failed = {str(s.id): s.error.message for s in lost.samples or [] if s.error is not None}
        assert "stub status 400" in failed[FAULTY] and not any(s.scores for s in lost.samples or [])  # never a score
        pair.failing = False
        (logs / "first").mkdir()
        (log_path,) = logs.glob("*.eval")
        log_path.rename(logs / "first" / log_path.name)
        finished(run([sys.executable, "-m", "inspect_ai", "eval-retry", str(logs / "first" / log_path.name),
                      "--log-dir", str(logs), "--display", "none"], env, tmp_path))  # fmt: skip
        finished(theirs)
    retried = only_log(logs)
    assert retried.status == "success" and retried.results is not None
    samples = {str(s.id): s for s in retried.samples or []}
    records = {r["task_id"]: r for r in map(json.loads, (tmp_path / "run" / "episodes.jsonl").read_text().splitlines())}
    assert len(samples) == len(records) == 20 and all(r["status"] == "ok" for r in records.values())
    rewards = {task: sample.scores["colbench_verdict"].value["pass_rate"] for task, sample in samples.items()}
    assert rewards == {task: record["reward"] for task, record in records.items()}
    assert 0 < sum(rewards.values()) < 20  # short functions pasted whole pass, long ones cut at the reply cap fail
    for task, sample in samples.items():
        verdict, record = sample.scores["colbench_verdict"].metadata, records[task]
        assert verdict["dialogue"] == record["dialogue"] and verdict["leaks"] == record["leaks"] == 1
        # Inspect's transcript is the dialogue, turn by turn: the env's prompt, then agent and human in turn
        chat = [(m.role, m.text) for m in sample.messages]
        turns = [("assistant" if t["role"] == "agent" else "user", t["text"]) for t in record["dialogue"]]
        assert chat[0][0] == "user" and chat[1:] == turns
    metrics = {score.name: score.metrics for score in retried.results.scores}
    assert metrics["pass_rate"]["mean"].value == pytest.approx(sum(rewards.values()) / 20)
    assert set(metrics["success"]) == {"mean", "stderr"}

    (retried_path,) = logs.glob("*.eval")
    report = build_report([read_inspect_log(retried_path), load_run(tmp_path / "run")])
    theirs, ours = sorted(report.tables[0].rows, key=lambda row: row.run.path == retried_path)
    assert (ours.primary, ours.secondary, ours.leak, ours.untrue) == (
        theirs.primary,
        theirs.secondary,
        theirs.leak,
        theirs.untrue,
    )
    # comparable: the same task set, prompts, scoring and policies; only the human's model name differs
    assert ours.infra == 0 and [note.split(" ")[0] for note in ours.notes + theirs.notes] == ["simulator"]
    assert colbench_main(["report", str(retried_path), str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out
    assert "openai-api/stub/agent" in printed and "colbench-agent" in printed


@pytest.mark.slow
def test_bad_arguments_are_inspects_own_one_line_errors(inspect_env: dict[str, str], tmp_path: Path) -> None:
    base = [sys.executable, "-m", "inspect_ai", "eval", "colbench/backend", "--model", "mockllm/model"]
    base += ["--log-dir", str(tmp_path), "--display", "plain", "-T", "tasks=backend-sample"]
    no_human = run(base, inspect_env, tmp_path)
    bad_policy = run(
        [*base, "--model-role", "human=mockllm/model", "-T", "leak_policy=sometimes"], inspect_env, tmp_path
    )
    for process, says in ((no_human, "--model-role human=PROVIDER/MODEL"), (bad_policy, "leak policy 'sometimes'")):
        output, _ = process.communicate(timeout=240)
        assert process.returncode != 0 and "Traceback" not in output, output[-3000:]
        assert says in " ".join(output.split()) and "colbench/backend:" in output
    assert not list(tmp_path.glob("*.eval"))  # stopped before any sample ran


def mock(reply: Any, seen: list[list[ChatMessage]]) -> Any:
    """Inspect's mockllm provider answering ``reply(input)``, with the usage a provider reports (without it
    mockllm counts tokens with tiktoken's o200k_base, a download: not here)."""

    def output(input: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice, config: GenerateConfig) -> Any:
        seen.append(input)
        out = ModelOutput.from_content(model="mockllm", content=reply(input))
        out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return out

    return get_model("mockllm/model", custom_outputs=output, memoize=False)


@needs_bwrap
def test_mockllm_plays_to_the_turn_cap_and_an_inspect_limit_scores_0(tmp_path: Path) -> None:
    """Through Inspect's API, its mockllm provider in both roles: an agent that only asks plays to the env's own
    cap (10 turns, the 10th scored as the answer); cut earlier by Inspect's message limit, it scores 0."""
    asked: list[list[ChatMessage]] = []
    heard: list[list[ChatMessage]] = []
    logs = [
        inspect_eval(
            "colbench/backend",
            model=mock(lambda _: MockText.agent, asked),
            model_roles={"human": mock(lambda _: MockText.human, heard)},
            task_args={"tasks": "backend-sample", "limit": 1, "sandbox": "bwrap"},
            display="none",
            log_dir=str(tmp_path),
            message_limit=limit,
        )[0]
        for limit in (None, 4)
    ]
    (capped,), (cut,) = (log.samples or [] for log in logs)
    verdict = capped.scores["colbench_verdict"]
    assert verdict.value == {"success": 0.0, "pass_rate": 0.0} and verdict.metadata["termination"] == "turn_limit"
    assert [m.role for m in capped.messages] == ["user"] + ["assistant", "user"] * 9 + ["assistant"]
    assert [len(chat) for chat in asked[:10]] == list(range(1, 20, 2)) and len(heard) == 9 + 1
    assert heard[0][0].role == "system" and "What you have in mind" in heard[0][0].text  # the env's human prompt
    assert capped.messages[2].text == MockText.human and logs[0].eval.task == "colbench/backend"
    limited = cut.scores["colbench_verdict"]
    assert limited.value == {"success": 0.0, "pass_rate": 0.0} and cut.error is None and cut.limit is not None
    assert limited.metadata["termination"] == "inspect_limit" and limited.metadata["turns"] == 1  # of 10


class MockText:
    agent = "Could you tell me more about what you need?"
    human = "Default output from the human."


@pytest.mark.browser
@pytest.mark.slow
def test_the_frontend_goes_through_colbenchs_renderer_and_reward(tmp_path: Path) -> None:
    page = "<html><body><h1>Welcome</h1><p>Our company.</p></body></html>"
    asked: list[list[ChatMessage]] = []
    heard: list[list[ChatMessage]] = []
    draft = f"Here is a first draft:\n{page}"
    renderer_or_skip().close()
    (log,) = inspect_eval(
        "colbench/frontend",
        model=mock(lambda chat: draft if len(chat) == 1 else f"{ANSWER_MARKER}\n{page}", asked),
        model_roles={"human": mock(lambda _: "Make the title bigger.", heard)},
        task_args={"tasks": "frontend-sample", "limit": 1, "max_turns": 3, "embedder": "test"},
        display="none",
        log_dir=str(tmp_path),
    )
    (sample,) = log.samples or []
    assert sample.error is None, sample.error
    shown = [part for part in heard[0][-1].content if isinstance(part, ContentImage)]
    assert len(shown) == 2  # the page the human wants and the agent's draft, as images
    verdict = sample.scores["colbench_verdict"]
    env = gym.make("ColBench-Frontend-v1", tasks="frontend-sample", embedder="test").unwrapped
    try:
        env.reset(options={"task_id": str(sample.id)})
        _, reward, terminated, _, info = env.step(f"{ANSWER_MARKER}\n{page}")
    finally:
        env.close()
    assert terminated and verdict.value["reward"] == reward and verdict.metadata["score"] == info["score"]


def test_the_documented_launch_parses_with_inspects_cli() -> None:
    from inspect_ai._cli.eval import eval_command
    from inspect_ai._cli.util import parse_cli_config, parse_model_role_cli_args
    from inspect_ai._util.registry import registry_info, registry_lookup

    words = shell_words(launch("inspect"))
    assert words[:2] == ["inspect", "eval"]
    params = eval_command.make_context("eval", words[2:]).params  # an unknown option fails here
    (name,) = params["tasks"]
    found = registry_lookup("task", name)
    assert found is inspect_tasks.backend or found is inspect_tasks.frontend
    given = parse_cli_config(params["t"], None)
    known = {f.name for f in fields(inspect_tasks.TaskArgs)} | set(registry_info(found).metadata["params"])
    assert given and set(given) <= known - {"args"}
    assert set(parse_model_role_cli_args(params["model_role"])) == {"human"}


@pytest.mark.parametrize(
    "args", [{"env_id": "ColBench-Frontend-v1"}, {"limit": 0}, {"human_view": "blind"}, {"leak_polcy": "redact"}]
)
def test_task_arguments_are_checked_when_the_task_is_made(args: dict[str, Any]) -> None:
    from inspect_ai._util.error import PrerequisiteError

    with pytest.raises(PrerequisiteError) as caught:
        inspect_tasks.backend(tasks="backend-sample", human="mockllm/model", **args)
    assert str(caught.value.message).startswith("colbench/backend: ") and "\n" not in str(caught.value.message)


def test_colbench_report_refuses_a_file_that_is_no_colbench_log(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(DataError, match=r"results.json: not an Inspect log"):
        read_inspect_log(tmp_path / "results.json")
