"""OpenEnv: ColBench as an OpenEnv environment server (``colbench serve``) and its client.

OpenEnv (openenv-core 0.3.0) keeps an episode per WebSocket connection: a client connects to ``/ws``, the server
makes that session its own env, and ``reset`` / ``step`` / ``state`` messages drive it; sessions never see each
other and have no id a client could guess or send. ``/health``, ``/schema`` and ``/metadata`` are plain HTTP.

**Simulation mode, served as OpenEnv's production routes.** An episode is what OpenEnv's guide calls simulation
mode: the trainer owns it (``reset``, one action per ``step``, a reward and ``done`` on each). A step's action is
either a turn (``ColbenchAction(message=...)``) or one of the env's MCP tools, ``ask_human(question)`` and
``submit_answer(answer)``, called the way RFC 003 has simulation mode call them: ``step(CallToolAction(...))``
(OpenEnv's ``MCPToolClient.call_tool``), ``step(ListToolsAction())`` to list them. Both kinds of action drive the
same episode of the same session, so a trainer may mix them. The tools are registered as simulation-mode tools
(``MCPEnvironment.tool(mode="simulation")``). The routes, though, are registered in OpenEnv's production mode, which
departs from its guide on purpose: production mode there means MCP tools served directly on ``/mcp`` with no episode
control and no rewards, while here it only drops OpenEnv's stateless HTTP ``/reset`` / ``/step`` / ``/state`` (each
request made a fresh env, so ``/step`` could never follow a reset). ``/mcp`` (HTTP and WebSocket) and MCP JSON-RPC
messages on ``/ws`` are refused with a JSON-RPC error: a tool called there would play an episode whose reward no one
receives, and OpenEnv's HTTP MCP sessions would hold env slots no connection owns. OpenEnv's runtime check
(``openenv validate --url``) passes.

**The scorer as a rubric (RFC 004).** The environment's ``rubric`` is a ``ColbenchRubric`` (OpenEnv's
``TrajectoryRubric``): 0 for each question, the scorer's verdict on the final answer, read from the record the env's
scorer made of it (never a second scoring); ``compute_step_rewards()`` puts the whole reward on the answer step.
Every reward the server sends is the rubric's, checked against the env's own.

What this module adds to OpenEnv's server, which has none of it:

- **a token**: with one set (required for any address other than loopback), every request but ``/health`` needs
  ``Authorization: Bearer TOKEN``, or the token as the password of Basic credentials (a client that sends no headers,
  OpenEnv's ``MCPToolClient``, gets them from a URL ``http://colbench:TOKEN@host:8000``); a WebSocket without it is
  refused before it opens;
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
import base64
import contextlib
import hmac
import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
from fastapi import FastAPI
from fastmcp import FastMCP
from fastmcp.client.client import CallToolResult
from mcp.types import TextContent
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, ServerMode, State
from openenv.core.rubrics import TrajectoryRubric
from pydantic import Field, ValidatorFunctionWrapHandler, model_validator
from websockets.asyncio.client import connect as ws_connect

import colbench  # noqa: F401 (registers the ids)
from colbench.env.core import TextEnv
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.integrations.env_config import default_env_id
from colbench.types.dialogue import ANSWER_MARKER, is_answer

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
    "taskenv",
    "similarity",
    "has_page",
    "leak_score",
    "leak",
    "leak_action",
    "leaks",
    "usage",
)
#: The env ``colbench serve`` and the image serve by default: the newest backend id, as ``colbench score`` uses.
DEFAULT_ENV = default_env_id()
#: Why MCP outside an episode is refused: its tools are played as steps of a ``/ws`` session, which carry rewards.
MCP_REFUSED = (
    "colbench's MCP tools (ask_human, submit_answer) are simulation-mode tools: call them as steps of an episode on "
    "the /ws WebSocket (OpenEnv's MCPToolClient.call_tool, or step(CallToolAction(...))), where each gets its reward"
)
#: The answer to any ``/mcp`` request: a JSON-RPC error (method not found), as OpenEnv's runtime contract expects.
NO_MCP = {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": MCP_REFUSED}}
HIDDEN_INFO = ("hidden_information", "ground_truth", "score", "answer", "answer_html")


class ColbenchAction(Action):  # type: ignore[misc]
    """One agent turn. As the server's action model it also admits OpenEnv's MCP actions: a step whose data has
    ``"type": "call_tool"`` or ``"list_tools"`` is validated as ``CallToolAction`` / ``ListToolsAction`` (OpenEnv's
    own routing does so only for servers whose action model is MCP's alone)."""

    message: str = Field(max_length=MAX_ACTION_CHARS)

    @model_validator(mode="wrap")
    @classmethod
    def _mcp_actions(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "call_tool":
            return CallToolAction.model_validate(data)
        if kind == "list_tools":
            return ListToolsAction.model_validate(data)
        return handler(data)


class ColbenchObservation(Observation):  # type: ignore[misc]
    """The env's observation (the task prompt after a reset, then each human reply) and the public ``info``."""

    text: str = ""
    info: dict[str, Any] = Field(default_factory=dict)


class ColbenchState(State):  # type: ignore[misc]
    task_id: str | None = None
    turn: int = 0
    done: bool = False


def verdict_reward(record: Mapping[str, Any]) -> float:
    """The reward in a scorer's record of a final answer (``Score.details()``): a frontend v1 score's ``reward``, a
    backend score's ``pass_rate``, a frontend v0 score's ``similarity``. An answer the scorer could not judge has no
    reward at all (its env raises ``InfraError`` before a record reaches here)."""
    if record.get("status") not in (None, "ok"):
        raise InfraError(f"the scorer could not judge the answer ({record.get('status')}: {record.get('error')})")
    for key in ("reward", "pass_rate", "similarity"):
        if record.get(key) is not None:
            return float(record[key])
    raise ColbenchError(f"the scorer's record has no reward: {sorted(record)}")


class ColbenchRubric(TrajectoryRubric):  # type: ignore[misc]
    """The env's scorer as an OpenEnv rubric (RFC 004): 0.0 for every question, then the scorer's verdict on the
    final answer. It reads the record the env's scorer made (``info["score"]`` of the server-side observation, which
    clients never see), so an answer is scored once, in its sandbox. Reset with the episode."""

    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        _, final = trajectory[-1]
        record = final.info.get("score")
        if not isinstance(record, Mapping):
            raise ColbenchError("the final observation carries no score record")
        return verdict_reward(record)

    def compute_step_rewards(self) -> list[float]:
        """The whole reward on the step that delivered the answer, 0 on each question (as the env rewards)."""
        if not self._trajectory:
            return []
        return [0.0] * (len(self._trajectory) - 1) + [self.score_trajectory(self._trajectory)]


#: The env's MCP tools: name -> the turn a call makes from its one argument.
TOOL_TURNS: dict[str, tuple[str, Callable[[str], str]]] = {
    "ask_human": ("question", lambda question: question),
    "submit_answer": ("answer", lambda answer: answer if is_answer(answer) else f"{ANSWER_MARKER}\n{answer}"),
}


class ColbenchOpenEnv(MCPEnvironment):  # type: ignore[misc]
    """One session's episode: a colbench env made with ``env_id`` and ``env_kwargs``, played by turns or by its
    simulation-mode MCP tools, rewarded by its rubric."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], expose_hidden: bool = False) -> None:
        super().__init__(FastMCP("colbench"))
        self.rubric = ColbenchRubric()  # MCPEnvironment's constructor takes no rubric; Environment reads this one
        self._mode = "simulation"  # the mode MCPEnvironment lists and calls mode-specific tools in
        try:
            # From the spec, not the id: Gymnasium warns that an id older than the newest of its name is "out of
            # date", and serving v1 is a choice.
            env = gym.make(gym.spec(env_id), expose_hidden=expose_hidden, **env_kwargs)
        except TypeError as exc:  # an option the env does not take
            raise ConfigError(f"env {env_id}: {str(exc).split(' was raised from', 1)[0]}") from None
        assert isinstance(env.unwrapped, TextEnv)
        self._env: TextEnv = env.unwrapped
        self._expose_hidden = expose_hidden
        self._state = ColbenchState()
        self._closed = False

        @self.tool(mode="simulation")  # type: ignore[untyped-decorator]
        def ask_human(question: str) -> str:
            """Ask the person one or a few short clarifying questions; uses one of your turns. Returns the reply."""
            return self._tool_step(CallToolAction(tool_name="ask_human", arguments={"question": question})).text

        @self.tool(mode="simulation")  # type: ignore[untyped-decorator]
        def submit_answer(answer: str) -> str:
            """Deliver your final answer (the complete code); this ends the episode and scores it."""
            return self._tool_step(CallToolAction(tool_name="submit_answer", arguments={"answer": answer})).text

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> ColbenchObservation:
        self._reset_rubric()
        began = self._open().reset(seed=seed, options={"task_id": task_id} if task_id else None)
        return self._began(episode_id, *began)

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> ColbenchObservation:
        self._reset_rubric()
        began = await self._open().areset(seed=seed, options={"task_id": task_id} if task_id else None)
        return self._began(episode_id, *began)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, CallToolAction) and action.tool_name in TOOL_TURNS:
            message = _tool_message(action)
            if isinstance(message, ToolError):
                return CallToolObservation(tool_name=action.tool_name, result=None, error=message)
            return _tool_result(action.tool_name, self._turn_sync(action, message))
        return super().step(action, timeout_s=timeout_s, **kwargs)  # a turn, or OpenEnv's list/unknown tool

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, CallToolAction) and action.tool_name in TOOL_TURNS:
            message = _tool_message(action)
            if isinstance(message, ToolError):
                return CallToolObservation(tool_name=action.tool_name, result=None, error=message)
            return _tool_result(action.tool_name, await self._turn_async(action, message))
        if isinstance(action, ColbenchAction):
            return await self._turn_async(action, action.message)
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **_: Any) -> Observation:
        if not isinstance(action, ColbenchAction):
            raise ColbenchError(f"a step takes a ColbenchAction or an MCP tool action, got {type(action).__name__}")
        return self._turn_sync(action, action.message)

    def _tool_step(self, action: CallToolAction) -> ColbenchObservation:
        """A tool called as a plain function (OpenEnv's code mode): the turn it makes, synchronously."""
        message = _tool_message(action)
        if isinstance(message, ToolError):
            raise ConfigError(message.message)
        return self._turn_sync(action, message)

    def _turn_sync(self, action: Action, message: str) -> ColbenchObservation:
        try:
            return self._stepped(action, *self._open().step(message))
        except InfraError as exc:
            raise _infra(exc) from exc

    async def _turn_async(self, action: Action, message: str) -> ColbenchObservation:
        try:
            return self._stepped(action, *await self._open().astep(message))
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
        super().close()

    def _open(self) -> TextEnv:
        if self._closed:
            raise ColbenchError("this session has ended (idle past the server's session timeout): connect again")
        return self._env

    def _began(self, episode_id: str | None, observation: str, info: Mapping[str, Any]) -> ColbenchObservation:
        self._state = ColbenchState(episode_id=episode_id, task_id=info.get("task_id"))
        return ColbenchObservation(text=observation, info=self._public(info), reward=0.0, done=False)

    def _stepped(
        self, action: Action, observation: str, reward: Any, terminated: bool, truncated: bool, info: Mapping[str, Any]
    ) -> ColbenchObservation:
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.turn = int(info.get("turn") or 0)
        self._state.done = done
        # The rubric sees the whole info (the scorer's record included); the client, the public part.
        scored = ColbenchObservation(text=observation, info=dict(info), reward=None, done=done)
        judged = float(self._apply_rubric(action, scored))
        if not math.isclose(judged, float(reward), abs_tol=1e-9):
            raise ColbenchError(f"the rubric's reward {judged} is not the env's {float(reward)}: a colbench bug")
        return ColbenchObservation(text=observation, info=self._public(info), reward=judged, done=done)

    def _public(self, info: Mapping[str, Any]) -> dict[str, Any]:
        keys = PUBLIC_INFO + (HIDDEN_INFO if self._expose_hidden else ())
        return {k: info[k] for k in keys if k in info}


def _tool_message(action: CallToolAction) -> str | ToolError:
    """The turn a call of one of the env's tools makes, or the error its arguments get (the episode unchanged)."""
    argument, turn = TOOL_TURNS[action.tool_name]
    given = action.arguments
    value = given.get(argument)
    if set(given) != {argument} or not isinstance(value, str):
        problem = f"{action.tool_name} takes one string argument, {argument!r}; got {sorted(given)}"
    elif len(value) > MAX_ACTION_CHARS:
        problem = f"{argument} over {MAX_ACTION_CHARS} chars"
    elif action.tool_name == "ask_human" and is_answer(value):
        problem = f"a question may not contain {ANSWER_MARKER!r} (it would end the episode): call submit_answer"
    else:
        return turn(value)
    return ToolError(error_type=ToolErrorType.INVALID_ARGS, message=problem)


def _tool_result(name: str, observation: ColbenchObservation) -> CallToolObservation:
    """A tool call's observation: the human's reply (or a note that the episode ended) as the tool's text, the
    public ``info`` beside it, and the step's reward and ``done``."""
    if not observation.done:
        text = observation.text
    elif observation.info.get("termination") == "turn_limit":
        text = "That was your last turn: the episode is over and that message was scored as your answer."
    else:
        text = "Answer received; the episode is over."
    result = CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"result": text, "info": observation.info},
        meta=None,
        data=text,
        is_error=False,
    )
    return CallToolObservation(tool_name=name, result=result, reward=observation.reward, done=observation.done)


def _infra(exc: InfraError) -> InfraError:
    """The error a client sees for a step the harness could not complete: never a reward (it would train as 0)."""
    return InfraError(
        f"infrastructure error, not the agent's ({type(exc).__name__}: {exc}); the episode is as it was before "
        "this step: send it again or reset"
    )


def make_app(
    env_id: str = DEFAULT_ENV,
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
    # /mcp (HTTP and WebSocket) is OpenEnv's production-mode tool access: refused (the module docstring says why).
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
        """The token as a bearer token, or as the password of HTTP Basic credentials (any user name): what a client
        that sends no headers of its own sends for a URL holding them (OpenEnv's ``MCPToolClient`` for
        ``http://colbench:TOKEN@host:8000``, through websockets and httpx)."""
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(given.strip(), validate=True).decode().partition(":")[2]
            except ValueError:  # not base64, or not UTF-8 (UnicodeDecodeError is a ValueError)
                return False
        elif scheme.lower() != "bearer":
            return False
        assert self.token is not None
        return hmac.compare_digest(given.strip().encode(), self.token.encode())


class SessionFrames:
    """One WebSocket connection's ASGI channels, between the client and OpenEnv's ``/ws`` handler.

    OpenEnv's handler reads text frames only and calls ``.get`` on the parsed JSON, so a binary frame or a JSON
    ``null`` / list / number ends the session with SESSION_ERROR: those frames are answered here and never reach it,
    as are MCP JSON-RPC messages (the tools are steps here: ``MCP_REFUSED``). OpenEnv also closes a connection the
    client has closed (a traceback in the log each time): that close is dropped. Its capacity refusal is sent before
    the client's first message and followed by a close at once, so a client that sends first (OpenEnv's own does)
    meets a bare close: the refusal is repeated in answer to that message and the close carries code 1013 with the
    reason."""

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
            await self._send({"type": "websocket.send", "text": _ws_error(*problem)})

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


def _frame_problem(message: Mapping[str, Any]) -> tuple[str, str] | None:
    """Why this frame is answered here (the message and its error code), or None when OpenEnv's handler takes it
    (bad JSON text it answers itself): frames it cannot read, and MCP JSON-RPC messages (``MCP_REFUSED``)."""
    text = message.get("text")
    if text is None:
        return "binary frames are not part of the protocol: send each message as JSON text", "INVALID_JSON"
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return f"a message must be a JSON object with a 'type', got {type(parsed).__name__}", "INVALID_JSON"
    if parsed.get("type") == "mcp":
        return MCP_REFUSED, "UNKNOWN_TYPE"
    return None


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
        reward, done = payload.get("reward"), bool(payload.get("done"))
        observation = ColbenchObservation(**payload.get("observation", {}), reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: Mapping[str, Any]) -> ColbenchState:
        return ColbenchState(**payload)
