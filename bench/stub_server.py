"""A light OpenAI-compatible chat server for benchmarks, in its own process: HTTP/1.1 with keep-alive, every reply
the same short completion after exactly ``latency`` seconds, so a benchmark measures the client side against a
known ideal (N requests in flight finish in one latency). One asyncio protocol per connection and a timer per
request (no task, no streams) keep its CPU small, about 0.1 ms a request, most of it the kernel's TCP work: on a
small machine it shares the cores with the client it measures (the benchmarks print its CPU time)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import typing
from typing import Any

_REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Could you tell me more about what you need?"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
    }
).encode()
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
    + f"Content-Length: {len(_REPLY)}\r\n\r\n".encode()
    + _REPLY
)


class _Exchange(asyncio.Protocol):
    """One client connection: HTTP/1.1 with keep-alive. Each request is read whole (head, then Content-Length bytes
    of body, unparsed: the reply is fixed) and answered exactly ``latency_s`` after it was read, by a timer."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)  # (uvloop's are not asyncio.Transport subclasses)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            start = head.find(b"content-length:")
            stop = head.find(b"\r\n", start)
            try:
                length = int(head[start + 15 : stop if stop >= 0 else len(head)]) if start >= 0 else 0
            except ValueError:
                self._close()
                return
            if len(self.buffer) < end + 4 + length:
                return  # the rest of the body is on its way
            del self.buffer[: end + 4 + length]
            self.loop.call_later(self.latency_s, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_RESPONSE)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _serve(latency_s: float, ready: Any) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: _Exchange(latency_s), "127.0.0.1", 0, backlog=4096)
    ready.put(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def _stub_main(latency_s: float, ready: Any) -> None:
    asyncio.run(_serve(latency_s, ready))


def start_stub(latency_s: float) -> tuple[Any, int]:
    """The server process (started; terminate it when done) and its port on 127.0.0.1."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    process = ctx.Process(target=_stub_main, args=(latency_s, ready), daemon=True)
    process.start()
    return process, int(ready.get(timeout=30))
