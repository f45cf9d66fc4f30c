"""OpenRLHF: the real MultiTurnAgentExecutor (openrlhf 0.11.2) plays ColBench episodes through the colbench agent,
with a fake generation engine standing in for vLLM (the engine is not what is tested): rewards, the human's reply
appended in the chat template's markup, and the policy's tokens alone marked as actions. The launch docs/integrations.md
shows goes through train_ppo_ray's own command-line handling, its data and agent file through OpenRLHF's own dataset
preprocessing and agent loader, and finished, lost and cut episodes through OpenRLHF's own experience batching."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from doc_launches import launch, shell_words
from failing_human import FAILING_TURNS, human_failing_at

pytest.importorskip("openrlhf.utils.agent")

from openrlhf_source import function, method, train_ppo_ray_args

from colbench.errors import ConfigError
from colbench.tasks import Task


class FakeEngine:
    """What the executor calls (OpenRLHF's rollout actor, vLLM underneath): the next scripted turn as tokens."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, list(replies)
        self.sampled: list[list[int]] = []  # the token ids of each turn, as returned

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        text = self.replies.pop(0)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        if len(ids) > sampling_params.max_tokens:  # vLLM stops at the budget the executor gives the turn
            ids = ids[: sampling_params.max_tokens]
            out = SimpleNamespace(token_ids=ids, text=self.tokenizer.decode(ids), finish_reason="length", logprobs=None)
        else:
            out = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        self.sampled.append(list(ids))
        return SimpleNamespace(outputs=[out])


def configure(monkeypatch: pytest.MonkeyPatch, model: Path, **options: Any) -> None:
    config = {"tasks": "backend-sample", "max_turns": 3, "tokenizer": str(model), "sandbox": "bwrap"}
    monkeypatch.setenv("COLBENCH_OPENRLHF", json.dumps(config | {"simulator": "scripted"} | options))


@pytest.fixture
def agent_config(exported_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, exported_model)


def run(
    tokenizer: Any, task: Task, replies: list[str], *, turns: int = 3, max_length: int = 4096, executor: Any = None
) -> dict[str, Any]:
    """One episode of ``task`` through OpenRLHF's executor, its prompt written for ``turns`` turns."""
    from colbench.env.domain import get_domain
    from colbench.integrations.openrlhf import AgentExecutor

    first = get_domain("backend").agent_prompt(task, turns)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": first}], tokenize=False, add_generation_prompt=True
    )
    return play(executor or AgentExecutor(), tokenizer, prompt, task.task_id, replies, max_length)


def play(executor: Any, tokenizer: Any, prompt: str, label: str, replies: list[str], max_length: int) -> dict[str, Any]:
    """The executor's response, and under ``SAMPLED`` the token ids the engine returned, turn by turn."""
    engine = FakeEngine(tokenizer, replies)
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    response = dict(asyncio.run(executor.execute(prompt, label, params, max_length, tokenizer, engine)))
    return response | {SAMPLED: engine.sampled}


SAMPLED = "test_sampled_ids"  # not OpenRLHF's: its experience code reads only the keys it knows


def trained_ids(result: dict[str, Any]) -> list[list[int]]:
    """The token ids OpenRLHF trains on (its action mask is 1 exactly on ``action_ranges``)."""
    return [result["observation_tokens"][a:b] for a, b in result["action_ranges"]]


def test_the_openrlhf_executor_plays_colbench(
    agent_config: None, exported_model: Path, bundled_tasks: list[Task]
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    task = bundled_tasks[2]
    question, answer = "What should happen with an empty input?", f"I WANT TO ANSWER:\n{task.ground_truth}"
    result = run(tokenizer, task, [question, answer])
    assert result["reward"] == 1.0 and result["extra_logs"]["colbench_success"] == 1.0
    assert result["extra_logs"]["colbench_lost"] == 0.0
    tokens = result["observation_tokens"]
    acted = [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in result["action_ranges"]]
    assert acted == [question, answer]  # only the policy's turns are actions
    assert trained_ids(result) == result[SAMPLED]  # exactly the tokens sampled, turn by turn
    text = tokenizer.decode(tokens)
    # The human's reply follows the policy's turn as the template renders a user turn, then the assistant header:
    # the context is exactly the chat the template would render.
    reply = "I don't know."  # the scripted human's default
    chat = [
        {"role": "user", "content": text.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]},
        {"role": "assistant", "content": question},
        {"role": "user", "content": reply},
        {"role": "assistant", "content": answer},
    ]
    assert text == tokenizer.apply_chat_template(chat, tokenize=False)[: len(text)]
    assert f"<|im_start|>user\n{reply}<|im_end|>\n<|im_start|>assistant\n" in text


