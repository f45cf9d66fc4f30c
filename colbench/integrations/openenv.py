"""OpenEnv: ColBench as an OpenEnv environment server (``colbench serve``) and its client.

OpenEnv (openenv-core 0.3.0) keeps an episode per WebSocket connection: a client connects to ``/ws``, the server
makes that session its own env, and ``reset`` / ``step`` / ``state`` messages drive it; sessions never see each
other and have no id a client could guess or send. ``/health``, ``/schema`` and ``/metadata`` are plain HTTP. The
server runs in OpenEnv's production mode: no stateless HTTP ``/reset`` / ``/step`` / ``/state`` (each request made
a fresh env, so ``/step`` could never follow a reset) and no MCP (colbench envs have no MCP tools; its HTTP
sessions would hold env slots no connection owns): ``POST /mcp`` answers a JSON-RPC error, which is what OpenEnv's
runtime check (``openenv validate --url``) looks for. TRL, verifiers, SkyRL and others consume servers of this kind;
``ColbenchClient`` is the typed client.

What this module adds to OpenEnv's server, which has none of it:

- **a token**: with one set (required for any address other than loopback), every request but ``/health`` needs
  ``Authorization: Bearer TOKEN`` (a WebSocket without it is refused before it opens);
- **size limits**: a request body or WebSocket message over ``max_body_bytes`` gets 413 (HTTP) or closes that
  connection only (WebSocket), and a turn over ``MAX_ACTION_CHARS`` is a validation error;
- **frames OpenEnv cannot read are answered, not fatal**: a binary frame or JSON that is not an object gets an
  ``INVALID_JSON`` error and the session goes on (OpenEnv itself ends the session on them);
- **refusals that reach the client**: a connection over ``max_sessions`` gets ``CAPACITY_REACHED`` at once, again
  in answer to its first message (a client that sends first would otherwise meet a bare close), then a close with
  code 1013 (try again later); the server logs one line per refusal;
- **infrastructure failures are errors, never rewards**: a step whose simulated human or sandbox failed
  (``InfraError``) answers ``EXECUTION_ERROR`` with a message that says so; the episode is as it was before the
  step, so the client may retry it or reset;
- **hidden information stays on the server**: observations carry the dialogue and the episode's outcome (reward,
  success, tests passed, leak flags), never the reference or the per-test expectations, unless the server is
  started with ``expose_hidden``.

Session limits (``max_sessions``: one more connection gets ``CAPACITY_REACHED``) and idle expiry
(``session_timeout``: an idle session is closed and its env released) are OpenEnv's own. Needs the ``openenv``
extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from fastapi import FastAPI
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, ServerMode, State
from pydantic import Field
from websockets.asyncio.client import connect as ws_connect

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.errors import ColbenchError, ConfigError, InfraError

log = logging.getLogger(__name__)

MAX_ACTION_CHARS = 200_000
#: The ``info`` entries a client sees (the rest, e.g. per-test expected values, stay on the server).
PUBLIC_INFO = (
    "task_id",
    "turn",
    "termination",
    "success",
    "pass_rate",
    "tests_passed",
    "tests_total",
    "similarity",
    "has_page",
    "leak_score",
    "leak",
    "leak_action",
    "leaks",
    "usage",
)
#: The answer to any ``/mcp`` request: a JSON-RPC error (method not found), as OpenEnv's runtime contract expects.
NO_MCP = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32601, "message": "colbench envs have no MCP tools: play an episode over the /ws WebSocket"},
}
HIDDEN_INFO = ("hidden_information", "ground_truth", "score", "answer", "answer_html")


class ColbenchAction(Action):  # type: ignore[misc]
    """One agent turn."""

    message: str = Field(max_length=MAX_ACTION_CHARS)


class ColbenchObservation(Observation):  # type: ignore[misc]
    """The env's observation (the task prompt after a reset, then each human reply) and the public ``info``."""

    text: str = ""
    info: dict[str, Any] = Field(default_factory=dict)


class ColbenchState(State):  # type: ignore[misc]
    task_id: str | None = None
    turn: int = 0
    done: bool = False


