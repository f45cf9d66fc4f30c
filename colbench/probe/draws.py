"""``--draws K``: a probe's last human turn asked K times, to see how many different replies the human gives.

Draw 1 is the reply the probe got. Draws 2..K replay the probe through the env: the earlier turns go to the view's
human as before (a model human's replies come back from the probe's response cache, the same texts, at no cost),
the last one to the same human whose requests carry ``seed = d`` (the draw's number) in the body and in the cache
key. So every draw is a request of its own that the model answers: none is the response cache replaying another
draw, a server that seeds every request alike (the embedded llama.cpp server does) samples differently, and a
resumed probe replays the same draws. The human's sampling settings are its own: a human at temperature 0 answers
every draw alike, which is what the figure then says about it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from colbench.humans.simulator import SimReply, Simulator
from colbench.humans.spec import SpecSimulator
from colbench.llm.client import ChatRequest, LLMClient
from colbench.types.chat import Message
from colbench.types.dialogue import Turn
from colbench.types.task import Task

DRAW_SEED: ContextVar[int | None] = ContextVar("colbench_probe_draw_seed", default=None)
"""The seed the current draw's requests carry (None: not a draw, the request as the human sends it)."""


class SeededClient(LLMClient):
    """A human's client (same endpoint, response cache and limits) whose requests carry ``seed``: the draw being
    asked (``DRAW_SEED``), in the body and so in the cache key; overriding a ``seed`` of the endpoint's
    ``extra_body``."""

    def request(self, messages: Sequence[Message]) -> ChatRequest:
        made = super().request(messages)
        seed = DRAW_SEED.get()
        if seed is None:
            return made
        key = dict(made.key)
        key["extra_body"] = {**(key.get("extra_body") or {}), "seed": seed}
        return ChatRequest(key, {**made.body, "seed": seed})


def seeded(simulator: Simulator) -> tuple[Simulator, SeededClient | None]:
    """A copy of ``simulator`` asking its chat model through a :class:`SeededClient`, and that client (to close);
    a simulator that calls no model (a scripted one) is its own draw, with no client."""
    if isinstance(simulator, SpecSimulator):  # the spec is the view's own: only the human answering it is drawn
        inner, client = seeded(simulator.inner)
        return SpecSimulator(inner, simulator.writer), client
    base = getattr(simulator, "client", None)
    if not isinstance(base, LLMClient):
        return simulator, None
    client = SeededClient(base.endpoint, cache=base.cache, limits=base.limits)
    drawn = copy.copy(simulator)
    drawn.client = client  # type: ignore[attr-defined]
    return drawn, client


class LastTurnDraw:
    """The human an env plays draw ``seed`` of a probe with: ``base`` for the agent turns before the ``last``,
    ``drawn`` (a :func:`seeded` copy) with ``DRAW_SEED`` set for turn ``last``. Closing it closes nothing: the
    probe closes the humans it made."""

    def __init__(self, base: Simulator, drawn: Simulator, last: int, seed: int) -> None:
        self.base, self.drawn, self.last, self.seed = base, drawn, last, seed

    def _asked(self, dialogue: Sequence[Turn]) -> bool:
        return sum(t.role == "agent" for t in dialogue) >= self.last

    def reply(self, task: Task, dialogue: Sequence[Turn], **kwargs: Any) -> SimReply:
        if not self._asked(dialogue):
            return self.base.reply(task, dialogue, **kwargs)
        token = DRAW_SEED.set(self.seed)
        try:
            return self.drawn.reply(task, dialogue, **kwargs)
        finally:
            DRAW_SEED.reset(token)

    async def areply(self, task: Task, dialogue: Sequence[Turn], **kwargs: Any) -> SimReply:
        if not self._asked(dialogue):
            return await self.base.areply(task, dialogue, **kwargs)
        token = DRAW_SEED.set(self.seed)
        try:
            return await self.drawn.areply(task, dialogue, **kwargs)
        finally:
            DRAW_SEED.reset(token)

    async def aclose(self) -> None:
        """Nothing: the probe closes the humans (and the seeded clients) it made, once."""


def distinct(replies: Sequence[str]) -> int:
    """How many different replies: texts compared with their whitespace collapsed."""
    return len({" ".join(text.split()) for text in replies})
