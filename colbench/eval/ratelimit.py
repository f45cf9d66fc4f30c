"""Per-endpoint request limits for the evaluation runner: a token bucket (requests per minute) and a cap on
requests in flight.

One :class:`Gate` per endpoint (the agent's, the simulator's) is shared by every running episode. A gate counts
logical requests: one agent turn, one simulator reply that missed the cache. The LLM client's own retries of a
request happen inside its slot (they back off on their own and honour ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from colbench.errors import ConfigError
from colbench.llm import ChatReply, Endpoint, LLMClient, Message


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


class TokenBucket:
    """``rpm`` requests per minute, spread evenly: the bucket holds one second's worth (at least one request), so a
    burst after a quiet spell stays small. Waiters are served in arrival order."""

    def __init__(self, rpm: float) -> None:
        if not rpm > 0:
            raise ConfigError(f"requests per minute must be > 0, got {rpm}")
        self.rate = rpm / 60.0
        self.capacity = max(1.0, self.rate)
        self._tokens = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self) -> None:
        async with self._lock:  # FIFO: one waiter at a time sleeps until its token exists
            self._refill()
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1.0


class Gate:
    """``async with gate:`` around one request: waits for a free slot, then for a rate token."""

    def __init__(self, limits: EndpointLimits) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.max_concurrency) if limits.max_concurrency else None
        self._bucket = TokenBucket(limits.rpm) if limits.rpm else None

    @property
    def active(self) -> bool:
        return self._slots is not None or self._bucket is not None

    async def __aenter__(self) -> None:
        if self._slots is not None:
            await self._slots.acquire()
        try:
            if self._bucket is not None:
                await self._bucket.acquire()
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._slots is not None:
            self._slots.release()


class GatedLLMClient(LLMClient):
    """An :class:`LLMClient` whose async requests pass through a :class:`Gate` (a simulator's client is replaced by
    one of these, so replies served from its cache cost no request)."""

    def __init__(self, endpoint: Endpoint, gate: Gate) -> None:
        super().__init__(endpoint)
        self.gate = gate

    async def achat(self, messages: Sequence[Message]) -> ChatReply:
        async with self.gate:
            return await super().achat(messages)
