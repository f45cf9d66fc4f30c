"""Per-endpoint request limits: requests per minute (a leaky bucket, ``aiolimiter``) and requests in flight.

A client with limits passes each logical request (one agent turn, one simulator reply that missed the cache) through
its :class:`Gate`; the client's own retries of that request happen inside its slot (they back off on their own and
honour ``Retry-After``). Every episode of an evaluation shares the agent's client and the simulator's, so the limits
hold for the whole run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import TracebackType

from aiolimiter import AsyncLimiter

from colbench.errors import ConfigError


@dataclass(frozen=True)
class EndpointLimits:
    """``rpm``: requests started per minute (``None``: unlimited); ``max_concurrency``: requests in flight."""

    rpm: float | None = None
    max_concurrency: int | None = None

    def check(self, role: str) -> None:
        if self.rpm is not None and not self.rpm > 0:
            raise ConfigError(f"--{role}-rpm must be > 0, got {self.rpm}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError(f"--{role}-max-concurrency must be >= 1, got {self.max_concurrency}")

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.max_concurrency is not None


def rate_limiter(rpm: float) -> AsyncLimiter:
    """``rpm`` requests per minute, spread evenly: the bucket holds one second's worth (at least one request), so a
    burst after a quiet spell stays small."""
    if not rpm > 0:
        raise ConfigError(f"requests per minute must be > 0, got {rpm}")
    per_second = rpm / 60.0
    capacity = max(1.0, per_second)
    return AsyncLimiter(capacity, capacity / per_second)


class Gate:
    """``async with gate:`` around one request: waits for a free slot, then for a rate token. Belongs to the event
    loop that first uses it (the client keeps one per loop)."""

    def __init__(self, limits: EndpointLimits) -> None:
        limits.check("endpoint")
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.max_concurrency) if limits.max_concurrency else None
        self._rate = rate_limiter(limits.rpm) if limits.rpm else None

    async def __aenter__(self) -> None:
        if self._slots is not None:
            await self._slots.acquire()
        try:
            if self._rate is not None:
                await self._rate.acquire()
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._slots is not None:
            self._slots.release()
