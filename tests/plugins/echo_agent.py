"""A third-party agent, loaded by spec ``plugins.echo_agent:EchoAgent`` in the tests."""

from __future__ import annotations

from collections.abc import Sequence

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.types.chat import Message


class EchoAgent:
    def __init__(self, prefix: str = "echo") -> None:
        self.prefix = prefix
        self.name = f"echo-{prefix}"

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return AgentReply(f"{self.prefix} {context.turn}: {str(messages[-1]['content'])[:20]}")

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""


INSTANCE = EchoAgent("ready")
NOT_AN_AGENT = 42