class ColbenchOpenEnv(Environment):  # type: ignore[misc]
    """One session's episode: a colbench env made with ``env_id`` and ``env_kwargs``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], expose_hidden: bool = False) -> None:
        super().__init__()
        env = gym.make(env_id, expose_hidden=expose_hidden, **env_kwargs)
        assert isinstance(env, TextEnv)
        self._env = env
        self._expose_hidden = expose_hidden
        self._state = ColbenchState()
        self._closed = False

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> ColbenchObservation:
        observation, info = self._open().reset(seed=seed, options={"task_id": task_id} if task_id else None)
        return self._began(observation, info, episode_id)

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> ColbenchObservation:
        observation, info = await self._open().areset(seed=seed, options={"task_id": task_id} if task_id else None)
        return self._began(observation, info, episode_id)

    def step(self, action: ColbenchAction, timeout_s: float | None = None, **_: Any) -> ColbenchObservation:
        try:
            return self._stepped(*self._open().step(action.message))
        except InfraError as exc:
            raise _infra(exc) from exc

    async def step_async(self, action: ColbenchAction, timeout_s: float | None = None, **_: Any) -> ColbenchObservation:
        try:
            return self._stepped(*await self._open().astep(action.message))
        except InfraError as exc:
            raise _infra(exc) from exc

    def load_tasks(self) -> None:
        """Loads the env's tasks now (they load on first use), so tasks that do not load fail at start."""
        _ = self._env.tasks

    @property
    def state(self) -> ColbenchState:
        return self._state

    def close(self) -> None:
        """Called when the session ends: its connection closed, or idle past the server's timeout (the connection
        may still be open then: its next message gets an error saying so)."""
        self._closed = True
        self._env.close()

    def _open(self) -> TextEnv:
        if self._closed:
            raise ColbenchError("this session has ended (idle past the server's session timeout): connect again")
        return self._env

    def _began(self, observation: str, info: Mapping[str, Any], episode_id: str | None) -> ColbenchObservation:
        self._state = ColbenchState(episode_id=episode_id, task_id=info.get("task_id"))
        return ColbenchObservation(text=observation, info=self._public(info), reward=0.0, done=False)

    def _stepped(
        self, observation: str, reward: Any, terminated: bool, truncated: bool, info: Mapping[str, Any]
    ) -> ColbenchObservation:
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.turn = int(info.get("turn") or 0)
        self._state.done = done
        return ColbenchObservation(text=observation, info=self._public(info), reward=float(reward), done=done)

    def _public(self, info: Mapping[str, Any]) -> dict[str, Any]:
        keys = PUBLIC_INFO + (HIDDEN_INFO if self._expose_hidden else ())
        return {k: info[k] for k in keys if k in info}


def _infra(exc: InfraError) -> InfraError:
    """The error a client sees for a step the harness could not complete: never a reward (it would train as 0)."""
    return InfraError(
        f"infrastructure error, not the agent's ({type(exc).__name__}: {exc}); the episode is as it was before "
        "this step: send it again or reset"
    )


def make_app(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    token: str | None = None,
    max_sessions: int = 64,
    session_timeout: float | None = 600.0,
    max_body_bytes: int = 1 << 20,
    expose_hidden: bool = False,
) -> Any:
    """The ASGI app ``colbench serve`` runs (see the module docstring). Bad arguments (an unknown env id, tasks that
    do not load, env options the env refuses) raise ``ConfigError`` here, before the server listens."""
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be >= 1, got {max_sessions}")
    kwargs = dict(env_kwargs or {})
    try:
        gym.spec(env_id)
    except gym.error.Error:
        known = ", ".join(sorted(k for k in gym.registry if k.startswith("ColBench-")))
        raise ConfigError(f"env {env_id!r} is not registered; colbench's envs: {known}") from None
    probe = ColbenchOpenEnv(env_id, kwargs, expose_hidden)  # the env's own checks, and its tasks loaded, now
    try:
        probe.load_tasks()
    finally:
        probe.close()

    def factory() -> ColbenchOpenEnv:
        return ColbenchOpenEnv(env_id, kwargs, expose_hidden)

    app = FastAPI(title=f"colbench {env_id} (OpenEnv)", version="1.0.0")
    server = HTTPEnvServer(
        factory,
        ColbenchAction,
        ColbenchObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout),
    )
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    app.router.routes[:] = [r for r in app.router.routes if not getattr(r, "path", "").startswith("/mcp")]
    app.add_middleware(Guard, token=token, max_body_bytes=max_body_bytes)
    return app


class Guard:
    """ASGI middleware: the bearer token on every request but ``/health``, the body size limit, and the WebSocket
    frames and refusals OpenEnv's handler gets wrong (module docstring)."""

    def __init__(self, app: Any, *, token: str | None, max_body_bytes: int) -> None:
        self.app, self.token, self.max_body_bytes = app, token, max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.token is not None and scope.get("path") != "/health" and not self._authorised(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401, "reason": "missing or wrong token"})
            else:
                await _json(send, 401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")
            return
        if scope["type"] == "websocket":
            session = SessionFrames(receive, send)
            await self.app(scope, session.receive, session.send)
            return
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            # The server reads a body only up to its declared length (uvicorn frames by it), so the length decides.
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is None:
                await _json(send, 411, "send the request body with a Content-Length")
                return
            if not length.isdigit() or int(length) > self.max_body_bytes:
                await _json(send, 413, f"request body over {self.max_body_bytes} bytes")
                return
        if scope.get("path") == "/mcp":
            # OpenEnv's runtime check (`openenv validate --url`) wants JSON-RPC here; the route itself is removed.
            await _json(send, 200, NO_MCP)
            return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Mapping[str, Any]) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


