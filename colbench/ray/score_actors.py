"""``colbench score --ray``: chunks of answers scored by actors across the cluster, results in answer order.

Each actor makes its domain's scorer from the command's scoring options on its node (its sandbox pool or browser
and embedder; ``--jobs`` is per node). The driver keeps two chunks in flight per actor and yields each chunk's
scores in input order as soon as it and every chunk before it are done, so the results file grows as a local run's
does; a chunk whose actor is lost is scored again on another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import closing
from typing import Any

from colbench.env.domain import Score, get_domain
from colbench.env.vector import LoopThread
from colbench.errors import InfraError
from colbench.ray.cluster import NodeActor, connect, default_workers
from colbench.ray.workers import ActorSet
from colbench.types.task import Task

IN_FLIGHT_PER_ACTOR = 2


class ScoreActor(NodeActor):
    """Scores answers on one node (a Ray actor: ``ray.remote`` is applied by :class:`ActorSet`)."""

    def __init__(self, domain_name: str, options: Mapping[str, Any], jobs: int | None) -> None:
        self.scorer = get_domain(domain_name).make_scorer(options, jobs=jobs)

    def score(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        return list(self.scorer.score_many(pairs))


class RayScoring:
    """The driver's side of ``colbench score --ray``: ``workers`` actors (default: ``default_workers``) on the
    cluster at ``address``, each scoring with ``make_scorer(options, jobs=jobs)`` of the domain."""

    def __init__(
        self,
        domain_name: str,
        options: Mapping[str, Any],
        *,
        jobs: int | None = None,
        address: str | None = None,
        workers: int | None = None,
    ) -> None:
        ray = connect(address)
        workers = workers or default_workers(ray)
        self.in_flight = workers * IN_FLIGHT_PER_ACTOR
        made = (domain_name, dict(options), jobs)
        self.actors = ActorSet(ray, ScoreActor, made, count=workers, max_concurrency=IN_FLIGHT_PER_ACTOR)

    def score_chunks(self, chunks: Sequence[Sequence[tuple[Task, str]]]) -> Iterator[list[Score] | InfraError]:
        """Each chunk's scores, in order; an ``InfraError`` in place of a chunk no actor could score."""
        with closing(LoopThread("colbench-ray-score")) as loop:
            gate = asyncio.Semaphore(self.in_flight)  # bound to the loop that first waits on it

            async def one(chunk: Sequence[tuple[Task, str]]) -> list[Score] | InfraError:
                async with gate:
                    try:
                        scores: list[Score] = await self.actors.call("score", list(chunk))
                    except InfraError as exc:
                        return exc
                    return scores

            futures: list[Future[Any]] = [loop.submit(one(chunk)) for chunk in chunks]
            for future in futures:
                yield future.result()

    def close(self) -> None:
        self.actors.close()
