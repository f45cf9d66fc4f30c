"""OpenEnv: ``colbench serve`` in its own process, driven by the real OpenEnv client package (its ``EnvClient`` and
its MCP client, ``MCPToolClient``, in one episode), and attacked (no or a wrong token, bad JSON, JSON that is not an
object, binary frames, huge bodies and messages, guessing sessions, too many sessions, concurrent resets, idle
expiry, a failing human endpoint, MCP outside an episode). Every attack gets a clear error and leaves the other
sessions as they were; bad arguments stop the server before it listens. The scorer is the environment's OpenEnv
rubric."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core")

import contextlib

import httpx
from openai_stub import StubOpenAIServer
from openenv.cli._validation import validate_running_environment
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from colbench._util.hosts import needs_token
from colbench.errors import InfraError
from colbench.integrations.openenv import (
    DEFAULT_ENV,
    ColbenchAction,
    ColbenchClient,
    ColbenchOpenEnv,
    ColbenchRubric,
    verdict_reward,
)
from colbench.tasks import Task

TOKEN = "s3cret-token-for-tests"
ASK = "What should happen with an empty input?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, *args: str, token: bool = True) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "COLBENCH_TEST_TOKEN": TOKEN}
        command = [sys.executable, "-m", "colbench", "serve", "--port", str(self.port), "--tasks", "backend-sample"]
        command += ["--env-options", json.dumps({"sandbox": "bwrap"}), *args]
        if token:
            command += ["--token-env", "COLBENCH_TEST_TOKEN"]
        # A file, not a pipe (a full pipe would stall the server); open until the test is done reading it.
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.process = subprocess.Popen(command, env=env, stderr=self.stderr, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"colbench serve exited: {self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise AssertionError("colbench serve did not come up in 120 s")

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self) -> None:
        self.process.terminate()  # uvicorn waits for open connections; a test that failed may have left one
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server("--max-sessions", "16", "--max-body-bytes", "65536")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def tokenless_server() -> Iterator[Server]:
    """A server on loopback without a token: OpenEnv's own clients (MCPToolClient, validate) send no headers."""
    running = Server(token=False)
    yield running
    running.stop()


def client(server: Server, token: str | None = TOKEN) -> ColbenchClient:
    return ColbenchClient(server.url, token=token, message_timeout_s=60)


def test_the_openenv_client_plays_an_episode(server: Server, bundled_tasks: list[Task]) -> None:
    task = bundled_tasks[3]

    async def episode() -> tuple[Any, Any, Any, Any]:
        async with client(server) as env:
            first = await env.reset(task_id=task.task_id, seed=1)
            asked = await env.step(ColbenchAction(message=ASK))
            done = await env.step(ColbenchAction(message=f"I WANT TO ANSWER:\n{task.ground_truth}"))
            return first, asked, done, await env.state()

    first, asked, done, state = asyncio.run(episode())
    assert "Python function" in first.observation.text and first.observation.info["task_id"] == task.task_id
    assert not asked.done and asked.observation.text and asked.observation.info["turn"] == 1
    assert done.done and done.reward == 1.0 and done.observation.info["success"] is True
    assert state.task_id == task.task_id and state.done and state.step_count == 2
    # The hidden reference never leaves the server (not asked for): not in any observation, not in the state.
    everything = json.dumps([r.observation.model_dump() for r in (first, asked, done)]) + state.model_dump_json()
    assert task.ground_truth.splitlines()[0] not in everything.replace("I WANT TO ANSWER", "")
    assert "hidden_information" not in everything and "ground_truth" not in everything and '"score"' not in everything


def test_the_sync_client_and_concurrent_sessions_are_isolated(server: Server, bundled_tasks: list[Task]) -> None:
    async def session(task: Task, turns: int) -> tuple[str | None, int]:
        async with client(server) as env:
            await env.reset(task_id=task.task_id)
            for _ in range(turns):
                await env.step(ColbenchAction(message=ASK))
            state = await env.state()
            return state.task_id, state.turn

    async def together() -> list[tuple[str | None, int]]:
        return await asyncio.gather(*(session(bundled_tasks[i], i + 1) for i in range(5)))  # concurrent resets

    assert asyncio.run(together()) == [(bundled_tasks[i].task_id, i + 1) for i in range(5)]
    with client(server).sync() as env:
        result = env.reset(task_id=bundled_tasks[0].task_id)
        assert result.observation.info["turn"] == 0


