"""The simulated human: strategies behind one protocol.

The env asks a :class:`Simulator` for the human's answer to the agent's latest turn. :class:`ChatSimulator` shows
a chat model (through a ready :class:`~colbench.llm.LLMClient`, which owns caching and rate limits) the domain's
system prompt with the task's hidden information, and the dialogue as real chat messages (agent turns are ``user``,
earlier human turns ``assistant``), so the model continues the conversation as the human instead of completing a
flattened transcript. :class:`ScriptedSimulator` serves tests and offline env checks. Each domain says what its
human becomes (``Domain.chat_simulator``, built by :func:`colbench.env.simulators.make_simulator`): what the human
is shown differs, the protocol does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from colbench.errors import ConfigError
from colbench.llm.client import LLMClient
from colbench.types.chat import ChatReply, Usage
from colbench.types.dialogue import Turn
from colbench.types.task import Task

DEFAULT_SCRIPTED_REPLY = "I don't know."


@dataclass(frozen=True)
class SimReply:
    text: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False


@runtime_checkable
class Simulator(Protocol):
    """Answers the agent's last turn as the human who knows ``task.hidden_information``.

    The frontend env also passes ``reference_image``, the PNG of the page the human wants (the agent's pages are
    on the agent turns, ``Turn.image``); text simulators ignore both. ``aclose`` releases what the simulator holds
    open on the running event loop (every LLM client's HTTP pool); an env awaits it in its own ``aclose``, and the
    simulator may be used again afterwards.
    """

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply: ...

    async def areply(
        self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None
    ) -> SimReply: ...

    async def aclose(self) -> None: ...


def truncate(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars``, at the last word boundary when one is not too far back."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip()


class ChatSimulator:
    """A chat model playing the human. ``system_prompt(task)`` is the domain's instructions; replies are cut to
    ``max_chars`` (the model's full text is what the client caches, so one cache serves any cap)."""

    def __init__(self, client: LLMClient, system_prompt: Callable[[Task], str], *, max_chars: int = 400) -> None:
        if max_chars < 1:
            raise ConfigError(f"max_chars must be >= 1, got {max_chars}")
        self.client = client
        self.system_prompt = system_prompt
        self.max_chars = max_chars

    def messages(
        self, task: Task, dialogue: Sequence[Turn], reference_image: bytes | None = None
    ) -> list[dict[str, Any]]:
        """The chat request for the human's next reply (subclasses show the model other things)."""
        check_ends_with_agent(dialogue)
        chat: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt(task)}]
        chat += [{"role": "user" if t.role == "agent" else "assistant", "content": t.text} for t in dialogue]
        return chat

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        return self._reply(self.client.chat(self.messages(task, dialogue, reference_image)))

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        return self._reply(await self.client.achat(self.messages(task, dialogue, reference_image)))

    def _reply(self, answer: ChatReply) -> SimReply:
        return SimReply(truncate(answer.text, self.max_chars), answer.usage, cached=answer.cached)

    async def aclose(self) -> None:
        """Close the HTTP pool the client opened on the running loop."""
        await self.client.aclose()


def check_ends_with_agent(dialogue: Sequence[Turn]) -> None:
    if not dialogue or dialogue[-1].role != "agent":
        raise ConfigError("the simulator answers the agent: the dialogue must end with an agent turn")


class ScriptedSimulator:
    """A human with canned answers, for tests and offline runs.

    With a list, the n-th human reply of an episode is ``replies[n]`` (counted from the human turns already in
    the dialogue, so one instance serves many episodes, in any order or concurrently); past the end the last
    reply repeats; an empty list always says "I don't know.". With a callable, it is asked each time.
    """

    def __init__(self, replies: Sequence[str] | Callable[[Task, Sequence[Turn]], str] = ()) -> None:
        if isinstance(replies, str):
            raise ConfigError("ScriptedSimulator takes a list of replies or a callable, not a single string")
        self._replies = replies

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        if callable(self._replies):
            return SimReply(self._replies(task, dialogue))
        if not self._replies:
            return SimReply(DEFAULT_SCRIPTED_REPLY)
        answered = sum(1 for turn in dialogue if turn.role == "human")
        return SimReply(self._replies[min(answered, len(self._replies) - 1)])

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        return self.reply(task, dialogue, reference_image=reference_image)

    async def aclose(self) -> None:
        """Nothing to close: a scripted human calls no model."""
