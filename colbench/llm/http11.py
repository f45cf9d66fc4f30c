"""A small HTTP/1.1 keep-alive transport for the async ``openai`` client, framed by h11.

It writes a request to an open connection at once, without handing the event loop to anyone else first. That
matters with many episodes at once: through httpx's own pool (anyio checkpoints) or aiohttp (a task writes the
body), a request reaches the wire only after every other ready task has run, so N requests answered together go
out together, come back together and keep the whole batch in lockstep: every turn pays for the CPU of all N.
Written at once, they spread out and stay spread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import ipaddress
import socket
import ssl
import time
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import h11
import httpx2


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context per process (loading the CA bundle costs tens of milliseconds: not once per client)."""
    return httpx2.create_ssl_context()


_Origin = tuple[str, str, int]  # scheme, host, port
_DNS_TTL_S = 60.0


_MAX_HEAD = 64 * 1024  # bytes of a response head (status line and headers) h11 buffers before giving up


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time; h11 does the framing (request encoding, Content-Length,
    chunked and close-delimited bodies, interim 1xx responses, keep-alive rules), this class only moves bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Reply] | None = None
        self.lost = False
        self.idle_since = 0.0
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self._response: h11.Response | None = None
        self._body: list[bytes] = []

    @property
    def usable(self) -> bool:
        """Fit for another request: the last exchange ended cleanly and the connection is open."""
        return (
            not self.lost
            and self._h11.our_state is h11.DONE
            and self._h11.their_state is h11.DONE
            and not self._h11.trailing_data[0]  # bytes past the response: the framing cannot be trusted
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def start(self, request: _Request, waiter: asyncio.Future[Reply]) -> bytes:
        """The bytes of ``request`` on this connection; its response will resolve ``waiter``."""
        if self._h11.our_state is h11.DONE:
            self._h11.start_next_cycle()
        self.waiter, self._response, self._body = waiter, None, []
        method, target, headers, body = request
        try:
            return b"".join(
                (
                    self._h11.send(h11.Request(method=method, target=target, headers=headers)) or b"",
                    self._h11.send(h11.Data(data=body)) or b"" if body else b"",
                    self._h11.send(h11.EndOfMessage()) or b"",
                )
            )
        except h11.LocalProtocolError as exc:
            self.waiter = None
            raise httpx2.LocalProtocolError(str(exc)) from exc

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # no isinstance check: uvloop's transports (Ray's actors run on uvloop) are not asyncio.Transport subclasses
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes nobody asked for: the connection cannot be trusted with a request
            self.close()
            return
        self._h11.receive_data(data)
        self._events()

    def eof_received(self) -> bool | None:
        self._end_of_input()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_of_input()

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    def _end_of_input(self) -> None:
        seen, self.lost = self.lost, True
        if not seen and self.waiter is not None:
            with contextlib.suppress(RuntimeError):  # h11 refuses input after it has seen the end already
                self._h11.receive_data(b"")  # a close-delimited body ends here
                self._events()
        self._fail(httpx2.RemoteProtocolError("Server disconnected without sending a complete response."))

    def _events(self) -> None:
        while self.waiter is not None:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._fail(httpx2.RemoteProtocolError(f"bad HTTP response: {exc}"))
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Response):
                if event.status_code == 101:
                    self._fail(httpx2.RemoteProtocolError("bad HTTP response: unexpected protocol switch"))
                    return
                self._response = event
            elif isinstance(event, h11.Data):
                self._body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._done()
            elif isinstance(event, h11.ConnectionClosed):
                self._fail(httpx2.RemoteProtocolError("Server disconnected without sending a complete response."))
            # h11.InformationalResponse (100 Continue, 103 Early Hints): the final response follows

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def _done(self) -> None:
        waiter, self.waiter = self.waiter, None
        response = self._response
        assert response is not None  # h11 sends EndOfMessage only after a Response
        if not self.usable:
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(Reply(response, b"".join(self._body)))


