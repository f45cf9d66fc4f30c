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
from colbench.env.tokens import ChatTokens, TokenizedEpisode, tokenize_chat, tokenize_transcript
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task
from colbench.types.sampled import SampledText

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
    # Piecewise tokenization renders the same text the template does, up to the last turn's end-of-turn token
    # (what the template adds after it, ChatML's newline, was never generated), and each turn closes with a
    # trained stop.
    rendered = tokenizer.apply_chat_template(list(transcript.messages), tokenize=False)
    decoded = tokenizer.decode(tokens.input_ids)
    assert rendered.startswith(decoded) and not rendered[len(decoded) :].strip()
    assert tokens.input_ids[-1] in tokenizer.all_special_ids and tokens.agent_mask[-1] == 1
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


# -- token in, token out: the learner's turns as the policy sampled them ------------------------------------------
DRIFT = "x = [1]*3"  # SmolLM2 tokenizes "]*" as one token; a policy may sample "]" then "*"


def drifted_ids(tokenizer: Any, text: str) -> list[int]:
    """``text``'s ids with every ``]*`` token split into ``]`` and ``*``: ids a policy can sample that decode to the
    text but are not its canonical tokenization."""
    joined = tokenizer.convert_tokens_to_ids("]*")
    split = [tokenizer.convert_tokens_to_ids("]"), tokenizer.convert_tokens_to_ids("*")]
    ids: list[int] = []
    for token in tokenizer(text, add_special_tokens=False)["input_ids"]:
        ids.extend(split if token == joined else [token])
    return ids


@pytest.fixture(scope="module")
def sampled_transcript(
    tokenizers: dict[str, Any], bundled_tasks: list[Task], scorer: BackendScorer
) -> tuple[Transcript, list[SampledText]]:
    """An episode played through gym.make's wrappers with sampled actions: a drifted turn, a turn cut at the token
    limit, and an answer that ends with the end-of-turn token the policy emitted."""
    tokenizer = tokenizers["chatml"]
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    task = bundled_tasks[2]
    answer = f"I WANT TO ANSWER:\n{task.ground_truth}"
    actions = [
        SampledText(DRIFT, [*drifted_ids(tokenizer, DRIFT), eot], [-0.5] * 8, entropy=2.0),
        SampledText("Any ties", tokenizer("Any ties", add_special_tokens=False)["input_ids"], truncated=True),
        SampledText(answer, [*tokenizer(answer, add_special_tokens=False)["input_ids"], eot]),
    ]
    env = gym.make("ColBench-Backend-v1", tasks=bundled_tasks, scorer=scorer, simulator=ScriptedSimulator(HUMAN))
    env.reset(options={"task_id": task.task_id})
    for action in actions:
        env.step(action)
    return env.transcript(), actions


def test_sampled_ids_are_trained_as_sampled(
    tokenizers: dict[str, Any], sampled_transcript: tuple[Transcript, list[SampledText]]
) -> None:
    tokenizer = tokenizers["chatml"]
    transcript, actions = sampled_transcript
    kept = [m["content"] for m in transcript.messages if m["role"] == "assistant"]
    assert [k.token_ids for k in kept] == [a.token_ids for a in actions]  # the env's transcript keeps the ids
    assert drifted_ids(tokenizer, DRIFT) != tokenizer(DRIFT, add_special_tokens=False)["input_ids"]
    tokens = tokenize_transcript(tokenizer, transcript)
    first = tokens.learner_turns[0]
    # The drifted turn comes back exactly as sampled, its end-of-turn token included, all under mask 1.
    assert tokens.input_ids[first.start : first.start + 8] == actions[0].token_ids
    assert tokens.agent_mask[first.start : first.start + 8] == (1,) * 8
    assert tokenizer.decode(tokens.input_ids[first.start : first.text_end]) == DRIFT
    # The human's text and the template's newline after <|im_end|> are context, never trained.
    assert tokens.agent_mask[first.start + 8] == 0


