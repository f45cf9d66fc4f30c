"""LLMClient against a real HTTP stub with the real ``openai`` client: retries, faults, accounting, specs."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai_stub import InFlight, StubOpenAIServer

from colbench.errors import ConfigError, InfraError, LLMError
from colbench.llm import (
    Endpoint,
    EndpointLimits,
    Gate,
    LLMClient,
    LLMRequestRejected,
    ResponseCache,
    endpoint_for,
    parse_spec,
)
from colbench.llm.http11 import ssl_context
from colbench.llm.limits import rate_limiter
from colbench.types.chat import ChatReply, Usage

HELLO = [{"role": "user", "content": "hello there"}]


def client_for(stub: StubOpenAIServer, **options: object) -> LLMClient:
    settings: dict[str, object] = {"timeout_s": 5.0, "max_retries": 4, "backoff_s": 0.01}
    settings.update(options)
    return LLMClient(Endpoint(model="stub-model", base_url=stub.base_url, **settings))  # type: ignore[arg-type]


def test_success_returns_text_and_counts_usage(stub: StubOpenAIServer) -> None:
    client = client_for(stub)
    reply = client.chat(HELLO)
    assert isinstance(reply, ChatReply)
    assert reply.text == "echo: hello there"
    assert reply.finish_reason == "stop"
    assert not reply.cached
    # The stub counts whitespace-separated words: prompt "hello there" = 2, reply "echo: hello there" = 3.
    assert reply.usage == Usage(prompt_tokens=2, completion_tokens=3, calls=1)
    client.chat(HELLO)
    assert client.usage.as_dict() == {"prompt_tokens": 4, "completion_tokens": 6, "calls": 2}
    body = stub.requests[0]
    assert body["model"] == "stub-model"
    assert body["messages"] == HELLO
    assert body["temperature"] == 0.0
    assert "max_tokens" not in body
    # No key configured: a placeholder is sent so the openai client starts at all.
    assert stub.headers[0]["authorization"] == "Bearer EMPTY"


def test_max_tokens_and_extra_body_reach_the_server(stub: StubOpenAIServer) -> None:
    client = client_for(stub, max_tokens=32, temperature=0.7, extra_body={"top_k": 5, "seed": 1})
    client.chat(HELLO)
    body = stub.requests[0]
    assert (body["max_tokens"], body["temperature"], body["top_k"], body["seed"]) == (32, 0.7, 5, 1)


def test_rate_limit_is_retried_honouring_retry_after(stub: StubOpenAIServer) -> None:
    stub.enqueue(("status", 429, {"Retry-After": "0.4"}), ("text", "finally"))
    start = time.monotonic()
    reply = client_for(stub).chat(HELLO)
    elapsed = time.monotonic() - start
    assert reply.text == "finally"
    assert stub.request_count == 2
    assert elapsed >= 0.4  # backoff_s alone would have waited ~0.01 s


def test_retry_after_is_capped(stub: StubOpenAIServer) -> None:
    stub.enqueue(("status", 503, {"Retry-After": "120"}), ("text", "ok"))
    start = time.monotonic()
    assert client_for(stub, backoff_cap_s=0.05).chat(HELLO).text == "ok"
    assert time.monotonic() - start < 2


def test_server_errors_are_retried_until_success(stub: StubOpenAIServer) -> None:
    stub.enqueue(("status", 500), ("status", 502), ("status", 503), ("text", "up again"))
    assert client_for(stub).chat(HELLO).text == "up again"
    assert stub.request_count == 4


@pytest.mark.parametrize("fault", [("empty",), ("no_choices",), ("malformed",), ("disconnect",)])
def test_unusable_replies_and_dropped_connections_are_retried(stub: StubOpenAIServer, fault: tuple[str, ...]) -> None:
    stub.enqueue(fault, ("text", "good"))
    client = client_for(stub)
    reply = client.chat(HELLO)
    assert reply.text == "good"
    assert stub.request_count == 2
    if fault in {("empty",), ("no_choices",)}:
        # The unusable completion was still returned (and possibly billed): it is accounted for.
        assert reply.usage.calls == 2
        assert client.usage.calls == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(stub: StubOpenAIServer, status: int) -> None:
    stub.enqueue(("status", status), ("text", "never reached"))
    with pytest.raises(LLMRequestRejected) as info:
        client_for(stub).chat(HELLO)
    assert stub.request_count == 1
    assert info.value.status_code == status
    assert isinstance(info.value, LLMError)
    assert f"HTTP {status}" in str(info.value)


def test_exhausted_retries_raise_an_infra_error_naming_the_endpoint(stub: StubOpenAIServer) -> None:
    stub.enqueue(*[("status", 500)] * 10)
    client = client_for(stub, max_retries=2, api_key="sk-very-secret")
    with pytest.raises(LLMError) as info:
        client.chat(HELLO)
    error = info.value
    assert isinstance(error, InfraError)
    assert stub.request_count == 3
    message = str(error)
    assert "\n" not in message
    assert "stub-model" in message and stub.base_url in message
    assert "3 attempt" in message and "InternalServerError" in message
    assert "sk-very-secret" not in message
    assert stub.headers[0]["authorization"] == "Bearer sk-very-secret"


def test_slow_server_times_out_and_is_retried(stub: StubOpenAIServer) -> None:
    stub.enqueue(("sleep", 3.0), ("text", "fast now"))
    start = time.monotonic()
    reply = client_for(stub, timeout_s=0.3).chat(HELLO)
    assert reply.text == "fast now"
    assert stub.request_count == 2
    assert time.monotonic() - start < 2.5


def test_timeouts_until_exhausted_name_the_timeout(stub: StubOpenAIServer) -> None:
    stub.enqueue(("sleep", 3.0), ("sleep", 3.0))
    with pytest.raises(LLMError, match="APITimeoutError"):
        client_for(stub, timeout_s=0.2, max_retries=1).chat(HELLO)
    assert stub.request_count == 2


def test_async_chat_retries_and_runs_concurrently(stub: StubOpenAIServer) -> None:
    stub.latency_s = 0.3
    stub.enqueue(("status", 429))
    client = client_for(stub)

    async def main() -> list[ChatReply]:
        return await asyncio.gather(*(client.achat([{"role": "user", "content": f"q{i}"}]) for i in range(5)))

    start = time.monotonic()
    replies = asyncio.run(main())
    elapsed = time.monotonic() - start
    assert sorted(r.text for r in replies) == [f"echo: q{i}" for i in range(5)]
    assert stub.request_count == 6  # one 429 retried
    assert client.usage.calls == 5
    assert elapsed < 1.5  # five 0.3 s requests (plus one retry) overlapped, not ~1.8 s in series
    # A second event loop gets a working client too.
    assert asyncio.run(client.achat(HELLO)).text == "echo: hello there"


@pytest.fixture
def tls_server_context(tmp_path: Path) -> Iterator[tuple[ssl.SSLContext, Path]]:
    """A server-side TLS context with a fresh self-signed certificate for localhost, and the certificate's path.
    The process's client TLS context is rebuilt before and after, so no other test sees this certificate."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    request += ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([openssl, *request], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    ssl_context.cache_clear()
    yield context, cert
    ssl_context.cache_clear()