def test_no_token_or_a_wrong_token_is_refused(server: Server) -> None:
    for token in (None, "wrong-token"):
        with pytest.raises(ConnectionError):
            asyncio.run(client(server, token=token).connect())
        with pytest.raises(ConnectionError):  # OpenEnv's own client, the token in its URL (Basic credentials)
            asyncio.run(MCPToolClient(base_url=with_token(server, token or "")).connect())
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        res = httpx.post(f"{server.url}/reset", json={}, headers=headers)
        assert res.status_code == 401 and "token" in res.json()["detail"]
    for malformed in ("Basic !!!", "Basic " + base64.b64encode(b"\xff:x").decode(), f"Token {TOKEN}"):
        assert httpx.get(f"{server.url}/schema", headers={"Authorization": malformed}).status_code == 401
    assert httpx.get(f"{with_token(server, TOKEN)}/schema").status_code == 200  # httpx sends the URL's credentials
    assert httpx.get(f"{server.url}/health").status_code == 200  # health needs no token


def with_token(server: Server, token: str) -> str:
    """The server's URL with the token as the password of its credentials: how a client that sends no headers of
    its own (OpenEnv's MCPToolClient) authenticates (any user name)."""
    return server.url.replace("://", f"://colbench:{token}@")


def test_bad_and_huge_requests_get_4xx_and_disturb_no_session(server: Server, bundled_tasks: list[Task]) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    big = httpx.post(f"{server.url}/step", content=b"x" * 200_000, headers={**auth, "content-type": "application/json"})
    assert big.status_code == 413
    # No stateless HTTP episodes (each request made a fresh env, so /step always failed) and no MCP: /ws is the way.
    for method, path in (("POST", "/reset"), ("POST", "/step"), ("GET", "/state")):
        res = httpx.request(method, f"{server.url}{path}", json={"action": {"message": ASK}}, headers=auth)
        assert res.status_code in (404, 405), (path, res.status_code)
    mcp = httpx.post(f"{server.url}/mcp", json={"method": "openenv/session/create", "id": 1}, headers=auth).json()
    assert mcp["error"]["code"] == -32601 and "/ws" in mcp["error"]["message"]  # no sessions outside /ws
    paths = httpx.get(f"{server.url}/openapi.json", headers=auth).json()["paths"]
    assert {"/health", "/schema", "/metadata"} <= set(paths) and not {"/reset", "/step", "/state", "/mcp"} & set(paths)

    async def attack() -> list[dict[str, Any]]:
        url = server.url.replace("http", "ws") + "/ws"
        async with client(server) as victim:
            await victim.reset(task_id=bundled_tasks[1].task_id)
            await victim.step(ColbenchAction(message=ASK))
            replies = []
            async with ws_connect(url, additional_headers=auth) as ws:
                for raw in ("{not json", json.dumps({"type": "launch"}), json.dumps({"type": "step", "data": {}})):
                    await ws.send(raw)
                    replies.append(json.loads(await ws.recv()))
                # guessing a session: a new connection is a new session, with no episode of anyone else's
                await ws.send(json.dumps({"type": "step", "data": {"message": ASK}}))
                replies.append(json.loads(await ws.recv()))
                # JSON that is not an object, and binary frames: answered, and the session goes on
                for frame in ("null", "[1, 2]", "42", '"reset"', b"\x00\x01binary"):
                    await ws.send(frame)
                    replies.append(json.loads(await ws.recv()))
                await ws.send(json.dumps({"type": "reset", "data": {"task_id": bundled_tasks[2].task_id}}))
                replies.append(json.loads(await ws.recv()))
                await ws.send(json.dumps({"type": "step", "data": {"message": "y" * 100_000}}))  # over the limit
                with pytest.raises(ConnectionClosed):  # the server closes this connection only
                    await ws.recv()
            state = await victim.state()  # the victim's session goes on as it was
            replies.append({"victim_turn": state.turn, "victim_task": state.task_id})
            after = await victim.step(ColbenchAction(message=ASK))
            replies.append({"victim_turn_after": after.observation.info["turn"]})
            return replies

    replies = asyncio.run(attack())
    codes = [r.get("data", {}).get("code") for r in replies[:9]]
    assert codes == ["INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR"] + ["INVALID_JSON"] * 5
    assert "reset" in replies[3]["data"]["message"]
    assert "JSON object" in replies[4]["data"]["message"] and "binary" in replies[8]["data"]["message"]
    assert replies[9]["type"] == "observation"
    assert replies[9]["data"]["observation"]["info"]["task_id"] == bundled_tasks[2].task_id
    assert replies[10] == {"victim_turn": 1, "victim_task": bundled_tasks[1].task_id}
    assert replies[11] == {"victim_turn_after": 2}
    assert "Traceback" not in server.log()