def test_a_truncated_turn_gets_no_invented_end_of_turn(
    tokenizers: dict[str, Any], sampled_transcript: tuple[Transcript, list[SampledText]]
) -> None:
    tokenizer = tokenizers["chatml"]
    transcript, actions = sampled_transcript
    tokens = tokenize_transcript(tokenizer, transcript)
    cut = tokens.learner_turns[1]
    n = len(actions[1].token_ids)
    assert cut.truncated and not tokens.learner_turns[0].truncated
    assert tokens.input_ids[cut.start : cut.start + n] == actions[1].token_ids
    assert cut.text_end == cut.start + n and tokens.agent_mask[cut.start : cut.text_end] == (1,) * n
    closing = tokens.input_ids[cut.text_end : cut.end]  # the template closes the turn, outside the loss
    assert closing[0] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert set(tokens.agent_mask[cut.text_end : cut.end]) == {0}
    assert sum(tokens.agent_mask) == sum(len(a.token_ids) for a in actions)


def test_an_episode_ends_at_the_last_end_of_turn_token(
    tokenizers: dict[str, Any], sampled_transcript: tuple[Transcript, list[SampledText]], transcript: Transcript
) -> None:
    tokenizer = tokenizers["chatml"]
    sampled = tokenize_transcript(tokenizer, sampled_transcript[0])
    plain = tokenize_transcript(tokenizer, transcript)  # re-tokenized text: the same end rule
    for tokens in (sampled, plain):
        assert tokens.input_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>") and tokens.agent_mask[-1] == 1
        assert tokens.learner_turns[-1].end == len(tokens)
    # A last turn cut at the token limit ends the episode at its last sampled token.
    cut = SampledText("def f(", tokenizer("def f(", add_special_tokens=False)["input_ids"], truncated=True)
    tokens = tokenize_chat(tokenizer, [{"role": "user", "content": "Write f."}, {"role": "assistant", "content": cut}])
    assert tokens.input_ids[-len(cut.token_ids) :] == cut.token_ids and tokens.agent_mask[-1] == 1


def test_the_builder_generates_from_the_ids_it_trains_on(
    tokenizers: dict[str, Any], sampled_transcript: tuple[Transcript, list[SampledText]]
) -> None:
    tokenizer = tokenizers["chatml"]
    transcript = sampled_transcript[0]
    chat = ChatTokens(tokenizer)
    contexts = []
    for message in transcript.messages:
        if message["role"] == "assistant":
            contexts.append(chat.generation_ids())
        chat.add(message)
    tokens = tokenize_transcript(tokenizer, transcript)
    built = chat.episode()
    assert (built.input_ids, built.agent_mask) == (tokens.input_ids, tokens.agent_mask)
    for context, turn in zip(contexts, tokens.learner_turns, strict=True):
        assert context == tokens.input_ids[: turn.start]  # each turn was generated from exactly its prefix
    # A re-render of the chat text drifts: the first turn's "]" "*" come back as "]*".
    rendered = tokenizer.apply_chat_template(list(transcript.messages[:3]), tokenize=False, add_generation_prompt=True)
    retokenized = tuple(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    assert tokenizer.decode(retokenized) == tokenizer.decode(contexts[1]) and retokenized != contexts[1]


def test_sampled_text_survives_pickling_and_run_records() -> None:
    import pickle

    from colbench.runs import EpisodeRecord
    from colbench.types.sampled import turn_record, turn_text

    sampled = SampledText("ok", [3, 2], [-0.1, -0.2], truncated=False, entropy=0.5)
    back = pickle.loads(pickle.dumps(sampled))
    assert isinstance(back, SampledText) and back.as_record() == sampled.as_record() and back == "ok"
    dialogue = {"role": "agent", "text": "ok", **turn_record(back)}
    record = EpisodeRecord.model_validate(
        {"task_id": "t", "trial": 0, "status": "ok", "reward": 1.0, "success": True, "dialogue": [dialogue]}
    )
    read = EpisodeRecord.model_validate_json(record.line())
    assert read.dialogue is not None
    again = turn_text(read.dialogue[0])
    assert isinstance(again, SampledText) and again.token_ids == (3, 2) and again.logprobs == (-0.1, -0.2)
    assert turn_text({"text": "plain"}) == "plain" and turn_record("plain") == {}
    with pytest.raises(ConfigError, match="logprobs"):
        SampledText("x", [1, 2], [0.0])
    with pytest.raises(ConfigError, match="malformed"):
        turn_text({"text": "x", "sampled": {"ids": [1]}})
