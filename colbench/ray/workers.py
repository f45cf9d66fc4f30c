"""A set of actors across the cluster and the rule that keeps work from being lost or doubled.

The driver sends each piece of work (an episode, a chunk of answers to score) to the least busy live actor and
keeps only what comes back. When an actor is lost (its process or its node died), the work it held runs again on
another actor, and a replacement is started wherever the cluster has room; work that finished before the loss was
already returned, and nothing the lost actor did reaches the driver. So a run directory written by the driver alone
holds every piece exactly once, whatever died.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from colbench.errors import InfraError
from colbench.ray.cluster import actor_options, lost_errors

log = logging.getLogger(__name__)

START_S = 300.0  # actors must be up by then (a node pulling the sandbox image or starting a model server)
ATTEMPTS = 4  # actors one piece of work may lose before it is an infrastructure error
WAIT_S = 120.0  # how long work waits for a replacement when no actor is left


class ActorSet:
    """``count`` actors of ``cls`` (constructed with ``args``; ``cls`` has a ``ready()`` method returning its
    node's id), each running up to ``max_concurrency`` calls at once."""

    def __init__(self, ray: Any, cls: type, args: tuple[Any, ...], *, count: int, max_concurrency: int) -> None:
        self.ray = ray
        self.what = cls.__name__
        self._remote = ray.remote(cls).options(**actor_options(ray, max_concurrency=max_concurrency))
        self._args = args
        self._lost = lost_errors(ray)
        self.live: dict[Any, int] = {}  # actor -> calls in flight
        self.nodes: dict[Any, str] = {}
        self._pending: set[Any] = set()
        self._joining: set[asyncio.Task[None]] = set()
        self.losses = 0
        self._start(count)

    def _start(self, count: int) -> None:
        actors = [self._remote.remote(*self._args) for _ in range(count)]
        for actor, node in zip(actors, wait_started(self.ray, actors, self.what), strict=True):
            self.nodes[actor] = node
            self.live[actor] = 0

    async def call(self, method: str, *args: Any) -> Any:
        """``method(*args)`` on the least busy live actor, again on another one each time an actor is lost."""
        last = ""
        for _ in range(ATTEMPTS):
            actor = await self._pick()
            self.live[actor] += 1
            try:
                return await getattr(actor, method).remote(*args)
            except self._lost as exc:
                last = cause(exc)
                self._replace(actor, last)
            finally:
                if actor in self.live:
                    self.live[actor] -= 1
        raise InfraError(f"{self.what}: {ATTEMPTS} actors were lost running this work; last: {last}")

    async def _pick(self) -> Any:
        deadline = time.monotonic() + WAIT_S
        while not self.live:
            if (not self._pending and not self._joining) or time.monotonic() > deadline:
                raise InfraError(f"no {self.what} actor is left on the Ray cluster")
            await asyncio.sleep(0.2)
        return min(self.live, key=self.live.__getitem__)

    def _replace(self, actor: Any, why: str) -> None:
        if actor not in self.live:  # several calls on one actor report its loss; replace it once
            return
        del self.live[actor]
        self.losses += 1
        log.warning("%s actor on node %s lost (%s): its work runs again elsewhere", self.what, self.nodes[actor], why)
        replacement = self._remote.remote(*self._args)
        self._pending.add(replacement)
        task = asyncio.ensure_future(self._join(replacement))
        self._joining.add(task)
        task.add_done_callback(self._joining.discard)

    async def _join(self, actor: Any) -> None:
        """A replacement joins once it is up; it may wait for a node to come back, or never start."""
        try:
            self.nodes[actor] = await actor.ready.remote()
        except Exception as exc:
            log.warning("a replacement %s actor did not start: %s", self.what, cause(exc))
            return
        finally:
            self._pending.discard(actor)
        self.live[actor] = 0

    def close(self) -> None:
        for task in list(self._joining):
            task.cancel()
        for actor in [*self.live, *self._pending]:
            try:
                self.ray.kill(actor)
            except Exception:  # already gone with its node
                log.debug("killing a %s actor failed", self.what, exc_info=True)
        self.live.clear()
        self._pending.clear()


def wait_started(ray: Any, actors: list[Any], what: str) -> list[str]:
    """Each actor's node once all are up (their ``ready()``); if one cannot be placed in ``START_S`` or fails to
    start, all are killed and the error is one line."""
    refs = [actor.ready.remote() for actor in actors]
    ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=START_S)
    try:
        if waiting:
            raise InfraError(
                f"only {len(ready)} of {len(actors)} {what} actors could be placed on the Ray cluster in "
                f"{START_S:.0f}s: give nodes the colbench_sandbox resource, or ask for fewer workers"
            )
        try:
            return [str(ray.get(ref)) for ref in refs]
        except Exception as exc:
            raise InfraError(f"a {what} actor failed to start: {cause(exc)}") from None
    except InfraError:
        for actor in actors:
            ray.kill(actor)
        raise


def cause(exc: BaseException) -> str:
    """The first line of what Ray says, which names the real error."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