@dataclass(frozen=True)
class Reply:
    """A complete response as h11 read it: the status line and headers, and the whole body."""

    head: h11.Response
    body: bytes

    @property
    def status_code(self) -> int:
        return self.head.status_code

    @property
    def encoded(self) -> bool:
        """The body is compressed (``Content-Encoding``): ``response()`` decodes it, ``body`` is as sent."""
        return any(
            name == b"content-encoding" and value.strip().lower() != b"identity" for name, value in self.head.headers
        )

    def response(self) -> httpx2.Response:
        return httpx2.Response(
            self.head.status_code,
            headers=self.head.headers.raw_items(),
            content=self.body,
            extensions={"http_version": b"HTTP/" + self.head.http_version, "reason_phrase": bytes(self.head.reason)},
        )


# a request as h11 takes it: method, target, headers, body
_Request = tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]


@dataclass(frozen=True)
class _Exchange:
    """One request on its way and the future its response resolves."""

    request: _Request
    waiter: asyncio.Future[Reply]


def _connected(sock: socket.socket) -> bool:
    """Whether a non-blocking ``connect`` has already completed (it has at once for a server on this machine)."""
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


class Http11Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive for the async openai client, built to add no wait of its own.

    A request on an open idle connection is encoded and written before the first ``await``, so it reaches the wire
    in the same turn of the event loop that made it (httpx's pool first passes through anyio checkpoints, aiohttp
    writes the body from a task of its own: each sends the request only after every other ready task has run).
    New connections: the host is looked up once (a minute, shared by the connections opened meanwhile), TLS with one
    context per process. The pool follows ``httpx2.Limits``: at most ``max_connections`` open (a request beyond them
    waits for one, up to the pool timeout), ``max_keepalive_connections`` kept idle for ``keepalive_expiry``
    seconds. Timeouts: connect, pool, and read (the whole response; colbench never streams). Errors are httpx's,
    so the openai client maps them as usual (timeouts to ``APITimeoutError``, the rest to ``APIConnectionError``).
    """

    def __init__(self, limits: httpx2.Limits) -> None:
        self._max = limits.max_connections
        self._keep = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else self._max
        self._expiry = limits.keepalive_expiry
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._opening = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._dns: dict[tuple[str, int], tuple[float, asyncio.Future[list[Any]]]] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            body = request.content
        except httpx2.RequestNotRead:
            body = await request.aread()
        head = (request.method.encode("ascii"), request.url.raw_path, list(request.headers.raw), body)
        reply = await self.exchange(request.url, head, request.extensions.get("timeout", {}))
        response = reply.response()
        response.request = request
        return response

    async def exchange(self, url: httpx2.URL, request: _Request, timeouts: Mapping[str, Any]) -> Reply:
        """``request`` (method, target, headers with Host and Content-Length, body) sent to ``url``'s origin, and
        its reply: what ``handle_async_request`` does without building httpx's request and response objects
        (the LLM client posts its chat requests so: their CPU, paid per request, delays the last of N sent at
        once). Errors are httpx's, as there."""
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        origin = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        exchange = _Exchange(request, asyncio.get_running_loop().create_future())
        conn = self._take_idle(origin)
        if conn is not None:
            self._send(conn, exchange)
        else:
            conn = await self._new_connection(origin, timeouts, exchange)  # sent, and counted busy
        released = False
        try:
            waiter = exchange.waiter
            read = timeouts.get("read")
            try:
                async with asyncio.timeout(read):
                    reply = await waiter
            except TimeoutError as exc:
                raise httpx2.ReadTimeout(f"no complete response within {read} s") from exc
            released = True
            self._release(origin, conn)
        finally:
            if not released:
                self._discard(conn)
        return reply

    async def aclose(self) -> None:
        for conn in [*self._busy, *(conn for idle in self._idle.values() for conn in idle)]:
            conn.close()
        self._idle.clear()
        self._busy.clear()

    # -- the pool

    def _send(self, conn: _Connection, exchange: _Exchange) -> None:
        try:
            message = conn.start(exchange.request, exchange.waiter)
        except BaseException:
            self._discard(conn)
            raise
        self._busy.add(conn)
        assert conn.transport is not None
        conn.transport.write(message)

    def _open(self) -> int:
        return self._opening + len(self._busy) + sum(len(idle) for idle in self._idle.values())

    def _take_idle(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to have been closed by the server
            if conn.usable and (self._expiry is None or now - conn.idle_since <= self._expiry):
                return conn
            conn.close()
            self._wake()
        return None

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        self._busy.discard(conn)
        if not conn.usable:
            conn.close()
        else:
            idle = self._idle.setdefault(origin, [])
            if self._keep is not None and sum(len(i) for i in self._idle.values()) >= self._keep:
                conn.close()
            else:
                conn.idle_since = time.monotonic()
                idle.append(conn)
        self._wake()

    def _discard(self, conn: _Connection) -> None:
        self._busy.discard(conn)
        conn.close()
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _new_connection(self, origin: _Origin, timeouts: Mapping[str, Any], exchange: _Exchange) -> _Connection:
        """A connection for ``exchange`` (a new one, or one freed while waiting for room in the pool), the request
        written to it and the connection counted busy."""
        loop = asyncio.get_running_loop()
        while self._max is not None and self._open() >= self._max:
            if not self._close_an_idle_connection():
                waiter = loop.create_future()
                self._waiters.append(waiter)
                pool = timeouts.get("pool")
                try:
                    async with asyncio.timeout(pool):
                        await waiter
                except TimeoutError as exc:
                    raise httpx2.PoolTimeout(f"no free connection within {pool} s") from exc
                finally:
                    if not waiter.done():
                        waiter.cancel()
            conn = self._take_idle(origin)
            if conn is not None:
                self._send(conn, exchange)
                return conn
        self._opening += 1
        connect = timeouts.get("connect")
        try:
            async with asyncio.timeout(connect):
                conn = await self._connect(origin, exchange)
            self._busy.add(conn)
            return conn
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"no connection to {origin[1]}:{origin[2]} within {connect} s") from exc
        except OSError as exc:
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        finally:
            self._opening -= 1
            self._wake()

    def _close_an_idle_connection(self) -> bool:
        """At the limit, an idle connection to another origin gives way to a new one."""
        for idle in self._idle.values():
            if idle:
                idle.pop(0).close()
                return True
        return False

    async def _connect(self, origin: _Origin, exchange: _Exchange) -> _Connection:
        """Connect and send ``exchange``'s request. To a server on this machine the TCP handshake is over as soon as
        ``connect`` returns: the request is sent on the socket at once, before the waits for asyncio's transport, so
        the first requests of many episodes started together do not all wait for every one of them to be set up."""
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = ssl_context() if scheme == "https" else None
        failure: OSError | None = None
        for family, kind, proto, address in await self._addresses(host, port):
            sock = socket.socket(family, kind, proto)
            conn = _Connection()
            unsent = conn.start(exchange.request, exchange.waiter)  # a response may come before the transport
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with contextlib.suppress(BlockingIOError):  # in progress
                    sock.connect(address)
                if tls is None and _connected(sock):
                    with contextlib.suppress(BlockingIOError):
                        unsent = unsent[sock.send(unsent) :]
                else:
                    await loop.sock_connect(sock, address)  # waits for the handshake under way
                await loop.create_connection(
                    lambda made=conn: made, sock=sock, ssl=tls, server_hostname=host if tls is not None else None
                )
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            except BaseException:
                sock.close()
                raise
            if unsent:
                assert conn.transport is not None
                conn.transport.write(unsent)
            return conn
        raise failure or OSError(f"no address for {host}")

    async def _addresses(self, host: str, port: int) -> list[Any]:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            if ip.version == 4:
                return [(socket.AF_INET, socket.SOCK_STREAM, 0, (host, port))]
            return [(socket.AF_INET6, socket.SOCK_STREAM, 0, (host, port, 0, 0))]
        key = (host, port)
        held = self._dns.get(key)
        if held is None or held[0] < time.monotonic():
            lookup = asyncio.ensure_future(self._lookup(host, port))
            held = (time.monotonic() + _DNS_TTL_S, lookup)
            self._dns[key] = held
        try:
            return await asyncio.shield(held[1])
        except OSError:
            if self._dns.get(key) is held:
                del self._dns[key]  # a failed lookup is not remembered
            raise

    @staticmethod
    async def _lookup(host: str, port: int) -> list[Any]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(family, kind, proto, address) for family, kind, proto, _, address in infos]
