"""``colbench eval --ray``: episodes played by actors across the cluster, written by the driver alone.

Each actor builds its own :class:`~colbench.eval.player.EpisodePlayer` from the run's :class:`RunPlan` (its
node's sandbox pool or browser, its own model clients and reply cache) and plays many episodes at once on its event
loop. The driver sends episodes to the least busy actor and writes each record it gets back, in the run directory
format of a local run; an episode whose actor is lost runs again on another (:class:`~colbench.ray.workers.ActorSet`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from colbench.env.domain import get_domain
from colbench.eval import harness
from colbench.eval.harness import EvalResult
from colbench.eval.plan import RunPlan
from colbench.eval.player import EpisodePlayer, Played
from colbench.ray.cluster import NodeActor, connect, default_workers
from colbench.ray.workers import ActorSet
from colbench.types.task import Task


class EpisodeActor(NodeActor):
    """Plays episodes on one node (a Ray actor: ``ray.remote`` is applied by :class:`ActorSet`)."""

    def __init__(self, config: RunPlan, domain_name: str, tasks: Sequence[Task]) -> None:
        self.player = EpisodePlayer.from_config(config, get_domain(domain_name), tasks)

    async def play(self, task: Task, trial: int) -> Played:
        return await self.player.play(task, trial)


class RayEpisodes:
    """The driver's side: ``await play(task, trial)`` anywhere on the cluster."""

    def __init__(self, config: RunPlan, domain_name: str, tasks: Sequence[Task], driver: EpisodePlayer) -> None:
        ray = connect(config.ray)
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


def run_eval(config: RunPlan, **kwargs: Any) -> EvalResult:
    """``colbench eval --ray``: :func:`colbench.eval.run_eval` with the episodes played by actors across the cluster
    at ``config.ray`` (this process still writes every record)."""
    return harness.run_eval(config, remote=RayEpisodes, **kwargs)
