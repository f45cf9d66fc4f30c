"""Agents: the chat agent through the real openai client and a stub server, scripted agents, plug-ins by spec."""

from __future__ import annotations

import asyncio

import pytest
from openai_stub import StubOpenAIServer

from colbench.agents.agent import Agent, ChatAgent, EpisodeContext, ScriptedAgent, make_agent
from colbench.errors import ConfigError
from colbench.tasks import Task
from colbench.types.sampled import SampledText, turn_record, turn_text

CTX = EpisodeContext(task_id="t1", domain="backend", turn=2, max_turns=10)
TASK = Task(
    "t1",
    "backend",
    "Add two numbers. def add(a, b):",
    "def add(a, b):\n    return a + b\n",
    "",
    (("test1", "add(1, 2)"),),
)


def test_chat_agent_sends_the_conversation_and_sampling_settings() -> None:
    with StubOpenAIServer(default=lambda request: "What types are a and b?") as server:
        agent = make_agent(
            "openai:policy",
            options={
                "base_url": server.base_url,
                "api_key": "k",
                "temperature": 0.7,
                "max_tokens": 64,
                "extra_body": {"top_k": 5},
                "system_prompt": "Be brief.",
            },
        )
        assert isinstance(agent, ChatAgent) and isinstance(agent, Agent) and agent.name == "policy"
        conversation = [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "q?"},
            {"role": "user", "content": "a."},
        ]
        reply = agent.act(conversation, CTX)
        assert reply.text == "What types are a and b?" and reply.usage.calls == 1
        again = asyncio.run(agent.aact(conversation, CTX))
        assert again.text == reply.text
    request = server.requests[0]
    assert request["messages"] == [{"role": "system", "content": "Be brief."}, *conversation]
    assert request["temperature"] == 0.7 and request["max_tokens"] == 64 and request["top_k"] == 5
    with pytest.raises(ConfigError, match="end with a user message"):
        agent.act(conversation[:2], CTX)


def test_scripted_agents() -> None:
    reference = make_agent("scripted:reference", tasks=[TASK])
    assert reference.act([], CTX).text == "I WANT TO ANSWER:\n" + TASK.ground_truth
    assert "Question 2" in make_agent("scripted:ask").act([], CTX).text
    assert make_agent("scripted:empty").act([], CTX).text.strip() == "I WANT TO ANSWER:"
    with pytest.raises(ConfigError, match="no task 't9'"):
        ScriptedAgent("reference").act([], EpisodeContext("t9", "backend", 1, 10))
    with pytest.raises(ConfigError, match="unknown scripted agent"):
        make_agent("scripted:genius")


def test_plugins_by_module_path() -> None:
    built = make_agent("plugins.echo_agent:EchoAgent", options={"prefix": "hi"})
    assert built.name == "echo-hi" and built.act([{"role": "user", "content": "hello"}], CTX).text == "hi 2: hello"
    assert make_agent("plugins.echo_agent:INSTANCE").name == "echo-ready"


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("plugins.nowhere:Agent", None, "cannot import module"),
        ("plugins.echo_agent:Missing", None, "has no attribute"),
        ("plugins.echo_agent:NOT_AN_AGENT", None, "lacks name/act/aact"),
        ("plugins.echo_agent:INSTANCE", {"prefix": "x"}, "takes no options"),
        ("gpt-4o", None, "bad agent spec"),
        ("openai:", None, "bad agent spec"),
    ],
)
def test_bad_agent_specs_are_one_line_errors(spec: str, options: dict[str, str] | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        make_agent(spec, options=options)
    assert "\n" not in str(caught.value)


def test_agents_close_every_client_they_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat agent closes its question client and its answer's clients; a scripted agent holds nothing."""
    from colbench.agents.agent import AnswerSettings
    from colbench.llm.client import LLMClient

    closed: list[LLMClient] = []

    async def spy(self: LLMClient) -> None:
        closed.append(self)

    monkeypatch.setattr(LLMClient, "aclose", spy)
    agent = make_agent(
        "openai:policy",
        options={"base_url": "http://127.0.0.1:9/v1", "api_key": "k", "max_tokens": 100},
    )
    assert isinstance(agent, ChatAgent)
    answering = ChatAgent(agent.client, answer=AnswerSettings(max_tokens=300))  # an answer client and a continuer
    asyncio.run(answering.aclose())
    assert [id(c) for c in closed] == [id(answering.client), id(answering._answer), id(answering._more)]
    assert len({id(c) for c in closed}) == 3
    asyncio.run(make_agent("scripted:ask").aclose())


def test_a_plugin_agent_must_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """aclose is part of the Agent protocol: a plug-in object without it is refused, naming what it lacks."""
    import plugins.echo_agent as echo

    class Unclosable:
        name = "unclosable"

        def act(self, messages: object, context: object) -> None: ...

        async def aact(self, messages: object, context: object) -> None: ...

    assert isinstance(echo.INSTANCE, Agent)
    monkeypatch.setattr(echo, "UNCLOSABLE", Unclosable(), raising=False)
    with pytest.raises(ConfigError, match="lacks name/act/aact/aclose"):
        make_agent("plugins.echo_agent:UNCLOSABLE")


def test_a_chat_agent_keeps_the_token_ids_its_endpoint_says_it_sampled() -> None:
    """An endpoint that returns the sampled ids (vLLM's ``return_token_ids``) and their log-probs: the agent's turn
    is a ``SampledText`` with exactly those (cut at the token limit: truncated); without ids, or with malformed ones,
    plain text; log-probs only when there is one per id."""
    with StubOpenAIServer() as server:
        server.enqueue(
            ("sampled", "Which unit?", [101, 7, 2], [-0.5, -1.25, -0.01], "stop"),
            ("sampled", "Is it in", [5, 6], None, "length"),
            ("sampled", "Fine.", [1, 2, 3], [-0.1], "stop"),
            ("sampled", "Odd.", ["x", 2], [-0.1, -0.2], "stop"),
            ("text", "No ids."),
        )
        agent = make_agent("openai:policy", options={"base_url": server.base_url, "api_key": "k"})
        chat = [{"role": "user", "content": "task"}]
        first, cut, short, odd, plain = (agent.act(chat, CTX).text for _ in range(5))
    assert isinstance(first, SampledText) and first == "Which unit?"
    assert (first.token_ids, first.logprobs, first.truncated) == ((101, 7, 2), (-0.5, -1.25, -0.01), False)
    assert isinstance(cut, SampledText) and (cut.token_ids, cut.logprobs, cut.truncated) == ((5, 6), None, True)
    assert isinstance(short, SampledText) and short.logprobs is None  # one log-prob for three ids: left out
    assert not isinstance(odd, SampledText) and not isinstance(plain, SampledText)
    kept = turn_text({"text": str(first), **turn_record(first)})  # as a run record keeps the turn
    assert kept == first and isinstance(kept, SampledText) and kept.token_ids == first.token_ids
