"""One small wrapper over the ``openai`` client, shared by agents and simulators.

Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, a test stub) is an :class:`Endpoint`. We do our
own retries instead of the client's because an evaluation must also survive replies that are 200 OK but
useless (no choices, empty content, a body that is not JSON), and because when retries are spent the failure
must surface as an :class:`~colbench.errors.LLMError` (an infrastructure error, never a score of 0) whose
message says which endpoint failed and why. Errors that retrying cannot fix (400/401/403/404/422) are raised
at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import itertools
import json
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from colbench.errors import ConfigError, LLMError

log = logging.getLogger(__name__)

Message = Mapping[str, Any]

SPEC_FORMS = "'openai:MODEL', 'local' or 'local:PATH.gguf'"
_PLACEHOLDER_KEY = "EMPTY"  # local servers need no key, but the openai client refuses to start without one
_RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx
POOL_SHARD = 32  # connections per async HTTP client when Endpoint.max_connections asks for a large pool


@dataclass
class Usage:
    """Token accounting. ``calls`` counts completions the endpoint returned (each one may be billed)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call a chat model. The key is kept out of ``repr`` so it never reaches a log."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 6
    backoff_s: float = 1.0
    backoff_cap_s: float = 30.0
    temperature: float = 0.0
    max_tokens: int | None = None
    extra_body: Mapping[str, Any] | None = None
    identity: str | None = None
    """What names the served model in cache keys and run records when the URL does not (an embedded server gets a
    new port every run); None = the base URL."""
    # HTTP connections to keep open at once (None: the openai client's pool, 1000 connections of which 100 stay
    # alive); a harness running N requests at once sets N so the pool never queues or churns them.
    max_connections: int | None = None
    # An empty completion (choices present, content empty or null) is a reply, returned as "", not a fault to
    # retry: set for agents, whose silence is their own (wrong) answer rather than an endpoint failure.
    accept_empty: bool = False

    @property
    def where(self) -> str:
        return f"model {self.model!r} at {self.base_url or 'the default OpenAI URL'}"


