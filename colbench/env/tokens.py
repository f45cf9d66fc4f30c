"""An episode as token ids with the learner's mask, for policy-gradient and preference trainers.

The simulated human's tokens (and the task prompt, the system prompt, the chat template's headers) must never be
trained on; only the learner's own turns are. ``tokenize_transcript`` renders the episode with the tokenizer's
chat template and marks each token: 1 on the learner's turns (the ``assistant`` messages: the agent in the
collaboration envs, the human in ``ColBench-Human-v0``) and on the end-of-turn token that closes each (the model
must learn to stop), 0 on everything else.

The chat is tokenized piece by piece: the text before a learner turn (headers, the other side's message), then the
turn's text, then its closing. The learner's tokens are therefore exactly the tokens of what it wrote, as it would
have generated them after the header, and decoding them gives its turns back. This needs a template where each
rendered conversation starts with the rendering of the one before (true of ChatML, Llama 3, Gemma, Mistral and
most others); a template that rewrites earlier turns (one that drops past reasoning, say) is refused with the
message where it happens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from colbench.errors import ConfigError

if TYPE_CHECKING:
    from colbench.env.core import Transcript
    from colbench.types.chat import Message


@dataclass(frozen=True)
class TurnSpan:
    """Message ``index`` of the chat (``role`` as the template saw it) covers tokens ``[start, end)``: for another
    role's message, everything the template added since the message before; for a learner turn, its own text
    ``[start, text_end)`` and its closing ``[text_end, end)`` (the header before it belongs to no span).
    ``info`` is the ``info`` of the env step that took a learner turn (None for the other turns)."""

    index: int
    role: str
    start: int
    end: int
    text_end: int
    trained: bool
    info: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TokenizedEpisode:
    input_ids: tuple[int, ...]
    agent_mask: tuple[int, ...]  # 1 on the learner's tokens
    turns: tuple[TurnSpan, ...]

    @property
    def learner_turns(self) -> tuple[TurnSpan, ...]:
        return tuple(t for t in self.turns if t.trained)

    def __len__(self) -> int:
        return len(self.input_ids)


def tokenize_transcript(
    tokenizer: Any,
    transcript: Transcript,
    *,
    system_prompt: str | None = None,
    mask_end_of_turn: bool = True,
) -> TokenizedEpisode:
    """``transcript`` (``env.transcript()``, ``vector_env.finished(i)``) as token ids with the learner's mask;
    each learner turn carries its step's ``info``. ``system_prompt`` goes first when the policy was prompted with
    one. ``mask_end_of_turn``: also train on the special token that ends each learner turn."""
    messages: list[Message] = list(transcript.messages)
    if system_prompt is not None:
        messages.insert(0, {"role": "system", "content": system_prompt})
    return tokenize_chat(tokenizer, messages, infos=transcript.step_infos, mask_end_of_turn=mask_end_of_turn)


def tokenize_chat(
    tokenizer: Any,
    messages: Sequence[Message],
    *,
    learner_role: str = "assistant",
    infos: Sequence[Mapping[str, Any]] = (),
    mask_end_of_turn: bool = True,
    prefix: str = "",
) -> TokenizedEpisode:
    """``messages`` rendered by ``tokenizer``'s chat template, as token ids with a mask that is 1 on the
    ``learner_role`` messages; ``infos[k]`` is attached to the k-th learner message. ``prefix``: text put before
    the rendering, never trained on (a critic's view of the hidden answer, say)."""
    if not messages:
        raise ConfigError("tokenize_chat: no messages")
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    ids: list[int] = []
    mask: list[int] = []
    turns: list[TurnSpan] = []
    learner_seen = 0
    rendered = ""

    def add(text: str, trained: bool) -> None:
        pieces = _encode(tokenizer, text)
        ids.extend(pieces)
        mask.extend([int(trained)] * len(pieces))

    add(prefix, False)

    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, str):
            raise ConfigError(f"tokenize_chat: message {index} ({role}) has no text content")
        full = _render(tokenizer, messages[: index + 1], generation_prompt=False)
        start = len(ids)
        if role != learner_role:
            add(_after(rendered, full, index), False)
            turns.append(TurnSpan(index, str(role), start, len(ids), len(ids), False))
            rendered = full
            continue
        head = _render(tokenizer, messages[:index], generation_prompt=True) if index else ""
        add(_after(rendered, head, index), False)
        body = _after(head, full, index)
        where, text = _located(body, content, index)
        add(body[:where], False)
        turn_start = len(ids)
        add(text, True)
        text_end = len(ids)
        closing = _encode(tokenizer, body[where + len(text) :])
        stop = next((k + 1 for k, t in enumerate(closing) if t in special), 0) if mask_end_of_turn else 0
        ids.extend(closing)
        mask.extend([1] * stop + [0] * (len(closing) - stop))
        info = infos[learner_seen] if learner_seen < len(infos) else None
        learner_seen += 1
        turns.append(TurnSpan(index, str(role), turn_start, len(ids), text_end, True, info))
        rendered = full
    return TokenizedEpisode(tuple(ids), tuple(mask), tuple(turns))


def feedback_text(tokenizer: Any, messages: Sequence[Message], action: str, reply: str) -> str:
    """The text a trainer that appends text after the policy's generated turn (OpenRLHF's agents) must append when
    the other side replies: the rest of the turn's closing after its end-of-turn token (which the policy generated),
    the reply as the chat template renders it, and the header of the policy's next turn. ``messages``: the chat
    before ``action``."""
    head = _render(tokenizer, messages, generation_prompt=True)
    with_action = [*messages, {"role": "assistant", "content": action}]
    full = _render(tokenizer, with_action, generation_prompt=False)
    body = _after(head, full, len(messages))
    where, text = _located(body, action, len(messages))
    closing = body[where + len(text) :]
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    stop = next((t for t in _encode(tokenizer, closing) if t in special), None)
    if stop is not None:
        marker = str(tokenizer.convert_ids_to_tokens(stop))
        closing = closing[closing.find(marker) + len(marker) :]
    following = _render(tokenizer, [*with_action, {"role": "user", "content": reply}], generation_prompt=True)
    return closing + _after(full, following, len(with_action))


def _located(body: str, content: str, index: int) -> tuple[int, str]:
    """Where a learner turn's text sits in its rendering, and the text as rendered (some templates trim it)."""
    text = content if content in body else content.strip()
    where = body.find(text)
    if where < 0:
        raise ConfigError(
            f"tokenize_chat: the chat template rewrites message {index}: its text is not in the rendering, so its "
            "tokens cannot be masked"
        )
    return where, text


def _render(tokenizer: Any, messages: Sequence[Message], *, generation_prompt: bool) -> str:
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)
    if not isinstance(text, str):
        raise ConfigError(f"tokenize_chat: the tokenizer's chat template returned {type(text).__name__}, not text")
    return text


def _after(prefix: str, text: str, index: int) -> str:
    if not text.startswith(prefix):
        raise ConfigError(
            f"tokenize_chat: the chat template renders the conversation up to message {index} differently from "
            "the conversation before it (it rewrites earlier turns), so turns cannot be cut into tokens"
        )
    return text[len(prefix) :]


def _encode(tokenizer: Any, text: str) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
