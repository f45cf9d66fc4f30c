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

Token in, token out: a learner turn whose text is a ``SampledText`` (:mod:`colbench.types.sampled`: the ids the
policy sampled, kept beside the action by whoever owns the policy, and by the env in its transcript) is not
re-tokenized: its tokens are its sampled ids, all under mask 1 (its end-of-turn token included only if the policy
emitted it; a turn cut at the token limit gets none, and the template's closing after it has mask 0). Only the
prompt's and the other side's text is tokenized. ``ChatTokens`` builds the same ids turn by turn, so a policy can
generate each turn from exactly the context it is trained on. An episode that ends with a learner turn ends at that
turn's end-of-turn token: what the template renders after it (ChatML's ``\n``) was never generated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from colbench.errors import ConfigError
from colbench.types.sampled import SampledText

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
    truncated: bool = False  # a learner turn cut at the token limit: it has no end-of-turn token of its own


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
    chat = ChatTokens(tokenizer, learner_role=learner_role, mask_end_of_turn=mask_end_of_turn, prefix=prefix)
    learner_seen = 0
    for message in messages:
        info = None
        if message.get("role") == learner_role:
            info = infos[learner_seen] if learner_seen < len(infos) else None
            learner_seen += 1
        chat.add(message, info)
    return chat.episode()


class ChatTokens:
    """A conversation's token ids built as it is played, so that a policy generates each turn from exactly the ids
    it will be trained on: ``generation_ids()`` is the conversation so far (each learner turn as sampled, the other
    side's messages and the template's headers tokenized) plus the header of the learner's next turn; ``add`` a
    message once it exists; ``episode()`` is what ``tokenize_chat`` returns for the same messages.

    Re-rendering the chat text and tokenizing it again at each turn would not do: the tokens of a text are not
    always the tokens that were sampled for it (``]`` then ``*`` comes back as ``]*``), and the policy would be
    trained on ids it never produced, from contexts it never saw.
    """

    def __init__(
        self, tokenizer: Any, *, learner_role: str = "assistant", mask_end_of_turn: bool = True, prefix: str = ""
    ) -> None:
        self.tokenizer, self.learner_role, self.mask_end_of_turn = tokenizer, learner_role, mask_end_of_turn
        self._special = set(getattr(tokenizer, "all_special_ids", ()) or ())
        self._messages: list[Message] = []
        self._rendered = ""
        self._ids: list[int] = []
        self._mask: list[int] = []
        self._turns: list[TurnSpan] = []
        self._stop = 0  # where the episode ends if it ends now: after the last learner turn's end-of-turn token
        self._extend(_encode(tokenizer, prefix), trained=False)

    @property
    def ids(self) -> tuple[int, ...]:
        """The conversation's ids so far."""
        return tuple(self._ids)

    def generation_ids(self) -> tuple[int, ...]:
        """The ids the learner generates its next turn from: the conversation so far and the next turn's header."""
        head = _render(self.tokenizer, self._messages, generation_prompt=True) if self._messages else ""
        return (*self._ids, *_encode(self.tokenizer, _after(self._rendered, head, len(self._messages))))

    def add(self, message: Message, info: Mapping[str, Any] | None = None) -> None:
        """Append ``message``; a learner message whose content is a ``SampledText`` keeps its sampled ids."""
        index, role, content = len(self._messages), message.get("role"), message.get("content")
        if not isinstance(content, str):
            raise ConfigError(f"tokenize_chat: message {index} ({role}) has no text content")
        full = _render(self.tokenizer, [*self._messages, message], generation_prompt=False)
        start = len(self._ids)
        if role != self.learner_role:
            self._extend(_encode(self.tokenizer, _after(self._rendered, full, index)), trained=False)
            self._turns.append(TurnSpan(index, str(role), start, len(self._ids), len(self._ids), False))
        else:
            self._add_learner(index, str(role), content, full, info)
        self._messages.append(message)
        self._rendered = full

    def episode(self) -> TokenizedEpisode:
        """The conversation as token ids with the learner's mask; when it ends with a learner turn, it ends at that
        turn's end-of-turn token (or its last sampled token, if it was cut at the token limit): what the template
        renders after it is not part of the episode."""
        ids, mask, turns = self._ids, self._mask, list(self._turns)
        if turns and turns[-1].trained:
            ids, mask = ids[: self._stop], mask[: self._stop]
            turns[-1] = replace(turns[-1], end=self._stop)
        return TokenizedEpisode(tuple(ids), tuple(mask), tuple(turns))

    def _add_learner(self, index: int, role: str, content: str, full: str, info: Mapping[str, Any] | None) -> None:
        head = _render(self.tokenizer, self._messages, generation_prompt=True) if self._messages else ""
        self._extend(_encode(self.tokenizer, _after(self._rendered, head, index)), trained=False)
        body = _after(head, full, index)
        where, text = _located(body, content, index)
        closing = _encode(self.tokenizer, body[where + len(text) :])
        eot = next((k for k, t in enumerate(closing) if t in self._special), None)
        turn_start = len(self._ids)
        truncated = False
        if isinstance(content, SampledText):
            # What the policy sampled, as sampled; the template's end-of-turn token is replaced by the one the
            # policy emitted, and a turn cut at the token limit gets none under the mask.
            truncated = content.truncated
            ids = content.token_ids
            emitted = not truncated and ids[-1] in self._special
            self._extend(ids[: len(ids) - emitted], trained=True)
            text_end = len(self._ids)
            self._extend(ids[len(ids) - emitted :], trained=self.mask_end_of_turn)
            self._stop = len(self._ids)
            self._extend(closing[eot + 1 :] if emitted and eot is not None else closing, trained=False)
        else:
            self._extend(_encode(self.tokenizer, body[:where]), trained=False)
            turn_start = len(self._ids)
            self._extend(_encode(self.tokenizer, text), trained=True)
            text_end = len(self._ids)
            stop = len(closing) if eot is None else eot + 1
            self._extend(closing[:stop], trained=self.mask_end_of_turn and eot is not None)
            self._stop = len(self._ids)
            self._extend(closing[stop:], trained=False)
        self._turns.append(TurnSpan(index, role, turn_start, len(self._ids), text_end, True, info, truncated))

    def _extend(self, ids: Sequence[int], *, trained: bool) -> None:
        self._ids.extend(ids)
        self._mask.extend([int(trained)] * len(ids))


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