def test_a_wrong_turn_scores_zero_and_the_cap_ends_the_episode(
    agent_config: None, exported_model: Path, bundled_tasks: list[Task]
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    result = run(tokenizer, bundled_tasks[0], ["Hi?", "Hm?", "def f(): pass"])
    assert result["reward"] == 0.0 and len(result["action_ranges"]) == 3 and trained_ids(result) == result[SAMPLED]


def test_missing_config_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from colbench.integrations.openrlhf import ColbenchAgentInstance

    monkeypatch.delenv("COLBENCH_OPENRLHF", raising=False)
    with pytest.raises(ConfigError, match="COLBENCH_OPENRLHF"):
        ColbenchAgentInstance()
    monkeypatch.setenv("COLBENCH_OPENRLHF", "{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ColbenchAgentInstance()
    monkeypatch.setenv("COLBENCH_OPENRLHF", '{"tasks": "backend-sample"}')
    with pytest.raises(ConfigError, match="with tokenizer"):
        ColbenchAgentInstance()


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_a_lost_episode_trains_nothing_and_is_flagged(
    turn: int, exported_model: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    with human_failing_at(turn) as human:
        configure(monkeypatch, exported_model, **human)
        result = run(tokenizer, bundled_tasks[0], ["Hi?", "Hm?", "def f(): pass"])
    assert result["extra_logs"]["colbench_lost"] == 1.0 and result["reward"] == 0.0
    assert result["action_ranges"] == [] and result[SAMPLED]  # sampled, and no token of it is trained
    # The episode ended at the failing turn: the context holds that turn and no reply to it.
    text = tokenizer.decode(result["observation_tokens"])
    assert text.count("<|im_start|>assistant\n") == turn and text.endswith(("Hi?", "Hm?")[turn - 1] + "<|im_end|>")


# The flags the docs and the adapter's docstring gave before OpenRLHF namespaced them (0.10): its parser refuses them.
OLD_FLAGS = {
    "--data.input_key": "--input_key",
    "--data.label_key": "--label_key",
    "--data.apply_chat_template": "--apply_chat_template",
    "--rollout.n_samples_per_prompt": "--n_samples_per_prompt",
}
QUESTION = "What should happen with an empty input?"


def documented_launch() -> tuple[dict[str, Any], list[str]]:
    """The launch docs/integrations.md shows: the env's options it exports, and train_ppo_ray's arguments."""
    words = shell_words(launch("openrlhf"))
    start = words.index("python")
    assert words[start : start + 3] == ["python", "-m", "openrlhf.cli.train_ppo_ray"], shlex.join(words)
    assert words[0] == "export" and words[1].startswith("COLBENCH_OPENRLHF=") and start == 2
    return json.loads(words[1].split("=", 1)[1]), words[start + 3 :]


def test_the_documented_launch_is_accepted_by_openrlhfs_own_parser() -> None:
    options, argv = documented_launch()
    args, parser = train_ppo_ray_args(argv)
    assert args.train.agent_func_path.endswith("/colbench_agent.py") and args.reward.remote_url == ["agent"]
    assert (args.data.input_key, args.data.label_key, args.data.apply_chat_template) == ("prompt", "task_id", True)
    assert args.algo.advantage.estimator == "group_norm" and args.rollout.n_samples_per_prompt == 8
    # every flag spelt in full (argparse would take an unambiguous abbreviation, which a later flag can make ambiguous)
    known = {flag for action in parser._actions for flag in action.option_strings}
    assert {word for word in argv if word.startswith("--")} <= known
    # the pieces agree: the env's tokenizer is the policy's, the data block writes the file the launch reads, for the
    # env's tasks and turn cap
    data = launch("openrlhf-data")
    assert options["tokenizer"] == args.actor.model_name_or_path and f'open("{args.data.prompt_dataset}"' in data
    assert f'prompt_rows("{options["tasks"]}", max_turns={options["max_turns"]})' in data


@pytest.mark.parametrize("new, old", OLD_FLAGS.items())
def test_openrlhfs_parser_refuses_an_unknown_flag(new: str, old: str) -> None:
    """The check above can fail: the launch with one of the old flat flags (or a made-up one) is refused."""
    _, argv = documented_launch()
    assert new in argv
    with pytest.raises(SystemExit) as exited:
        train_ppo_ray_args([old if word == new else word for word in argv])
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        train_ppo_ray_args([*argv, "--colbench.max_turns", "10"])


def test_the_documented_data_and_agent_file_play_an_episode(
    exported_model: Path, bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs -> OpenRLHF: the data block's JSONL, read and templated by OpenRLHF's own preprocess_data with the launch's
    --data flags; the agent file loaded by OpenRLHF's own loader; the episode played by its executor."""
    from datasets import load_dataset
    from openrlhf.datasets.prompts_dataset import preprocess_data
    from openrlhf.utils.agent import AgentExecutorBase
    from transformers import AutoTokenizer

    from colbench.integrations.openrlhf import AgentExecutor

    options, argv = documented_launch()
    args, _ = train_ppo_ray_args(argv)
    monkeypatch.chdir(tmp_path)
    data = launch("openrlhf-data")
    assert f'"{options["tasks"]}"' in data
    exec(data.replace(f'"{options["tasks"]}"', '"backend-sample"'), {})  # the docs' block, on the bundled split
    rows = load_dataset("json", data_files=args.data.prompt_dataset)["train"]  # as OpenRLHF reads a .jsonl
    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    task = bundled_tasks[2]
    row = next(row for row in rows if row["task_id"] == task.task_id)
    prompt, label = preprocess_data(
        row,
        input_key=args.data.input_key,
        label_key=args.data.label_key,
        apply_chat_template=tokenizer.apply_chat_template,
    )
    agent_file = tmp_path / Path(args.train.agent_func_path).name
    agent_file.write_text(launch("openrlhf-agent"))
    load = function("trainer/ray/vllm_engine.py", "_load_agent_executor", AgentExecutorBase=AgentExecutorBase)
    executor = load(str(agent_file))
    assert isinstance(executor, AgentExecutor) and label == task.task_id
    env = {k: v for k, v in options.items() if k != "simulator_options"}  # the docs' env options, run here:
    env |= {"tasks": "backend-sample", "tokenizer": str(exported_model), "simulator": "scripted", "sandbox": "bwrap"}
    monkeypatch.setenv("COLBENCH_OPENRLHF", json.dumps(env))
    answer = f"I WANT TO ANSWER:\n{task.ground_truth}"
    result = play(executor, tokenizer, prompt, label, [QUESTION, answer], args.data.max_len)
    assert result["reward"] == 1.0 and float(result["extra_logs"]["colbench_success"]) == 1.0
    tokens = result["observation_tokens"]
    acted = [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in result["action_ranges"]]
    assert acted == [QUESTION, answer] and trained_ids(result) == result[SAMPLED]


def test_episodes_however_they_end_batch_together_in_openrlhf(
    agent_config: None, exported_model: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answered, capped, cut by the length budget and lost episodes, each from the real executor, turned into
    OpenRLHF's experiences by its own code, merged into one batch and split again (OpenRLHF's micro-batching, then its
    balancing): every episode logs the same keys, or the split fails."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience, make_experience_batch, split_experience_batch
    from transformers import AutoTokenizer

    from colbench.env.core import TextEnv

    closed: list[int] = []
    aclose = TextEnv.aclose

    async def counted(env: TextEnv) -> None:
        closed.append(id(env))
        await aclose(env)

    monkeypatch.setattr(TextEnv, "aclose", counted)
    to_experience = method(
        "trainer/ppo_utils/samples_generator.py",
        "SamplesGenerator",
        "_process_response_into_experience",
        torch=torch,
        Experience=Experience,
    )
    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    task, wrong = bundled_tasks[2], ["Hi?", "Hm?", "def f(): pass"]
    first = run(tokenizer, task, [QUESTION, f"I WANT TO ANSWER:\n{task.ground_truth}"])
    prompt_length = first["action_ranges"][0][0]
    episodes = {
        "answered": first,
        "capped": run(tokenizer, bundled_tasks[0], wrong),
        # five tokens for the whole episode: the first turn is cut there, the human replies, and nothing is left
        "cut": run(tokenizer, task, [QUESTION, "never asked for"], max_length=prompt_length + 5),
    }
    with human_failing_at(2) as human:
        configure(monkeypatch, exported_model, **human)
        episodes["lost"] = run(tokenizer, bundled_tasks[0], wrong)
    cut = episodes["cut"]
    assert cut["truncated"] and len(cut["action_ranges"]) == 1 and cut["reward"] == 0.0
    batch = Experience.concat_experiences([to_experience(None, e, max_len=4096) for e in episodes.values()], 0)
    items = split_experience_batch(batch)  # a key only some episodes log: "Size of info[...] does not match"
    assert len(items) == 4 and all(set(item.info) == set(batch.info) for item in items)
    again = make_experience_batch(items)
    logs = {key: [float(v) for v in again.info[key]] for key in ("colbench_success", "colbench_lost")}
    assert logs == {"colbench_success": [1.0, 0.0, 0.0, 0.0], "colbench_lost": [0.0, 0.0, 0.0, 1.0]}
    assert [float(r) for r in again.rewards] == [1.0, 0.0, 0.0, 0.0]
    assert len(set(closed)) == len(episodes)  # every env closed, the cut one too


def test_a_prompt_written_for_another_turn_cap_is_refused(
    agent_config: None, exported_model: Path, bundled_tasks: list[Task]
) -> None:
    """The env is capped at 3 turns; a prompt that promises the agent 10 is refused before anything is generated."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    with pytest.raises(ConfigError, match=r"colbench.prompt_rows of the env's tasks and max_turns=3$") as refused:
        run(tokenizer, bundled_tasks[0], ["Hi?"], turns=10)
    assert "\n" not in str(refused.value)