def test_https_endpoints_go_through_the_transport_with_their_certificates_verified(
    tls_server_context: tuple[ssl.SSLContext, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    context, cert = tls_server_context
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with StubOpenAIServer(tls=context) as stub:
        assert stub.base_url.startswith("https://")
        # a certificate no trusted authority signed: refused before any request is sent
        with pytest.raises(LLMError, match="gave up after 1 attempt"):
            asyncio.run(client_for(stub, max_retries=0).achat(HELLO))
        assert stub.request_count == 0
        # trusted (as SSL_CERT_FILE names it): several requests over the keep-alive TLS connections
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        ssl_context.cache_clear()
        client = client_for(stub, max_connections=2)

        async def main() -> list[ChatReply]:
            try:
                return await asyncio.gather(*(client.achat([{"role": "user", "content": f"q{i}"}]) for i in range(6)))
            finally:
                await client.aclose()

        assert sorted(r.text for r in asyncio.run(main())) == [f"echo: q{i}" for i in range(6)]
        assert client.chat(HELLO).text == "echo: hello there"  # the sync path, on the same TLS context
        assert stub.request_count == 7 and client.usage.calls == 7


def test_async_requests_are_what_the_openai_client_would_send(stub: StubOpenAIServer) -> None:
    """The async path posts its bytes straight to the pool (no per-request openai pipeline): the same body and the
    same headers as the openai client's own ``post`` of that body."""
    client = client_for(stub)
    assert asyncio.run(client.achat(HELLO)).text == "echo: hello there"

    async def through_openai() -> None:
        own = openai.AsyncOpenAI(api_key="EMPTY", base_url=stub.base_url, max_retries=0, timeout=5.0)
        body = client.request(HELLO).body
        await own.post("/chat/completions", body=body, cast_to=object, options={"security": {"bearer_auth": True}})
        await own.close()

    asyncio.run(through_openai())
    assert stub.requests[0] == stub.requests[1]
    assert stub.headers[0] == stub.headers[1] and stub.headers[0]["authorization"] == "Bearer EMPTY"


def test_async_client_error_raises_at_once(stub: StubOpenAIServer) -> None:
    stub.enqueue(("status", 401))
    with pytest.raises(LLMRequestRejected):
        asyncio.run(client_for(stub).achat(HELLO))
    assert stub.request_count == 1


def test_endpoint_repr_hides_the_key() -> None:
    endpoint = Endpoint(model="m", api_key="sk-hidden")
    assert "sk-hidden" not in repr(endpoint)


class TestSpecs:
    @pytest.fixture(autouse=True)
    def clean_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "COLBENCH_SIMULATOR_BASE_URL",
            "COLBENCH_SIMULATOR_API_KEY",
            "COLBENCH_AGENT_BASE_URL",
            "COLBENCH_AGENT_API_KEY",
        ):
            monkeypatch.delenv(name, raising=False)

    def test_model_and_defaults(self) -> None:
        endpoint = endpoint_for("openai:gpt-4o-mini", "agent")
        assert endpoint == Endpoint(model="gpt-4o-mini")

    def test_model_names_may_contain_colons_and_slashes(self) -> None:
        assert endpoint_for("openai:meta-llama/Llama-3.1-8B:latest", "agent").model == (
            "meta-llama/Llama-3.1-8B:latest"
        )

    def test_role_env_vars_win_over_generic_ones(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", "http://generic/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "generic-key")
        monkeypatch.setenv("COLBENCH_SIMULATOR_BASE_URL", "http://sim/v1")
        monkeypatch.setenv("COLBENCH_SIMULATOR_API_KEY", "sim-key")
        sim = endpoint_for("openai:big", "simulator")
        agent = endpoint_for("openai:small", "agent")
        assert (sim.base_url, sim.api_key) == ("http://sim/v1", "sim-key")
        assert (agent.base_url, agent.api_key) == ("http://generic/v1", "generic-key")

    def test_explicit_overrides_win_over_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("COLBENCH_AGENT_BASE_URL", "http://env/v1")
        monkeypatch.setenv("COLBENCH_AGENT_API_KEY", "env-key")
        endpoint = endpoint_for(
            "openai:m", "agent", base_url="http://flag/v1", api_key=None, timeout_s=5.0, temperature=1.0
        )
        assert endpoint.base_url == "http://flag/v1"
        assert endpoint.api_key == "env-key"  # None means "not given": the env var still applies
        assert (endpoint.timeout_s, endpoint.temperature) == (5.0, 1.0)

    @pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "openai:  ", "anthropic:claude", "", "OpenAI:gpt-4o"])
    def test_bad_spec_is_a_config_error_naming_it(self, spec: str) -> None:
        with pytest.raises(ConfigError) as info:
            endpoint_for(spec, "agent")
        message = str(info.value)
        assert repr(spec) in message and "openai:MODEL" in message and "\n" not in message

    def test_unknown_option_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError, match="temprature"):
            endpoint_for("openai:m", "agent", temprature=0.5)

    def test_env_resolved_endpoint_talks_to_the_server(
        self, stub: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("COLBENCH_AGENT_BASE_URL", stub.base_url)
        monkeypatch.setenv("COLBENCH_AGENT_API_KEY", "agent-key")
        reply = LLMClient(endpoint_for("openai:tiny", "agent", max_retries=0)).chat(HELLO)
        assert reply.text == "echo: hello there"
        assert stub.requests[0]["model"] == "tiny"
        assert stub.headers[0]["authorization"] == "Bearer agent-key"


# -- the client owns caching and limits ---------------------------------------------------------------------------


def test_a_cached_reply_costs_no_request_and_no_tokens(stub: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    endpoint = Endpoint(model="stub-model", base_url=stub.base_url, max_retries=0)
    first = LLMClient(endpoint, cache=cache).chat(HELLO)
    again = LLMClient(endpoint, cache=ResponseCache(tmp_path / "c.sqlite")).chat(HELLO)  # another client, one file
    assert stub.request_count == 1 and not first.cached and again.cached and again.text == first.text
    assert again.usage == Usage() and first.usage.calls == 1
    assert asyncio.run(LLMClient(endpoint, cache=cache).achat(HELLO)).cached and stub.request_count == 1
    other = LLMClient(Endpoint(model="stub-model", base_url=stub.base_url, max_retries=0, temperature=0.7), cache=cache)
    assert not other.chat(HELLO).cached and stub.request_count == 2  # sampling settings are part of the key


def test_one_request_is_built_once_and_is_what_the_server_receives(stub: StubOpenAIServer) -> None:
    client = client_for(stub, max_tokens=7, extra_body={"seed": 3})
    request = client.request(HELLO)
    assert request.key["model"] == request.body["model"] == "stub-model"
    assert request.key["messages"] is request.body["messages"]  # one list, not rebuilt
    client.chat(HELLO)
    sent = stub.requests[0]
    assert (sent["messages"], sent["max_tokens"], sent["seed"]) == (HELLO, 7, 3)


def test_limits_cap_requests_in_flight_but_not_cache_hits(stub: StubOpenAIServer, tmp_path: Path) -> None:
    slow = InFlight("ok", 0.05)
    stub.default = slow
    cache = ResponseCache(tmp_path / "c.sqlite")
    client = LLMClient(
        Endpoint(model="m", base_url=stub.base_url, max_retries=0),
        cache=cache,
        limits=EndpointLimits(max_concurrency=2),
    )

    async def many() -> list[ChatReply]:
        return await asyncio.gather(*(client.achat([{"role": "user", "content": f"q{i % 8}"}]) for i in range(16)))

    replies = asyncio.run(many())
    assert slow.most <= 2 and stub.request_count <= 16
    cached_before = sum(r.cached for r in replies)
    again = asyncio.run(many())
    assert all(r.cached for r in again) and stub.request_count == 16 - cached_before


def test_rate_limiter_spreads_requests() -> None:
    async def go() -> float:
        limiter = rate_limiter(1200)  # 20/s, bursts of 20
        start = time.monotonic()
        for _ in range(30):
            await limiter.acquire()
        return time.monotonic() - start

    elapsed = asyncio.run(go())
    assert 0.4 <= elapsed < 1.5, elapsed  # 20 at once, then 10 more at 20/s
    with pytest.raises(ConfigError):
        rate_limiter(0)


def test_gate_caps_requests_in_flight() -> None:
    most, now = [0], [0]

    async def one(gate: Gate) -> None:
        async with gate:
            now[0] += 1
            most[0] = max(most[0], now[0])
            await asyncio.sleep(0.01)
            now[0] -= 1

    async def go() -> None:
        gate = Gate(EndpointLimits(max_concurrency=3))
        await asyncio.gather(*(one(gate) for _ in range(20)))

    asyncio.run(go())
    assert most[0] == 3


# -- the one spec parser ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "role", "kind", "value"),
    [
        ("openai:gpt-4o", "agent", "openai", "gpt-4o"),
        ("openai:meta/llama:8b", "simulator", "openai", "meta/llama:8b"),
        ("llamacpp", "simulator", "llamacpp", ""),
        ("llamacpp:/m/x.gguf", "agent", "llamacpp", "/m/x.gguf"),
        ("scripted", "simulator", "scripted", ""),
        ("scripted:ask", "agent", "scripted", "ask"),
        ("my_pkg.agents:Smart", "agent", "plugin", "my_pkg.agents:Smart"),
    ],
)
def test_specs_parse(spec: str, role: str, kind: str, value: str) -> None:
    parsed = parse_spec(spec, role)
    assert (parsed.kind, parsed.value, parsed.text) == (kind, value, spec)


@pytest.mark.parametrize(
    ("spec", "role"),
    [
        ("gpt-4o", "agent"),
        ("openai:", "simulator"),
        ("scripted:dance", "agent"),
        ("scripted:ask", "simulator"),
        ("my_pkg:Agent", "simulator"),
        ("llamacpp:", "agent"),
        (":x", "agent"),
        ("", "simulator"),
    ],
)
def test_a_bad_spec_is_one_line_listing_what_the_role_accepts(spec: str, role: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(spec, role)
    message = str(info.value)
    assert f"bad {role} spec {spec!r}" in message and "\n" not in message
    assert "openai:MODEL" in message or "scripted agent" in message
    if role == "simulator":
        assert "module.path:Attr" not in message  # only what a simulator may be


def test_the_old_name_local_is_no_model_spec() -> None:
    """``local`` was the embedded model's name before ``llamacpp``; nothing was released with it, so it is gone."""
    with pytest.raises(ConfigError, match=r"bad simulator spec 'local'"):
        parse_spec("local", "simulator")
    with pytest.raises(ConfigError, match=r"bad simulator spec 'local:/m/x.gguf'"):
        parse_spec("local:/m/x.gguf", "simulator")


# -- the async HTTP/1.1 transport under LLMClient -------------------------------------------------------------------

COMPLETION = json.dumps(
    {"choices": [{"message": {"content": "raw ok"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}
).encode()


def _response(body: bytes = COMPLETION, *, status: str = "200 OK", headers: str = "", length: bool = True) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _chunked(body: bytes, size: int = 7) -> bytes:
    chunks = b"".join(
        b"%x;ext=1\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    )
    return _response(chunks + b"0\r\nX-Trailer: t\r\n\r\n", headers="Transfer-Encoding: chunked\r\n", length=False)


class RawServer:
    """An asyncio HTTP server on the running loop that answers each request with the next scripted raw response
    (bytes, written in pieces to exercise the client's framing), optionally closing the connection after it."""

    def __init__(self, *replies: bytes | tuple[bytes, bool]) -> None:
        self.replies = list(replies)
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                reply = self.replies.pop(0) if self.replies else _response()
                data, close = reply if isinstance(reply, tuple) else (reply, False)
                for i in range(0, len(data), 50):  # in pieces, as a network would deliver them
                    writer.write(data[i : i + 50])
                    await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def raw_client(server: RawServer, **options: object) -> LLMClient:
    settings: dict[str, object] = {"timeout_s": 5.0, "max_retries": 0, "api_key": "sk-raw"}
    settings.update(options)
    return LLMClient(Endpoint(model="m", base_url=server.base_url, **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "reply",
    [
        _response(),
        _chunked(COMPLETION),
        _response(headers="Connection: close\r\n", length=False) + b"",  # delimited by the close
        b"HTTP/1.1 100 Continue\r\n\r\n" + _response(),
        _response(gzip.compress(COMPLETION), headers="Content-Encoding: gzip\r\n"),
    ],
    ids=["content-length", "chunked", "until-close", "interim-100", "gzip"],
)
def test_the_transport_reads_every_framing(reply: bytes) -> None:
    close = b"Connection: close" in reply

    async def go() -> ChatReply:
        async with RawServer((reply, close)) as server:
            client = raw_client(server)
            try:
                return await client.achat(HELLO)
            finally:
                await client.aclose()

    result = asyncio.run(go())
    assert (result.text, result.finish_reason, result.usage.prompt_tokens) == ("raw ok", "stop", 3)


def test_the_transport_keeps_connections_alive_and_replaces_closed_ones() -> None:
    async def go() -> tuple[int, list[bytes]]:
        async with RawServer(_response(), (_response(), True), _response(), _response()) as server:
            client = raw_client(server)
            try:
                for _ in range(2):  # one connection for both; the server closes it after the second
                    assert (await client.achat(HELLO)).text == "raw ok"
                await asyncio.sleep(0.05)
                for _ in range(2):  # a new one, kept alive again
                    assert (await client.achat(HELLO)).text == "raw ok"
            finally:
                await client.aclose()
            return server.connections, server.requests

    connections, requests = asyncio.run(go())
    assert connections == 2
    head = requests[0].split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"post /v1/chat/completions http/1.1") and b"authorization: bearer sk-raw" in head


def test_the_transport_caps_connections_at_the_pool_size() -> None:
    async def go() -> tuple[int, list[str]]:
        async with RawServer() as server:
            client = raw_client(server, max_connections=2)
            try:
                replies = await asyncio.gather(
                    *(client.achat([{"role": "user", "content": f"q{i}"}]) for i in range(6))
                )
            finally:
                await client.aclose()
            return server.connections, [r.text for r in replies]

    connections, texts = asyncio.run(go())
    assert connections == 2 and texts == ["raw ok"] * 6


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"NOT HTTP\r\n\r\n",
        _response(b"x", headers="Content-Length: 2\r\n"),
    ],
    ids=["cut-short", "not-http", "conflicting-lengths"],
)
def test_a_broken_response_is_a_connection_error(reply: bytes) -> None:
    async def go() -> None:
        async with RawServer((reply, True)) as server:
            client = raw_client(server)
            try:
                await client.achat(HELLO)
            finally:
                await client.aclose()

    with pytest.raises(LLMError, match="APIConnectionError"):
        asyncio.run(go())


def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once the socket is closed
    client = LLMClient(Endpoint(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout_s=2.0))
    with pytest.raises(LLMError, match="APIConnectionError"):
        asyncio.run(client.achat(HELLO))


def test_a_request_on_an_open_connection_is_written_before_the_loop_runs_anything_else() -> None:
    """The point of the transport: no pass through the event loop between the request and the wire (the task's
    first step writes it), so requests answered together do not all go out together."""

    async def go() -> list[bytes]:
        async with RawServer() as server:
            client = raw_client(server)
            try:
                await client.achat(HELLO)  # opens the connection
                transport = client._async_state()[0]._client._transport  # type: ignore[attr-defined]
                conn = next(c for idle in transport._idle.values() for c in idle)
                written: list[bytes] = []
                write = conn.transport.write
                conn.transport.write = lambda data: (written.append(data), write(data))
                task = asyncio.ensure_future(client.achat([{"role": "user", "content": "second"}]))
                await asyncio.sleep(0)  # the task's first step runs before this coroutine resumes
                assert written and b'"second"' in written[0], "the request was not written in the task's first step"
                assert (await task).text == "raw ok"
            finally:
                await client.aclose()
            return written

    assert asyncio.run(go())


def test_the_transport_runs_on_uvloop(stub: StubOpenAIServer) -> None:
    """Ray's async actors run on uvloop when it is installed: its transports are not asyncio.Transport subclasses."""
    uvloop = pytest.importorskip("uvloop")
    client = client_for(stub, max_retries=0)

    async def go() -> list[str]:
        try:
            first = await client.achat(HELLO)
            more = await asyncio.gather(*(client.achat([{"role": "user", "content": f"q{i}"}]) for i in range(3)))
            return [first.text, *(r.text for r in more)]
        finally:
            await client.aclose()

    assert uvloop.run(go()) == ["echo: hello there", "echo: q0", "echo: q1", "echo: q2"]
