"""A local OpenAI-compatible chat server for tests, with programmable faults.

Tests drive the real ``openai`` client against it, so retries, timeouts and reply parsing are exercised end
to end without a network or a model. Each request takes the next scripted action from a queue; when the queue
is empty the ``default`` responder answers. Actions:

- ``("text", "hello")``: a normal completion whose content is ``"hello"``.
- ``("status", 429)`` or ``("status", 503, {"Retry-After": "0.2"})``: an error status, optional extra headers.
- ``("sleep", seconds)``: wait, then answer with the default responder (a shorter client timeout fires).
- ``("empty",)``: a completion whose content is ``""``.
- ``("no_choices",)``: a well-formed body with an empty ``choices`` list.
- ``("malformed",)``: a 200 reply whose body is not JSON.
- ``("disconnect",)``: close the connection without answering.
- ``("sampled", text, token_ids, logprobs, finish_reason)``: a completion that also carries the token ids the model
  sampled (``choices[0].token_ids``, as vLLM returns them with ``return_token_ids``) and, unless None, their
  log-probs in the OpenAI format (``choices[0].logprobs.content[k].logprob``).

The ``default`` responder may also return an action (a tuple) instead of a text, to fault chosen requests.
Every request body (decoded JSON) is recorded in ``requests`` and its headers in ``headers``, in order.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Action = tuple[Any, ...]
Responder = Callable[[dict[str, Any]], str | Action]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


def echo_last_user(request: dict[str, Any]) -> str:
    """Default responder: repeats the last user message, so tests can see what arrived."""
    users = [m.get("content") for m in request.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1]}" if users else "echo"


def _tokens(text: str) -> int:
    return len(text.split())


class StubOpenAIServer:
    """Serve ``POST /v1/chat/completions`` on 127.0.0.1 (free port) in a background thread.

    Use as a context manager, or call ``start()`` / ``stop()``. ``latency_s`` delays every reply; ``default``
    answers requests when no scripted action is queued; ``tls``: serve HTTPS with this server-side context (the
    base URL is then ``https://localhost:PORT/v1``).
    """

    def __init__(
        self, default: Responder = echo_last_user, *, latency_s: float = 0.0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.default = default
        self.latency_s = latency_s
        self.tls = tls
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --

    def enqueue(self, *actions: Action) -> None:
        """Append actions; each request consumes one, in order."""
        with self._lock:
            self._script.extend(actions)

    def script(self, actions: Iterable[Action]) -> None:
        """Replace the pending actions."""
        with self._lock:
            self._script = deque(actions)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- lifecycle --

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("StubOpenAIServer is not started")
        host, port = self._server.server_address[:2]
        return f"https://localhost:{port}/v1" if self.tls is not None else f"http://{host!s}:{port}/v1"

    def start(self) -> StubOpenAIServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes handlers blocked in a scripted sleep
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> StubOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (called from handler threads) --

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> Action | None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self._script.popleft() if self._script else None

    def _completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        with self._lock:
            n = len(self.requests)
        return {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": _tokens(prompt),
                "completion_tokens": _tokens(text),
                "total_tokens": _tokens(prompt) + _tokens(text),
            },
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that time out leave broken pipes behind: expected here, not worth a traceback."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        stub = self.server.stub
        if self.path.split("?")[0] not in CHAT_PATHS:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        action = stub._record(body, {k.lower(): v for k, v in self.headers.items()})
        if stub.latency_s and stub._stopping.wait(stub.latency_s):
            return
        self._act(stub, body, action)

    def _act(self, stub: StubOpenAIServer, body: dict[str, Any], action: Action | None) -> None:
        action = action or ("default",)
        kind = action[0]
        if kind == "default":
            reply = stub.default(body)
            if isinstance(reply, tuple):
                self._act(stub, body, reply)
            else:
                self._send_json(200, stub._completion(body, reply))
        elif kind == "text":
            self._send_json(200, stub._completion(body, str(action[1])))
        elif kind == "empty":
            self._send_json(200, stub._completion(body, ""))
        elif kind == "no_choices":
            reply = stub._completion(body, "")
            reply["choices"] = []
            self._send_json(200, reply)
        elif kind == "malformed":
            self._send(200, b"{this is not json", "application/json")
        elif kind == "status":
            status = int(action[1])
            extra = action[2] if len(action) > 2 else {}
            error = {"error": {"message": f"stub status {status}", "type": "stub_error", "code": status}}
            self._send_json(status, error, extra)
        elif kind == "sleep":
            if stub._stopping.wait(float(action[1])):
                return
            self._send_json(200, stub._completion(body, stub.default(body)))
        elif kind == "sampled":
            reply = stub._completion(body, str(action[1]))
            choice = reply["choices"][0]
            choice["token_ids"], choice["finish_reason"] = list(action[2]), action[4]
            if action[3] is not None:
                choice["logprobs"] = {"content": [{"token": f"t{i}", "logprob": x} for i, x in enumerate(action[3])]}
            self._send_json(200, reply)
        elif kind == "disconnect":
            self.close_connection = True
            self.connection.close()
        else:
            raise ValueError(f"unknown stub action {action!r}")

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) before we answered


class InFlight:
    """A responder that answers ``reply`` after ``seconds`` and records the most requests it held at once."""

    def __init__(self, reply: str, seconds: float) -> None:
        self.reply = reply
        self.seconds = seconds
        self.most = 0
        self._now = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        with self._lock:
            self._now += 1
            self.most = max(self.most, self._now)
        threading.Event().wait(self.seconds)
        with self._lock:
            self._now -= 1
        return self.reply
