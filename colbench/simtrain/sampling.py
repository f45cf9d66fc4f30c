"""Candidates: K replies per prefix from the human model, asked exactly as the env asks its human.

(The interface's ``candidates`` module: named ``sampling`` because ``candidates`` is already the task generator's
module, and one basename has one role in this package, tests/test_architecture.py.)

The human is built by :func:`colbench.env.simulators.make_simulator`, as every env builds it: same system prompt,
same view (``view="spec"``: the spec human, answering from the task's specification), same endpoint, decoding
settings, banned strings and stops, same reply cap. A draw is the human's own ``areply`` on the prefix's dialogue
(the env's ``_human_reply``), through a :func:`~colbench.probe.draws.seeded` copy of it whose requests carry
``seed = seed + d`` for draw ``d`` (in the body and the cache key): K draws are K requests that the model samples
differently, and running again gives the same draws (a server that honours the seed, a cache that keys on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from colbench.env.simulators import make_simulator
from colbench.errors import ConfigError
from colbench.humans.simulator import ChatSimulator, Simulator
from colbench.humans.spec import SpecSimulator, spec_task
from colbench.probe.draws import DRAW_SEED, seeded
from colbench.simtrain.prefixes import Prefix, env_domain
from colbench.types.chat import Message


@dataclass(frozen=True)
class Candidate:
    """Draw ``draw`` (0-based) of the human's reply to the prefix whose key is ``prefix``: ``text`` as the env
    would show it (cut to the domain's reply length); ``seed`` the seed its request carried."""

    prefix: str
    draw: int
    text: str
    seed: int = 0


def human_chat(prefix: Prefix, simulator: Simulator) -> list[Message]:
    """The messages the env's human sends its model for ``prefix``: the chat simulator's own
    ``ChatSimulator.messages``; for the spec human, those of its inner human on the task as it knows it (the spec in
    place of the hidden information; the spec is written first if it is not yet). A human that calls no model (a
    scripted one) has no request: a ConfigError."""
    if isinstance(simulator, SpecSimulator):
        spec, _ = simulator.writer.written(prefix.task)
        return human_chat(replace(prefix, task=spec_task(prefix.task, spec)), simulator.inner)
    if isinstance(simulator, ChatSimulator):
        return list(simulator.messages(prefix.task, prefix.dialogue))
    raise ConfigError(f"the simulator {type(simulator).__name__} calls no chat model: it sends no request")


def human_request(prefix: Prefix, simulator: Simulator) -> dict[str, Any]:
    """The whole request body the env's human posts for ``prefix`` (model, messages, temperature, max tokens, the
    endpoint's extra body: stops, banned tokens): ``human_chat`` through the human's own client."""
    inner = simulator.inner if isinstance(simulator, SpecSimulator) else simulator
    if not isinstance(inner, ChatSimulator):
        raise ConfigError(f"the simulator {type(inner).__name__} calls no chat model: it sends no request")
    return dict(inner.client.request(human_chat(prefix, simulator)).body)


async def sample_candidates(
    prefixes: Sequence[Prefix],
    *,
    env_id: str,
    simulator: str | Simulator,
    simulator_options: Mapping[str, Any],
    k: int,
    seed: int,
    concurrency: int = 8,
) -> list[Candidate]:
    """``k`` candidates per prefix, prefix by prefix in order, draws in order (module docstring). ``simulator``: a
    spec made with ``simulator_options`` into ``env_id``'s domain's human, as the env makes it, and closed here; or a
    ready ``Simulator`` (then the caller closes it, and ``simulator_options`` must be empty). At most
    ``concurrency`` requests at once."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    domain = env_domain(env_id)
    wrong = next((p for p in prefixes if p.task.domain != domain.name), None)
    if wrong is not None:
        raise ConfigError(f"prefix {wrong.source} is a {wrong.task.domain} task; {env_id} takes {domain.name} tasks")
    if isinstance(simulator, str):
        human = make_simulator(domain, simulator, **dict(simulator_options))
    elif simulator_options:
        raise ConfigError("simulator_options are for a simulator spec: pass None or {} with a Simulator")
    else:
        human = simulator
    drawn, client = seeded(human)
    gate = asyncio.Semaphore(concurrency)

    async def one(prefix: Prefix, draw: int) -> Candidate:
        async with gate:
            DRAW_SEED.set(seed + draw)  # this task's own context: only its requests carry it
            reply = await drawn.areply(prefix.task, prefix.dialogue)
            return Candidate(prefix.key(), draw, reply.text, seed + draw)

    try:
        return list(await asyncio.gather(*(one(p, d) for p in prefixes for d in range(k))))
    finally:
        if client is not None:
            await client.aclose()
        if isinstance(simulator, str):
            await human.aclose()
