"""OpenRLHF: the real MultiTurnAgentExecutor (openrlhf 0.11.2) plays ColBench episodes through the colbench agent,
with a fake generation engine standing in for vLLM (the engine is not what is tested): rewards, the human's reply
appended in the chat template's markup, and the policy's tokens alone marked as actions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from failing_human import FAILING_TURNS, human_failing_at

pytest.importorskip("openrlhf.utils.agent")

from colbench.errors import ConfigError
from colbench.tasks import Task


class FakeEngine:
    """What the executor calls (OpenRLHF's rollout actor, vLLM underneath): the next scripted turn as tokens."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, list(replies)

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        text = self.replies.pop(0)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        out = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def configure(monkeypatch: pytest.MonkeyPatch, model: Path, **options: Any) -> None:
    config = {"tasks": "backend-sample", "max_turns": 3, "tokenizer": str(model), "sandbox": "bwrap"}
    monkeypatch.setenv("COLBENCH_OPENRLHF", json.dumps(config | {"simulator": "scripted"} | options))


@pytest.fixture
def agent_config(exported_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, exported_model)


def run(tokenizer: Any, task: Task, replies: list[str]) -> dict[str, Any]:
    from colbench.env.domain import get_domain
    from colbench.integrations.openrlhf import AgentExecutor

    first = get_domain("backend").agent_prompt(task, 3)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": first}], tokenize=False, add_generation_prompt=True
    )
    engine = FakeEngine(tokenizer, replies)
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    return asyncio.run(AgentExecutor().execute(prompt, task.task_id, params, 4096, tokenizer, engine))


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
    assert result["reward"] == 0.0 and len(result["action_ranges"]) == 3


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
    assert result["action_ranges"] == []  # no token of it is trained
    # The episode ended at the failing turn: the context holds that turn and no reply to it.
    text = tokenizer.decode(result["observation_tokens"])
    assert text.count("<|im_start|>assistant\n") == turn and text.endswith(("Hi?", "Hm?")[turn - 1] + "<|im_end|>")