class SessionFrames:
    """One WebSocket connection's ASGI channels, between the client and OpenEnv's ``/ws`` handler.

        OpenEnv's handler reads text frames only and calls ``.get`` on the parsed JSON, so a binary frame or a JSON
        ``null`` / list / number ends the session with SESSION_ERROR: those frames are answered here and never reach
        it. OpenEnv also closes a connection the client has closed (a traceback in the log each time): that close is
    dropped. Its capacity refusal is sent before the client's first message and followed by a close at once, so a client
        that sends first (OpenEnv's own does) meets a bare close: the refusal is repeated in answer to that message and
        the close carries code 1013 with the reason."""

    REFUSAL_WAIT_S = 10.0

    def __init__(self, receive: Any, send: Any) -> None:
        self._receive, self._send = receive, send
        self._refusal: str | None = None

    async def receive(self) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = await self._receive()
            problem = _frame_problem(message) if message["type"] == "websocket.receive" else None
            if problem is None:
                return message
            await self._send({"type": "websocket.send", "text": _ws_error(problem, "INVALID_JSON")})

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send" and _error_code(message.get("text")) == "CAPACITY_REACHED":
            self._refusal = message["text"]
            log.warning("colbench serve: refused a session: %s", json.loads(message["text"])["data"]["message"])
        elif message["type"] == "websocket.close" and self._refusal is not None:
            await self._refuse(self._refusal)
            return
        elif message["type"] == "websocket.close":
            with contextlib.suppress(OSError):  # the client went first (uvicorn's ClientDisconnected)
                await self._send(message)
            return
        await self._send(message)

    async def _refuse(self, refusal: str) -> None:
        """The close after a capacity refusal: wait briefly for the client's first message and answer it with the
        refusal, then close with 1013 (try again later)."""
        try:
            first = await asyncio.wait_for(self._receive(), self.REFUSAL_WAIT_S)
        except TimeoutError:
            first = {"type": "timeout"}
        if first["type"] == "websocket.disconnect":
            return
        if first["type"] == "websocket.receive":
            await self._send({"type": "websocket.send", "text": refusal})
        await self._send({"type": "websocket.close", "code": 1013, "reason": "CAPACITY_REACHED: try again later"})


def _error_code(text: str | None) -> str | None:
    """The code of an OpenEnv error response (its handler writes them with pydantic, type first), else None."""
    if not text or not text.startswith('{"type":"error"'):
        return None
    code = json.loads(text).get("data", {}).get("code")
    return code if isinstance(code, str) else None


def _frame_problem(message: Mapping[str, Any]) -> str | None:
    """Why OpenEnv's handler cannot take this frame, or None when it can (bad JSON text it answers itself)."""
    text = message.get("text")
    if text is None:
        return "binary frames are not part of the protocol: send each message as JSON text"
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if isinstance(parsed, dict):
        return None
    return f"a message must be a JSON object with a 'type', got {type(parsed).__name__}"


def _ws_error(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


async def _json(send: Any, status: int, detail: str | Mapping[str, Any]) -> None:
    body = json.dumps({"detail": detail} if isinstance(detail, str) else detail).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ColbenchClient(EnvClient):  # type: ignore[misc]
    """OpenEnv's async client for a ``colbench serve`` server (``.sync()`` for the blocking one); ``token``: the
    server's bearer token, when it has one.

        async with ColbenchClient("http://127.0.0.1:8000", token=...) as env:
            result = await env.reset(task_id="...")      # result.observation.text: the task prompt
            result = await env.step(ColbenchAction(message="What should happen with an empty list?"))
    """

    def __init__(self, base_url: str, *, token: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._token = token

    async def connect(self) -> ColbenchClient:
        """OpenEnv's connect, with the bearer token in the WebSocket handshake."""
        if self._ws is None:  # type: ignore[has-type]
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
            try:
                self._ws = await ws_connect(
                    self._ws_url,
                    open_timeout=self._connect_timeout,
                    max_size=self._max_message_size,
                    additional_headers=headers,
                    proxy=None,
                )
            except Exception as exc:
                raise ConnectionError(f"cannot connect to {self._ws_url}: {exc}") from exc
        return self

    def _step_payload(self, action: ColbenchAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: Mapping[str, Any]) -> StepResult:
        observation = ColbenchObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=bool(payload.get("done"))
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: Mapping[str, Any]) -> ColbenchState:
        return ColbenchState(**payload)
