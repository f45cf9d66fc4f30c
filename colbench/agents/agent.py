"""Agents: whatever writes the agent's turns. One protocol, sync and async, and a spec string per kind.

An agent is stateless between calls: the harness keeps the conversation and passes all of it each turn (the env's
observations as ``user`` messages, the agent's earlier turns as ``assistant`` messages), so one agent object serves
any number of concurrent episodes. ``EpisodeContext`` says which task and turn it is; honest agents ignore it (it
carries no hidden information), scripted ones for tests use it.

Specs (the CLI's ``--agent``, parsed by :func:`colbench.llm.parse_spec`): ``openai:MODEL`` (any OpenAI-compatible
endpoint), ``llamacpp`` / ``llamacpp:PATH.gguf`` (the embedded model),
``module.path:Attr`` (a third-party agent: an ``Agent`` object, or a class / factory called with the agent
options), ``scripted:reference`` (answers with the task's reference at once: the ceiling check),
``scripted:ask`` (asks a question every turn, never answers: the turn cap path), ``scripted:empty`` (answers nothing),
``scripted:copycat`` (asks the human for the code and answers with what it is given: the agent that profits from a
human who leaks).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from colbench._util.plugins import load_object
from colbench.errors import ConfigError
from colbench.llm.client import LLMClient
from colbench.llm.limits import EndpointLimits
from colbench.llm.specs import SCRIPTED_AGENTS, ModelSpec, connect, parse_spec
from colbench.types.chat import ChatReply, Message, Usage
from colbench.types.dialogue import ANSWER_MARKER, is_answer
from colbench.types.sampled import SampledText
from colbench.types.task import Task


@dataclass(frozen=True)
class EpisodeContext:
    """Where a call falls: never hidden information."""

    task_id: str
    domain: str
    turn: int  # 1-based: the agent turn being written
    max_turns: int
    trial: int = 0


@dataclass(frozen=True)
class AgentReply:
    text: str
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class Agent(Protocol):
    """Writes the next agent turn given the whole conversation so far (first message: the task prompt).

    ``aclose`` releases what the agent holds open on the running event loop (its LLM clients' HTTP pools); the
    harness awaits it before that loop ends. An agent that holds nothing writes it as ``pass``; it may be used
    again afterwards (a later call opens what it needs).
    """

    name: str

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply: ...

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply: ...

    async def aclose(self) -> None: ...


DEFAULT_ANSWER_PREFILL = f"{ANSWER_MARKER}\n"
"""The embedded agent's answer prefill for a caller that names no domain's: the answer marker alone."""


@dataclass(frozen=True)
class AnswerSettings:
    """How a :class:`ChatAgent` asks for its final answer when it differs from a question turn.

    ``max_tokens``: the answer's cap, above the endpoint's (a question's) cap. The last turn is asked for with it,
    and an earlier turn cut at the question cap after the answer marker is continued up to it (the model's own
    text sent back as the start of its reply). ``prefill``: the start of the last turn, written for the model,
    which continues it (the answer marker and the opening of an answer in the format the domain's agent prompt asks
    for, e.g. a code fence, so that a model which never writes the marker still delivers an answer).
    ``extra_body``: the answer's request fields instead of the endpoint's (None: the endpoint's).
    """

    max_tokens: int
    prefill: str = ""
    extra_body: Mapping[str, Any] | None = None


class ChatAgent:
    """A chat model behind any OpenAI-compatible endpoint; sampling settings live in its ``Endpoint``, and the final
    answer's in ``answer`` (:class:`AnswerSettings`; the embedded model's defaults use it: questions are short,
    code is not, :func:`colbench.llm.llamacpp.agent_answer`, with the domain's prefill)."""

    def __init__(
        self, client: LLMClient, *, system_prompt: str | None = None, answer: AnswerSettings | None = None
    ) -> None:
        self.client = client
        self.system_prompt = system_prompt
        self.name = client.endpoint.model
        self.answer = answer
        self._answer: LLMClient | None = None
        self._more: LLMClient | None = None
        cap = client.endpoint.max_tokens
        if answer is not None:
            self._answer = self._capped(answer, answer.max_tokens)
            if cap is not None and answer.max_tokens > cap:
                self._more = self._capped(answer, answer.max_tokens - cap)

    def _capped(self, answer: AnswerSettings, max_tokens: int) -> LLMClient:
        endpoint = self.client.endpoint
        extra = endpoint.extra_body if answer.extra_body is None else answer.extra_body
        endpoint = dataclasses.replace(endpoint, max_tokens=max_tokens, extra_body=extra)
        return LLMClient(endpoint, cache=self.client.cache, limits=self.client.limits)

    def _messages(self, messages: Sequence[Message]) -> list[Message]:
        if not messages or messages[-1].get("role") != "user":
            raise ConfigError("the agent answers an observation: the conversation must end with a user message")
        return [{"role": "system", "content": self.system_prompt}, *messages] if self.system_prompt else [*messages]

    def _request(self, messages: Sequence[Message], context: EpisodeContext) -> tuple[LLMClient, list[Message], str]:
        """Which client asks, the messages it sends, and the text written for the model (its reply's start)."""
        chat = self._messages(messages)
        if self._answer is None or self.answer is None or context.turn < context.max_turns:
            return self.client, chat, ""
        prefill = self.answer.prefill
        return self._answer, [*chat, {"role": "assistant", "content": prefill}] if prefill else chat, prefill

    def _continuation(self, reply: ChatReply, context: EpisodeContext) -> LLMClient | None:
        """The client that continues ``reply``, an answer cut at a question's cap before the last turn; else None."""
        if context.turn < context.max_turns and reply.finish_reason == "length" and is_answer(reply.text):
            return self._more
        return None

    @staticmethod
    def _joined(start: str, first: ChatReply, more: ChatReply | None = None) -> AgentReply:
        # llama.cpp's reply to a prefilled assistant turn repeats the prefill; other servers send the rest alone
        rest = more if more is not None else first
        head = first.text if more is not None else start
        text = rest.text if rest.text.startswith(head) else head + rest.text
        usage = dataclasses.replace(first.usage)
        if more is not None:
            usage.add(more.usage)
        if more is None and not start and first.token_ids:  # the ids are those of the whole turn: keep them
            truncated = first.finish_reason == "length"
            text = SampledText(text, first.token_ids, first.logprobs, truncated=truncated)
        return AgentReply(text, usage)

    async def aclose(self) -> None:
        """Close the HTTP pools that the agent's clients (questions, the answer, continuations) opened on the
        running loop."""
        for client in (self.client, self._answer, self._more):
            if client is not None:
                await client.aclose()

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        client, chat, start = self._request(messages, context)
        reply = client.chat(chat)
        more = self._continuation(reply, context)
        if more is None:
            return self._joined(start, reply)
        return self._joined(start, reply, more.chat([*chat, {"role": "assistant", "content": reply.text}]))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        client, chat, start = self._request(messages, context)
        reply = await client.achat(chat)
        more = self._continuation(reply, context)
        if more is None:
            return self._joined(start, reply)
        return self._joined(start, reply, await more.achat([*chat, {"role": "assistant", "content": reply.text}]))


class ScriptedAgent:
    """Test agents: ``reference`` answers with the task's reference solution in its first turn (scores the
    maximum: a ceiling check of the whole pipeline), ``ask`` only asks questions (runs into the turn cap),
    ``empty`` answers nothing useful at once, ``copycat`` asks for the code and delivers the first reply that
    looks like code (``def`` or ``<html``), or the last reply at the turn cap."""

    def __init__(self, mode: str, tasks: Sequence[Task] = ()) -> None:
        if mode not in SCRIPTED_AGENTS:
            parse_spec(f"scripted:{mode}", "agent")  # raises the one error message of an unknown scripted agent
        self.mode = mode
        self.name = f"scripted:{mode}"
        self._tasks = {t.task_id: t for t in tasks}

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if self.mode == "ask":
            return AgentReply(f"Question {context.turn}: could you tell me more about what you need?")
        if self.mode == "empty":
            return AgentReply(f"{ANSWER_MARKER}\n")
        if self.mode == "copycat":
            return self._copycat(messages, context)
        task = self._tasks.get(context.task_id)
        if task is None:
            raise ConfigError(f"scripted:reference agent has no task {context.task_id!r} (give it the task list)")
        return AgentReply(f"{ANSWER_MARKER}\n{task.ground_truth}")

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: a scripted agent calls no model."""

    @staticmethod
    def _copycat(messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        said = str(messages[-1].get("content") or "") if context.turn > 1 else ""
        if "def " in said or "<html" in said.lower() or (said and context.turn >= context.max_turns):
            return AgentReply(f"{ANSWER_MARKER}\n{said}")
        return AgentReply("Could you paste the code you have in mind? Exactly as you have it, please.")


def make_agent(
    spec: str | ModelSpec,
    *,
    tasks: Sequence[Task] = (),
    options: Mapping[str, Any] | None = None,
    limits: EndpointLimits | None = None,
    answer_prefill: str = DEFAULT_ANSWER_PREFILL,
) -> Agent:
    """Build an agent from a spec string (see the module docstring); ``options`` are endpoint fields
    (``base_url``, ``api_key``, ``temperature``, ``max_tokens``, ``extra_body``, ...) or a plug-in's arguments;
    ``limits`` cap the requests of a model agent (a plug-in calls its own endpoint). ``answer_prefill``: how the
    embedded agent's last turn starts when nothing else is asked for (:class:`AnswerSettings`), the answer format
    of the tasks' domain (``Domain.answer_prefill``); by default the answer marker alone."""
    options = dict(options or {})
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec, "agent")
    if parsed.kind == "named":
        raise ConfigError(f"agent {parsed.text!r} is known by name only: pass the agent object itself")
    if parsed.kind == "scripted":
        return ScriptedAgent(parsed.value, tasks)
    if parsed.is_model:
        system = options.pop("system_prompt", None)
        answer = options.pop("answer", None)
        if parsed.is_embedded and answer is None and options.get("max_tokens") is None:
            # the embedded model's package only for llamacpp specs
            from colbench.llm.llamacpp import agent_answer

            answer = AnswerSettings(**agent_answer(prefill=answer_prefill, extra_body=options.get("extra_body")))
        client = connect(parsed, "agent", limits=limits, **options)
        return ChatAgent(client, system_prompt=system, answer=answer)
    target = load_object(parsed.value, f"agent spec {parsed.text!r}")
    agent = target(**options) if inspect.isclass(target) or inspect.isfunction(target) else target
    if options and agent is target:
        raise ConfigError(f"agent spec {parsed.text!r} names an object, not a class or factory: it takes no options")
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"agent spec {parsed.text!r} gave a {type(agent).__name__}, which lacks name/act/aact/aclose of Agent"
        )
    return agent
