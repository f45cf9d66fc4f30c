"""OpenEnv: ColBench as an OpenEnv environment server (``colbench serve``) and its client.

OpenEnv (openenv-core 0.3.0) keeps an episode per WebSocket connection: a client connects to ``/ws``, the server
makes that session its own env, and ``reset`` / ``step`` / ``state`` messages drive it; sessions never see each
other and have no id a client could guess or send. ``/health``, ``/schema`` and ``/metadata`` are plain HTTP (and
OpenEnv's stateless HTTP ``/reset`` / ``/step``, which make a fresh env per request). TRL, verifiers, SkyRL and
others consume servers of this kind; ``ColbenchClient`` is the typed client.

What this module adds to OpenEnv's server, which has none of it:

- **a token**: with one set (required for any address other than loopback), every request but ``/health`` needs
  ``Authorization: Bearer TOKEN`` (a WebSocket without it is refused before it opens);
- **size limits**: a request body or WebSocket message over ``max_body_bytes`` gets 413 (HTTP) or closes that
  connection only (WebSocket), and a turn over ``MAX_ACTION_CHARS`` is a validation error;
- **hidden information stays on the server**: observations carry the dialogue and the episode's outcome (reward,
  success, tests passed, leak flags), never the reference or the per-test expectations, unless the server is
  started with ``expose_hidden``.

Session limits (``max_sessions``: one more connection gets ``CAPACITY_REACHED``) and idle expiry
(``session_timeout``: an idle session is closed and its env released) are OpenEnv's own. Needs the ``openenv``
extra.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from pydantic import Field
from websockets.asyncio.client import connect as ws_connect

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.errors import ColbenchError, ConfigError

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
        return self._stepped(*self._open().step(action.message))

    async def step_async(self, action: ColbenchAction, timeout_s: float | None = None, **_: Any) -> ColbenchObservation:
        return self._stepped(*await self._open().astep(action.message))

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
    """The ASGI app ``colbench serve`` runs (see the module docstring)."""
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be >= 1, got {max_sessions}")
    kwargs = dict(env_kwargs or {})
    gym.spec(env_id)  # an unknown id fails here, not in the first session

    def factory() -> ColbenchOpenEnv:
        return ColbenchOpenEnv(env_id, kwargs, expose_hidden)

    app = create_fastapi_app(
        factory,
        ColbenchAction,
        ColbenchObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout),
    )
    app.add_middleware(Guard, token=token, max_body_bytes=max_body_bytes)
    return app


def needs_token(host: str) -> bool:
    """Whether binding ``host`` exposes the server beyond this machine (anything but loopback)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


class Guard:
    """ASGI middleware: the bearer token on every request but ``/health``, and the body size limit."""

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
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            # The server reads a body only up to its declared length (uvicorn frames by it), so the length decides.
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is None:
                await _json(send, 411, "send the request body with a Content-Length")
                return
            if not length.isdigit() or int(length) > self.max_body_bytes:
                await _json(send, 413, f"request body over {self.max_body_bytes} bytes")
                return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Mapping[str, Any]) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


async def _json(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
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