def test_too_many_sessions_and_idle_expiry() -> None:
    server = Server("--max-sessions", "3", "--session-timeout", "4")  # its own: no other test's sessions count

    async def scenario() -> tuple[str, str, int | None, bool]:
        sessions = [client(server) for _ in range(3)]
        for s in sessions:
            await s.connect()
            await s.reset()
        # One more, read raw: the refusal comes at once, then (after the client's first message) a 1013 close.
        url = server.url.replace("http", "ws") + "/ws"
        async with ws_connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            refused = json.loads(await ws.recv())["data"]["code"]
            await ws.send(json.dumps({"type": "reset", "data": {}}))
            await ws.recv()
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            close_code = closed.value.rcvd.code if closed.value.rcvd else None
        # OpenEnv's own client sends its reset first: it reads the refusal too, not a bare close.
        with pytest.raises(RuntimeError) as sent_first:
            await client(server).reset()
        await asyncio.sleep(10)  # every session idles past the 4 s timeout: the server ends them
        fresh = client(server)
        await fresh.reset()  # room again
        await fresh.close()
        gone = False
        try:
            await sessions[0].step(ColbenchAction(message=ASK))
        except Exception:
            gone = True
        for s in sessions:
            with contextlib.suppress(Exception):
                await s.close()
        return refused, str(sent_first.value), close_code, gone

    try:
        refused, sent_first, close_code, gone = asyncio.run(scenario())
    finally:
        server.stop()
    assert refused == "CAPACITY_REACHED" and "CAPACITY_REACHED" in sent_first and close_code == 1013 and gone
    log = server.log()
    assert log.count("refused a session") == 2 and "Traceback" not in log  # one line per refusal


def test_a_failing_human_is_an_error_never_a_reward(bundled_tasks: list[Task]) -> None:
    """The simulated human's endpoint fails on the first turn, then on a later one: each step answers an error that
    says so (no reward, no done), the episode stays as it was, and the same session plays on once it answers."""
    task = bundled_tasks[3]
    with StubOpenAIServer(lambda _: "Empty input gives an empty list.") as human:
        human.enqueue(("status", 503))  # the first turn fails; the next request is answered
        server = Server(
            "--simulator", "openai:stub-human", "--simulator-base-url", human.base_url, "--simulator-max-retries", "0"
        )

        async def scenario() -> list[Any]:
            seen: list[Any] = []
            async with client(server) as env:
                await env.reset(task_id=task.task_id)
                for _ in range(2):
                    try:
                        seen.append(await env.step(ColbenchAction(message=ASK)))
                    except RuntimeError as exc:  # OpenEnv's client raises the server's error
                        seen.append(str(exc))
                    seen.append((await env.state()).turn)
                human.enqueue(("status", 503))  # a later turn fails
                for _ in range(2):
                    try:
                        seen.append(await env.step(ColbenchAction(message=ASK)))
                    except RuntimeError as exc:
                        seen.append(str(exc))
                    seen.append((await env.state()).turn)
            return seen

        try:
            first_failed, turn_a, first_ok, turn_b, later_failed, turn_c, later_ok, turn_d = asyncio.run(scenario())
        finally:
            server.stop()
    for failed in (first_failed, later_failed):
        assert isinstance(failed, str) and "EXECUTION_ERROR" in failed and "infrastructure error" in failed
    assert (turn_a, turn_b, turn_c, turn_d) == (0, 1, 1, 2)  # a failed step leaves the episode as it was
    assert first_ok.observation.text == later_ok.observation.text == "Empty input gives an empty list."
    assert not first_ok.done and first_ok.reward == 0.0 and later_ok.observation.info["turn"] == 2
    assert "Traceback" not in server.log()