def endpoint_from_spec(spec: str, role: str, **overrides: Any) -> Endpoint:
    """Build an endpoint from ``openai:MODEL``, ``local`` or ``local:PATH.gguf``.

    ``base_url`` / ``api_key`` come from explicit overrides (``None`` means not given), else
    ``COLBENCH_<ROLE>_BASE_URL`` / ``COLBENCH_<ROLE>_API_KEY``, else ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``, so an agent and a simulator can live on different servers. Other overrides set
    :class:`Endpoint` fields. ``local`` starts (once per process) the embedded model's server and points at it:
    see :mod:`colbench.local_model`.
    """
    kind, sep, model = spec.partition(":")
    if kind == "local":
        from colbench.local_model import endpoint_from_local_spec  # the optional extra, loaded only when asked for

        return endpoint_from_local_spec(spec, role, **overrides)
    if kind != "openai" or not sep or not model.strip():
        raise ConfigError(f"bad {role} spec {spec!r}: expected {SPEC_FORMS}")
    known = {f.name for f in dataclasses.fields(Endpoint)} - {"model"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"unknown {role} endpoint option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    prefix = f"COLBENCH_{role.upper()}_"
    for name in ("base_url", "api_key"):
        if overrides.get(name) is None:
            env = name.upper()
            overrides[name] = os.environ.get(prefix + env) or os.environ.get(f"OPENAI_{env}") or None
    return Endpoint(model=model.strip(), **overrides)


@dataclass(frozen=True)
class ChatReply:
    text: str
    usage: Usage
    finish_reason: str | None = None
    cached: bool = False


class _Unusable(Exception):
    """A 200 reply we cannot use (no choices, empty content): worth another try."""


class LLMRequestRejected(LLMError):
    """The endpoint refused the request itself (400 too long, 401 bad key...): retrying cannot help."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMClient:
    """Chat with one endpoint, sync or async, with retries and cumulative token accounting (thread-safe)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._usage = Usage()
        self._lock = threading.Lock()
        self._sync: openai.OpenAI | None = None
        # per event loop: its async clients (several when the pool is split, see _async_client) and a turn counter
        self._async: tuple[asyncio.AbstractEventLoop, list[openai.AsyncOpenAI], itertools.count[int]] | None = None

    @property
    def usage(self) -> Usage:
        """A snapshot of all usage so far."""
        with self._lock:
            return dataclasses.replace(self._usage)

    def request(self, messages: Sequence[Message]) -> dict[str, Any]:
        """Everything that determines a reply: sent to the endpoint, and the key of a response cache."""
        ep = self.endpoint
        return {
            "model": ep.model,
            "base_url": ep.identity or ep.base_url,
            "messages": [dict(m) for m in messages],
            "temperature": ep.temperature,
            "max_tokens": ep.max_tokens,
            "extra_body": dict(ep.extra_body) if ep.extra_body else None,
        }

    def chat(self, messages: Sequence[Message]) -> ChatReply:
        kwargs = self._create_kwargs(messages)
        spent, errors = Usage(), 0
        last: Exception | None = None
        for attempt in range(self.endpoint.max_retries + 1):
            if attempt:
                time.sleep(self._delay(attempt, last))
            try:
                completion = self._sync_client().chat.completions.create(**kwargs)
                return self._accept(completion, spent)
            except Exception as exc:  # _retryable re-raises the rest
                last = self._retryable(exc)
                errors += 1
        raise self._exhausted(errors, last)

    async def achat(self, messages: Sequence[Message]) -> ChatReply:
        kwargs = self._create_kwargs(messages)
        spent, errors = Usage(), 0
        last: Exception | None = None
        for attempt in range(self.endpoint.max_retries + 1):
            if attempt:
                await asyncio.sleep(self._delay(attempt, last))
            try:
                completion = await self._async_client().chat.completions.create(**kwargs)
                return self._accept(completion, spent)
            except Exception as exc:  # _retryable re-raises the rest
                last = self._retryable(exc)
                errors += 1
        raise self._exhausted(errors, last)

    def close(self) -> None:
        with self._lock:
            client, self._sync = self._sync, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the async HTTP pool opened on the running loop (before the loop ends: no stray close later)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            held, self._async = self._async, None
        if held is not None and held[0] is loop:
            for client in held[1]:
                await client.close()

    # -- internals --

    def _sync_client(self) -> openai.OpenAI:
        with self._lock:
            if self._sync is None:
                self._sync = openai.OpenAI(**self._client_kwargs(), **self._pool(asynchronous=False))
            return self._sync

    def _async_client(self) -> openai.AsyncOpenAI:
        # An async HTTP pool belongs to the event loop that opened it: a new loop (a second asyncio.run, say)
        # gets its own client instead of a pool whose connections are bound to a closed loop.
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async is None or self._async[0] is not loop:
                # httpx's pool does work proportional to its connections on every request: a pool sized for many
                # concurrent requests is split into clients of POOL_SHARD connections, used in turn.
                shards = -(-(self.endpoint.max_connections or 1) // POOL_SHARD)
                clients = [
                    openai.AsyncOpenAI(**self._client_kwargs(), **self._pool(asynchronous=True)) for _ in range(shards)
                ]
                self._async = (loop, clients, itertools.count())
            _, clients, turn = self._async
            return clients[next(turn) % len(clients)]

    def _client_kwargs(self) -> dict[str, Any]:
        ep = self.endpoint
        return {
            "api_key": ep.api_key or _PLACEHOLDER_KEY,
            "base_url": ep.base_url,
            "timeout": ep.timeout_s,
            "max_retries": 0,
        }

    def _pool(self, *, asynchronous: bool) -> dict[str, Any]:
        """An HTTP client whose pool holds ``max_connections`` (none given: the openai client's default pool)."""
        n = self.endpoint.max_connections
        if n is None:
            return {}
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=n, max_keepalive_connections=n)
        factory = openai.DefaultAsyncHttpxClient if asynchronous else openai.DefaultHttpxClient
        return {"http_client": factory(limits=limits, timeout=self.endpoint.timeout_s)}

    def _create_kwargs(self, messages: Sequence[Message]) -> dict[str, Any]:
        request = self.request(messages)
        kwargs: dict[str, Any] = {
            "model": request["model"],
            "messages": request["messages"],
            "temperature": request["temperature"],
        }
        if request["max_tokens"] is not None:
            kwargs["max_tokens"] = request["max_tokens"]
        if request["extra_body"]:
            kwargs["extra_body"] = request["extra_body"]
        return kwargs

    def _accept(self, completion: Any, spent: Usage) -> ChatReply:
        """Account for the completion (billed even if unusable), then return it or raise ``_Unusable``."""
        usage = getattr(completion, "usage", None)
        got = Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            calls=1,
        )
        spent.add(got)
        with self._lock:
            self._usage.add(got)
        choices = getattr(completion, "choices", None)
        if not choices:
            raise _Unusable("reply has no choices")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        finish = getattr(choices[0], "finish_reason", None)
        if not isinstance(text, str) or not text.strip():
            if self.endpoint.accept_empty and message is not None:
                return ChatReply(text=text or "", usage=dataclasses.replace(spent), finish_reason=finish)
            raise _Unusable(f"reply has empty content (finish_reason={finish})")
        return ChatReply(text=text, usage=dataclasses.replace(spent), finish_reason=finish)

    def _retryable(self, exc: Exception) -> Exception:
        """Return ``exc`` if another attempt may help; raise at once otherwise."""
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in _RETRY_STATUS or status >= 500:
                self._log_retry(exc)
                return exc
            raise LLMRequestRejected(
                f"{self.endpoint.where} refused the request (HTTP {status}): {self._describe(exc)}", status
            ) from exc
        if isinstance(exc, openai.APIConnectionError | openai.APIResponseValidationError | _Unusable):
            self._log_retry(exc)
            return exc
        if isinstance(exc, json.JSONDecodeError):  # a 200 reply whose body is not JSON
            self._log_retry(exc)
            return exc
        raise exc

    def _delay(self, attempt: int, last: Exception | None) -> float:
        ep = self.endpoint
        hinted = _retry_after(last)
        if hinted is not None:
            return min(hinted, ep.backoff_cap_s)
        exponential: float = ep.backoff_s * 2.0 ** (attempt - 1)
        return min(exponential, ep.backoff_cap_s) * random.uniform(0.5, 1.0)

    def _exhausted(self, errors: int, last: Exception | None) -> LLMError:
        return LLMError(f"{self.endpoint.where}: gave up after {errors} attempt(s); last error: {self._describe(last)}")

    def _describe(self, exc: BaseException | None) -> str:
        if exc is None:
            return "none"
        text = " ".join(str(exc).split())  # one line
        if self.endpoint.api_key:
            text = text.replace(self.endpoint.api_key, "***")
        return f"{type(exc).__name__}: {text[:300]}"

    def _log_retry(self, exc: Exception) -> None:
        log.warning("%s: retrying after %s", self.endpoint.where, self._describe(exc))


def _retry_after(exc: Exception | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` / ``Retry-After`` as seconds or HTTP date)."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, when.timestamp() - time.time())
    return None
