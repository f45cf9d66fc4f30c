"""``colbench eval --ray``: episodes played by actors across the cluster, written by the driver alone.

Each actor builds its own :class:`~colbench.eval.player.EpisodePlayer` from the run's :class:`EvalConfig` (its
node's sandbox pool or browser, its own model clients and reply cache) and plays many episodes at once on its event
loop. The driver sends episodes to the least busy actor and writes each record it gets back, in the run directory
format of a local run; an episode whose actor is lost runs again on another (:class:`~colbench.ray.workers.ActorSet`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from colbench.env.domain import get_domain
from colbench.eval import harness
from colbench.eval.config import EvalConfig
from colbench.eval.harness import EvalResult
from colbench.eval.player import EpisodePlayer, Played
from colbench.llm.client import LLMClient
from colbench.llm.specs import parse_spec
from colbench.ray.cluster import connect, default_workers, node_of
from colbench.ray.workers import ActorSet
from colbench.types.task import Task


class EpisodeActor:
    """Plays episodes on one node (a Ray actor: ``ray.remote`` is applied by :class:`ActorSet`)."""

    def __init__(self, config: EvalConfig, domain_name: str, tasks: Sequence[Task]) -> None:
        self.player = EpisodePlayer.from_config(config, get_domain(domain_name), tasks)

    def ready(self) -> str:
        import ray

        return node_of(ray)

    async def play(self, task: Task, trial: int) -> Played:
        return await self.player.play(task, trial)


class RayEpisodes:
    """The driver's side: ``await play(task, trial)`` anywhere on the cluster."""

    def __init__(self, config: EvalConfig, domain_name: str, tasks: Sequence[Task], driver: EpisodePlayer) -> None:
        ray = connect(config.ray)
        config = pinned_endpoints(config, driver)
        workers = config.ray_workers or default_workers(ray)
        # The driver keeps ``concurrency`` episodes in flight over all actors; each actor may hold all of them, so
        # when nodes die the survivors take their share without queueing.
        self.actors = ActorSet(
            ray, EpisodeActor, (config, domain_name, list(tasks)), count=workers, max_concurrency=config.concurrency
        )

    async def play(self, task: Task, trial: int) -> Played:
        played: Played = await self.actors.call("play", task, trial)
        return played

    def describe(self) -> dict[str, Any]:
        return {"workers": len(self.actors.live), "nodes": len(set(self.actors.nodes.values()))}

    def close(self) -> None:
        self.actors.close()


def pinned_endpoints(config: EvalConfig, driver: EpisodePlayer) -> EvalConfig:
    """``config`` with the URL and key of every ``openai:`` endpoint the driver resolved (from its options or its
    environment: ``COLBENCH_AGENT_API_KEY``, ``OPENAI_API_KEY``...), so every node calls the same endpoints whatever
    its own environment holds. They travel in the actors' arguments, inside the cluster."""
    options = {"agent": dict(config.agent_options), "simulator": dict(config.simulator_options)}
    for role, spec, part in (("agent", config.agent, driver.agent), ("simulator", config.simulator, driver.simulator)):
        client = getattr(part, "client", None)
        if parse_spec(spec, role).kind != "openai" or not isinstance(client, LLMClient):
            continue
        for name in ("base_url", "api_key"):
            value = getattr(client.endpoint, name)
            if options[role].get(name) is None and value is not None:
                options[role][name] = value
    return dataclasses.replace(config, agent_options=options["agent"], simulator_options=options["simulator"])


def run_eval(config: EvalConfig, **kwargs: Any) -> EvalResult:
    """``colbench eval --ray``: :func:`colbench.eval.run_eval` with the episodes played by actors across the cluster
    at ``config.ray`` (this process still writes every record)."""
    return harness.run_eval(config, remote=RayEpisodes, **kwargs)