def test_bad_arguments_stop_the_server_before_it_listens() -> None:
    for args, wanted in (
        (["--tasks", "/nonexistent"], "/nonexistent"),
        (["--env", "NoSuchEnv-v1"], "NoSuchEnv-v1"),
        (["--env-options", '{"bogus": 1}'], "'bogus'"),  # an option the env does not take (was a traceback, exit 1)
    ):
        done = subprocess.run(
            [sys.executable, "-m", "colbench", "serve", "--port", str(free_port()), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        errors = [line for line in done.stderr.splitlines() if "Warning" not in line and "logger." not in line]
        assert done.returncode == 2 and len(errors) == 1 and wanted in errors[0], (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_openenv_runtime_validation_passes(tokenless_server: Server) -> None:
    """OpenEnv's own check of a running server (``openenv validate --url``): production mode, all criteria met."""
    report = validate_running_environment(tokenless_server.url)
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and report["mode"] == "production" and not failed, failed


def test_serving_beyond_loopback_needs_a_token() -> None:
    assert not needs_token("127.0.0.1") and not needs_token("::1") and not needs_token("localhost")
    assert needs_token("0.0.0.0") and needs_token("10.1.2.3") and needs_token("my-host")
    done = subprocess.run(
        [sys.executable, "-m", "colbench", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--token-env" in done.stderr and done.stderr.count("\n") == 1


def test_mcp_tools_and_turns_play_one_episode_with_openenv_mcp_client(
    server: Server, bundled_tasks: list[Task]
) -> None:
    """OpenEnv's MCPToolClient against a running server that needs a token (given in the URL): the tools listed,
    ask_human called, a plain turn, then submit_answer as a step (reward 1, done); one episode behind all of them (3
    steps, 3 turns). Bad arguments are a tool error that leaves the episode as it was."""
    task = bundled_tasks[3]

    async def episode() -> tuple[Any, ...]:
        async with MCPToolClient(base_url=with_token(server, TOKEN), message_timeout_s=60) as env:
            await env.reset(task_id=task.task_id)
            tools = {t.name: t.input_schema for t in await env.list_tools()}
            reply = await env.call_tool("ask_human", question=ASK)
            with pytest.raises(RuntimeError, match="invalid_args") as bad:
                await env.call_tool("ask_human", question=f"I WANT TO ANSWER:\n{task.ground_truth}")
            turn = await env.step(ColbenchAction(message="Anything else I should know?"))
            done = await env.step(CallToolAction(tool_name="submit_answer", arguments={"answer": task.ground_truth}))
            state = await env.state()
            return tools, reply, str(bad.value), turn, done, state

    tools, reply, bad, turn, done, state = asyncio.run(episode())
    assert tools["ask_human"]["required"] == ["question"] and tools["submit_answer"]["required"] == ["answer"]
    assert isinstance(reply, str) and reply and "submit_answer" in bad
    assert turn.reward == 0.0 and not turn.done
    assert done.done and done.reward == 1.0 and state.step_count == 3
    info = done.observation.result["structured_content"]["info"]
    assert info["turn"] == 3 and info["success"] is True and info["task_id"] == task.task_id
    assert "hidden_information" not in json.dumps(done.observation.result) and '"score"' not in json.dumps(info)


def test_mcp_outside_an_episode_is_refused_with_the_reason(tokenless_server: Server) -> None:
    """Production-mode MCP (HTTP /mcp, MCP JSON-RPC on /ws) is refused: a tool played there would have no reward."""
    rpc = {"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1}
    answered = httpx.post(f"{tokenless_server.url}/mcp", json=rpc).json()
    assert answered["error"]["code"] == -32601 and "simulation-mode" in answered["error"]["message"]

    async def on_ws() -> dict[str, Any]:
        async with ws_connect(tokenless_server.url.replace("http", "ws") + "/ws") as ws:
            await ws.send(json.dumps({"type": "mcp", "data": rpc}))
            refused = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "reset", "data": {}}))  # and the session goes on
            return {"refused": refused, "then": json.loads(await ws.recv())["type"]}

    seen = asyncio.run(on_ws())
    assert seen["refused"]["data"]["code"] == "UNKNOWN_TYPE" and "CallToolAction" in seen["refused"]["data"]["message"]
    assert seen["then"] == "observation"


def test_the_server_defaults_to_the_newest_env_id_without_gymnasium_warning(tokenless_server: Server) -> None:
    log = tokenless_server.log()
    assert DEFAULT_ENV == "ColBench-Backend-v2" and f"colbench serve: {DEFAULT_ENV} at" in log
    assert "out of date" not in log


def test_the_scorer_is_the_environments_openenv_rubric(bundled_tasks: list[Task]) -> None:
    """The rubric gives 0 for each question and the scorer's verdict on the answer: a wrong answer gets its
    pass rate (what the env's scorer says, here 0), and compute_step_rewards puts it on the answer step."""
    task = bundled_tasks[3]
    env = ColbenchOpenEnv(DEFAULT_ENV, {"tasks": "backend-sample", "sandbox": "bwrap"})
    try:
        assert isinstance(env.rubric, ColbenchRubric)
        env.reset(task_id=task.task_id)
        asked = env.step(ColbenchAction(message=ASK))
        name = task.ground_truth.split("def ", 1)[1].split("(", 1)[0]
        wrong = f"def {name}(*args, **kwargs):\n    return None"
        done = env.step(ColbenchAction(message=f"I WANT TO ANSWER:\n{wrong}"))
        rewards = env.rubric.compute_step_rewards()
    finally:
        env.close()
    assert asked.reward == 0.0 and done.done and 0.0 <= done.reward < 1.0
    assert done.reward == done.info["pass_rate"] == env.rubric.last_score and rewards == [0.0, done.reward]
    assert verdict_reward({"status": "ok", "pass_rate": 0.25, "tests_passed": 1}) == 0.25
    assert verdict_reward({"status": "ok", "similarity": 0.5, "reward": 0.75}) == 0.75  # frontend v1: its reward
    with pytest.raises(InfraError):
        verdict_reward({"status": "infra_error", "error": "sandbox down", "pass_rate": None})
