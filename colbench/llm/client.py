"""One client over the ``openai`` package for every chat model colbench talks to: agents and simulated humans.

Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, a test stub) is an :class:`Endpoint`. A request is built
once (:class:`ChatRequest`); the same object keys the response cache and is sent. The client owns what every
caller needs around a request, in this order: the response cache (a hit costs no request), the endpoint's limits
(requests per minute, requests in flight: :mod:`colbench.llm.limits`), then the request with retries.

Retries are tenacity's, not the ``openai`` client's: an evaluation must also survive replies that are 200 OK but
useless (no choices, empty content, a body that is not JSON), and when the retries are spent the failure must
surface as an :class:`~colbench.errors.LLMError` (an infrastructure error, never a score of 0) whose one-line
message says which endpoint failed and why. Errors that retrying cannot fix (400/401/403/404/422) are raised at
once as :class:`LLMRequestRejected`. The wait between attempts is the server's ``Retry-After`` when it sends one
(capped), else exponential backoff with full jitter.

Requests go through the ``openai`` client (its auth, headers, JSON encoding, status-error mapping) as plain JSON
bodies posted to ``/chat/completions``, read back as plain JSON (:mod:`colbench.llm.chat_post`): the typed
``chat.completions.create`` spends milliseconds per request transforming the body against its TypedDicts and
building pydantic models from the reply, none of which colbench reads. Underneath, async requests use
:class:`~colbench.llm.http11.Http11Transport`, which writes a request to the wire at once so that many episodes do
not fall into lockstep (its module says why; the measurement is in docs/scale.md). Proxies from the environment
still go through httpx's own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import tenacity

from colbench.errors import LLMError
from colbench.llm.cache import ResponseCache
from colbench.llm.chat_post import BEARER, CHAT_PATH, ChatPost, know_platform
from colbench.llm.http11 import Http11Transport, ssl_context
from colbench.llm.limits import EndpointLimits, Gate
from colbench.types.chat import ChatReply, Message, Usage

log = logging.getLogger(__name__)

_PLACEHOLDER_KEY = "EMPTY"  # local servers need no key, but the openai client refuses to start without one
_RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx


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
    # HTTP connections to keep open at once (None: the openai client's limits, 1000 connections of which 100 stay
    # alive); a harness running N requests at once sets N so the pool never queues or churns them.
    max_connections: int | None = None
    # An empty completion (choices present, content empty or null) is a reply, returned as "", not a fault to
    # retry: set for agents, whose silence is their own (wrong) answer rather than an endpoint failure.
    accept_empty: bool = False

    @property
    def where(self) -> str:
        return f"model {self.model!r} at {self.base_url or 'the default OpenAI URL'}"


ENDPOINT_FIELDS = frozenset(f.name for f in dataclasses.fields(Endpoint)) - {"model"}


@dataclass(frozen=True)
class ChatRequest:
    """One request, built once: ``key`` is everything that determines the reply (the cache key), ``body`` the JSON
    body posted to ``/chat/completions`` (the endpoint's ``extra_body`` merged in, as the openai client does)."""

    key: Mapping[str, Any]
    body: Mapping[str, Any]


class _Unusable(Exception):
    """A 200 reply we cannot use (no choices, empty content): worth another try."""


class LLMRequestRejected(LLMError):
    """The endpoint refused the request itself (400 too long, 401 bad key...): retrying cannot help."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMClient:
    """Chat with one endpoint, sync or async, thread-safe, with cumulative token accounting.

    ``cache``: replies served from (and stored to) disk; ``limits``: request rate and concurrency caps applied to
    async requests that miss the cache (the harness's many concurrent episodes).
    """

    def __init__(
        self, endpoint: Endpoint, *, cache: ResponseCache | None = None, limits: EndpointLimits | None = None
    ) -> None:
        self.endpoint = endpoint
        self.cache = cache
        self.limits = limits if limits is not None and limits.active else None
        self._usage = Usage()
        self._lock = threading.Lock()
        self._sync: openai.OpenAI | None = None
        # per event loop: its async client and the gate enforcing the limits
        self._async: tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI, Gate | None] | None = None
        self._post: ChatPost | None = None  # how the async client of ``_async`` posts a request

    @property
    def usage(self) -> Usage:
        """A snapshot of all usage so far."""
        with self._lock:
            return dataclasses.replace(self._usage)

    def request(self, messages: Sequence[Message]) -> ChatRequest:
        """The request for ``messages`` with this endpoint's model and sampling settings."""
        ep = self.endpoint
        sent = [dict(m) for m in messages]
        extra = dict(ep.extra_body) if ep.extra_body else None
        key = {
            "model": ep.model,
            "base_url": ep.identity or ep.base_url,
            "messages": sent,
            "temperature": ep.temperature,
            "max_tokens": ep.max_tokens,
            "extra_body": extra,
        }
        body: dict[str, Any] = {"model": ep.model, "messages": sent, "temperature": ep.temperature}
        if ep.max_tokens is not None:
            body["max_tokens"] = ep.max_tokens
        if extra:
            body.update(extra)
        return ChatRequest(key, body)

    def chat(self, messages: Sequence[Message]) -> ChatReply:
        request = self.request(messages)
        hit = self._cached(request)
        if hit is not None:
            return hit
        spent = Usage()
        client = self._sync_client()

        def send() -> ChatReply:
            return self._accept(client.post(CHAT_PATH, body=request.body, cast_to=object, options=BEARER), spent)

        try:
            reply: ChatReply = self._retrying(tenacity.Retrying)(send)
        except tenacity.RetryError as exc:
            raise self._exhausted(exc) from None
        except openai.APIStatusError as exc:
            raise self._rejected(exc) from exc
        return self._store(request, reply)

    async def achat(self, messages: Sequence[Message]) -> ChatReply:
        request = self.request(messages)
        hit = self._cached(request)
        if hit is not None:
            return hit
        client, gate = self._async_state()
        async with gate or contextlib.nullcontext():  # retries happen inside the slot
            reply = await self._asend(client, request)
        return self._store(request, reply)

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
            await held[1].close()

    # -- internals --

    async def _asend(self, client: openai.AsyncOpenAI, request: ChatRequest) -> ChatReply:
        spent = Usage()
        post = self._post
        assert post is not None and post.client is client
        failed: list[Exception] = []

        async def send() -> ChatReply:
            if failed:  # the retrier's first attempt: what the try without it raised
                raise failed.pop()
            return self._accept(await post.send(request.body), spent)

        try:  # most requests succeed at once: no retrier is built for them (tenacity's CPU, paid per request)
            return await send()
        except Exception as exc:  # the retrier decides, as if it had made this attempt
            failed.append(exc)
        try:
            reply: ChatReply = await self._retrying(tenacity.AsyncRetrying)(send)
        except tenacity.RetryError as exc:
            raise self._exhausted(exc) from None
        except openai.APIStatusError as exc:
            raise self._rejected(exc) from exc
        return reply

    def _retrying(self, kind: Any) -> Any:
        """A retrier for one request (tenacity's retriers hold per-call state: not shared between requests)."""
        ep = self.endpoint
        return kind(
            stop=tenacity.stop_after_attempt(ep.max_retries + 1),
            wait=_RetryAfterOr(tenacity.wait_random_exponential(multiplier=ep.backoff_s, max=ep.backoff_cap_s), ep),
            retry=tenacity.retry_if_exception(_retryable),
            before_sleep=self._log_retry,
            reraise=False,
        )

    def _exhausted(self, error: tenacity.RetryError) -> LLMError:
        attempts = error.last_attempt.attempt_number
        return LLMError(
            f"{self.endpoint.where}: gave up after {attempts} attempt(s); "
            f"last error: {self._describe(error.last_attempt.exception())}"
        )

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s: retrying after %s", self.endpoint.where, self._describe(exc))

    def _cached(self, request: ChatRequest) -> ChatReply | None:
        if self.cache is None:
            return None
        text = self.cache.get(request.key)
        return None if text is None else ChatReply(text, Usage(), cached=True)

    def _store(self, request: ChatRequest, reply: ChatReply) -> ChatReply:
        if self.cache is not None:
            self.cache.put(request.key, reply.text)
        return reply

    def _sync_client(self) -> openai.OpenAI:
        with self._lock:
            if self._sync is None:
                self._sync = openai.OpenAI(**self._client_kwargs(), **self._sync_pool())
            return self._sync

    def _async_state(self) -> tuple[openai.AsyncOpenAI, Gate | None]:
        # An async HTTP pool belongs to the event loop that opened it: a new loop (a second asyncio.run, say)
        # gets its own client (and gate) instead of a pool whose connections are bound to a closed loop.
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async is None or self._async[0] is not loop:
                limits = self._limits() or openai.DEFAULT_CONNECTION_LIMITS
                transport = Http11Transport(limits)
                http_client = openai.DefaultAsyncHttpxClient(
                    transport=transport, limits=limits, timeout=self.endpoint.timeout_s
                )
                client = openai.AsyncOpenAI(**self._client_kwargs(), http_client=http_client)
                know_platform(client)
                gate = Gate(self.limits) if self.limits is not None else None
                self._async = (loop, client, gate)
                self._post = ChatPost(client, http_client, transport)
            return self._async[1], self._async[2]

    def _client_kwargs(self) -> dict[str, Any]:
        ep = self.endpoint
        return {
            "api_key": ep.api_key or _PLACEHOLDER_KEY,
            "base_url": ep.base_url,
            "timeout": ep.timeout_s,
            "max_retries": 0,
        }

    def _limits(self) -> httpx2.Limits | None:
        """A pool of ``max_connections``, all kept alive (None when the endpoint leaves it to the openai client)."""
        n = self.endpoint.max_connections
        return None if n is None else httpx2.Limits(max_connections=n, max_keepalive_connections=n)

    def _sync_pool(self) -> dict[str, Any]:
        limits = self._limits()
        if limits is None:
            return {}
        client = openai.DefaultHttpxClient(limits=limits, timeout=self.endpoint.timeout_s, verify=ssl_context())
        return {"http_client": client}

    def _accept(self, completion: object, spent: Usage) -> ChatReply:
        """Account for the completion (billed even if unusable), then return it or raise ``_Unusable``.
        ``completion`` is the decoded JSON body (the openai client returns a body that is not JSON as text)."""
        reply = completion if isinstance(completion, dict) else {}
        usage = reply.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        got = Usage(
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            calls=1,
        )
        spent.add(got)
        with self._lock:
            self._usage.add(got)
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Unusable("reply has no choices")
        message = choices[0].get("message")
        text = message.get("content") if isinstance(message, dict) else None
        finish = choices[0].get("finish_reason")
        finish = finish if isinstance(finish, str) else None
        if not isinstance(text, str) or not text.strip():
            if self.endpoint.accept_empty and message is not None:
                return ChatReply(text=text or "", usage=dataclasses.replace(spent), finish_reason=finish)
            raise _Unusable(f"reply has empty content (finish_reason={finish})")
        ids, logprobs = _sampled(choices[0])
        return ChatReply(
            text=text, usage=dataclasses.replace(spent), finish_reason=finish, token_ids=ids, logprobs=logprobs
        )

    def _rejected(self, exc: openai.APIStatusError) -> LLMRequestRejected:
        return LLMRequestRejected(
            f"{self.endpoint.where} refused the request (HTTP {exc.status_code}): {self._describe(exc)}",
            exc.status_code,
        )

    def _describe(self, exc: BaseException | None) -> str:
        if exc is None:
            return "none"
        text = " ".join(str(exc).split())  # one line
        if self.endpoint.api_key:
            text = text.replace(self.endpoint.api_key, "***")
        return f"{type(exc).__name__}: {text[:300]}"


def _count(value: object) -> int:
    """A token count from a reply (missing, null or not a number: 0)."""
    return max(0, int(value)) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _retryable(exc: BaseException) -> bool:
    """Whether another attempt may help: 408/409/429/5xx, dropped connections and timeouts, unusable replies."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    # a 200 reply whose body is not JSON surfaces as a JSONDecodeError from the openai client
    return isinstance(
        exc, openai.APIConnectionError | openai.APIResponseValidationError | _Unusable | json.JSONDecodeError
    )


class _RetryAfterOr(tenacity.wait.wait_base):
    """The server's ``Retry-After``, capped at the endpoint's ``backoff_cap_s``; else the fallback wait."""

    def __init__(self, fallback: tenacity.wait.wait_base, endpoint: Endpoint) -> None:
        self.fallback = fallback
        self.cap = endpoint.backoff_cap_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        hinted = _retry_after(exc)
        return min(hinted, self.cap) if hinted is not None else float(self.fallback(retry_state))


def _retry_after(exc: BaseException | None) -> float | None:
    """The server's ``Retry-After`` (``retry-after-ms`` / ``Retry-After`` as seconds or HTTP date), if any."""
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


def _sampled(choice: dict[str, Any]) -> tuple[tuple[int, ...] | None, tuple[float, ...] | None]:
    """The token ids a choice says the model sampled (vLLM's ``token_ids``) and their log-probs (OpenAI's
    ``logprobs.content``) when there is one per id; anything malformed counts as absent (the text is the reply)."""
    ids = choice.get("token_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        return None, None
    content = choice.get("logprobs")
    content = content.get("content") if isinstance(content, dict) else None
    if not isinstance(content, list) or len(content) != len(ids):
        return tuple(ids), None
    values = [entry.get("logprob") if isinstance(entry, dict) else None for entry in content]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
        return tuple(ids), None
    return tuple(ids), tuple(float(x) for x in values)  # type: ignore[arg-type]
