"""Token export with the learner's mask (colbench.env.tokens): on real episodes, with the embedded model's own tokenizer
and chat template (ChatML) and with the Llama 3, Gemma and Mistral templates on the same vocabulary, the masked
tokens decode to exactly the learner's turns, and nothing of the simulated human's is trained on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.core import Transcript
from colbench.env.tokens import TokenizedEpisode, tokenize_chat, tokenize_transcript
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task

LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' "
    "else message['role'] %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)
REWRITES_HISTORY = (  # keeps only the last assistant turn, as reasoning templates do with past thoughts
    "{% for message in messages %}{% if message['role'] != 'assistant' or loop.last %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<start_of_turn>", "<end_of_turn>"]
HUMAN = ["The input is a list of ints; keep it short.", "Return -1 when nothing matches."]


@pytest.fixture(scope="module")
def tokenizers(exported_model: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    made = {}
    for name, template in [("chatml", None), ("llama3", LLAMA3), ("gemma", GEMMA), ("mistral", MISTRAL)]:
        tokenizer = AutoTokenizer.from_pretrained(exported_model)
        tokenizer.add_special_tokens({"additional_special_tokens": SPECIALS})
        if template is not None:
            tokenizer.chat_template = template
        made[name] = tokenizer
    return made


@pytest.fixture(scope="module")
def transcript(bundled_tasks: list[Task], scorer: BackendScorer) -> Transcript:
    env = gym.make("ColBench-Backend-v1", tasks=bundled_tasks, scorer=scorer, simulator=ScriptedSimulator(HUMAN))
    env.reset(options={"task_id": bundled_tasks[2].task_id})
    env.step("  What type is the input?")  # leading spaces: templates that trim must still be cut right
    env.step("Anything for no match?\n\nAnd ties?")
    env.step(f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}")
    return env.transcript()


def learner_texts(tokenizer: Any, tokens: TokenizedEpisode) -> list[str]:
    return [tokenizer.decode(tokens.input_ids[t.start : t.text_end]) for t in tokens.learner_turns]


def masked_text(tokenizer: Any, tokens: TokenizedEpisode) -> str:
    kept = [i for i, m in zip(tokens.input_ids, tokens.agent_mask, strict=True) if m]
    return str(tokenizer.decode(kept, skip_special_tokens=True))


@pytest.mark.parametrize("template", ["chatml", "llama3", "gemma", "mistral"])
def test_masked_tokens_are_exactly_the_agents_turns(
    template: str, tokenizers: dict[str, Any], transcript: Transcript
) -> None:
    tokenizer = tokenizers[template]
    tokens = tokenize_transcript(tokenizer, transcript)
    agent = [m["content"] for m in transcript.messages if m["role"] == "assistant"]
    trim = template in ("llama3", "gemma")
    expected = [a.strip() for a in agent] if trim else agent
    assert learner_texts(tokenizer, tokens) == expected
    assert masked_text(tokenizer, tokens) == "".join(expected)
    for reply in HUMAN:  # the simulated human's words and the task prompt are never trained on
        assert reply not in masked_text(tokenizer, tokens)
        assert reply in tokenizer.decode(tokens.input_ids)
    assert "Python function" not in masked_text(tokenizer, tokens)
    # Piecewise tokenization renders the same text the template does, and each turn closes with a trained stop.
    rendered = tokenizer.apply_chat_template(list(transcript.messages), tokenize=False)
    assert tokenizer.decode(tokens.input_ids) == rendered
    for turn in tokens.learner_turns:
        closing = tokens.input_ids[turn.text_end : turn.end]
        assert closing and closing[0] in tokenizer.all_special_ids and tokens.agent_mask[turn.text_end] == 1
    assert len(tokens.input_ids) == len(tokens.agent_mask)


def test_turns_carry_the_step_infos(tokenizers: dict[str, Any], transcript: Transcript) -> None:
    tokens = tokenize_transcript(tokenizers["chatml"], transcript)
    infos = [t.info for t in tokens.learner_turns]
    assert [i["turn"] for i in infos] == [1, 2, 3]  # type: ignore[index]
    assert infos[-1]["termination"] == "answered" and infos[-1]["pass_rate"] == 1.0  # type: ignore[index]
    assert [t.role for t in tokens.turns] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert all(a.end <= b.start for a, b in zip(tokens.turns, tokens.turns[1:], strict=False))


def test_system_prompt_and_end_of_turn_option(tokenizers: dict[str, Any], transcript: Transcript) -> None:
    tokenizer = tokenizers["chatml"]
    with_system = tokenize_transcript(tokenizer, transcript, system_prompt="You are careful.")
    assert "You are careful." in tokenizer.decode(with_system.input_ids)
    assert with_system.turns[0].role == "system" and not with_system.turns[0].trained
    bare = tokenize_transcript(tokenizer, transcript, mask_end_of_turn=False)
    assert sum(bare.agent_mask) == sum(t.text_end - t.start for t in bare.learner_turns)


def test_human_env_trains_the_human(
    tokenizers: dict[str, Any], bundled_tasks: list[Task], scorer: BackendScorer
) -> None:
    env = gym.make("ColBench-Human-v0", tasks=bundled_tasks, agent="scripted:copycat", scorer=scorer)
    env.reset(seed=1)
    reply = "Return the sorted values, ties broken by first appearance."
    env.step(reply)
    tokenizer = tokenizers["chatml"]
    tokens = tokenize_transcript(tokenizer, env.transcript())
    assert learner_texts(tokenizer, tokens)[0] == reply
    assert "The assistant says:" not in masked_text(tokenizer, tokens)


def test_a_template_that_rewrites_history_is_refused(tokenizers: dict[str, Any], transcript: Transcript) -> None:
    tokenizer = tokenizers["chatml"]
    saved = tokenizer.chat_template
    tokenizer.chat_template = REWRITES_HISTORY
    try:
        with pytest.raises(ConfigError, match="rewrites earlier turns"):
            tokenize_transcript(tokenizer, transcript)
    finally:
        tokenizer.chat_template = saved
    with pytest.raises(ConfigError, match="no messages"):
        tokenize_chat(tokenizer, [])
    with pytest.raises(ConfigError, match="message 0"):
        tokenize_chat(tokenizer, [{"role": "user", "content": None}])  # type: ignore[typeddict-item]
