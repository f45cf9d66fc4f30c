"""A light OpenAI-compatible chat server for benchmarks, in its own process: HTTP/1.1 with keep-alive, every reply
the same short completion after exactly ``latency`` seconds, so a benchmark measures the client side against a
known ideal (N requests in flight finish in one latency)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
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


async def _serve(latency_s: float, ready: Any) -> None:
    """HTTP/1.1 with keep-alive; reads each request whole (body unparsed: the reply is fixed), answers after L."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                start = head.lower().find(b"content-length:")
                length = int(head[start + 15 : head.find(b"\r\n", start)]) if start >= 0 else 0
                await reader.readexactly(length)
                await asyncio.sleep(latency_s)
                writer.write(_RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
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
