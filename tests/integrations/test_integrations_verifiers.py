"""verifiers: ColBench made by the real verifiers loader from its taskset id and played through verifiers' own episode
runner (``Env.serving``, ``run_slot``: what ``vf-eval`` and prime-rl call), the policy being verifiers' ``null`` chat
harness in a subprocess against a local streaming OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from failing_human import FAILING_TURNS, human_failing_at

vf = pytest.importorskip("verifiers.v1")

from verifiers.v1.clients import ModelContext  # noqa: E402
from verifiers.v1.configs.client import EvalClientConfig  # noqa: E402
from verifiers.v1.env import RunSlot  # noqa: E402

from colbench.integrations.verifiers import TASKSET_ID, ColbenchEnv, colbench_env  # noqa: E402
from colbench.tasks import Task  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="verifiers' chat harness runs under uv")

Policy = Callable[[list[dict[str, Any]]], str]


class StreamingPolicy:
    """The policy's endpoint: verifiers 0.4's harness streams its chat completions (server-sent events)."""

    def __init__(self, policy: Policy) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                owner.requests.append(body)
                message = {"role": "assistant", "content": policy(body["messages"])}
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                head = {"id": "c", "created": 0, "model": body["model"]}
                if not body.get("stream"):  # verifiers 0.3.x asks for the whole completion
                    choice = {"index": 0, "message": message, "finish_reason": "stop"}
                    data = json.dumps(head | {"object": "chat.completion", "choices": [choice], "usage": usage})
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data.encode())
                    return
                chunk = head | {"object": "chat.completion.chunk"}
                deltas = [(message, None), ({}, "stop")]
                events = [chunk | {"choices": [{"index": 0, "delta": d, "finish_reason": f}]} for d, f in deltas]
                events.append(chunk | {"choices": [], "usage": usage})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events))
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StreamingPolicy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def policy_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLBENCH_TEST_POLICY_KEY", "k")
    return "COLBENCH_TEST_POLICY_KEY"


def play(env: ColbenchEnv, policy: StreamingPolicy, key: str, n: int) -> list[Any]:
    """``n`` episodes, one per task, as verifiers' eval runner plays them."""
    ctx = ModelContext(model="policy", client=EvalClientConfig(base_url=policy.base_url, api_key_var=key))

    async def main() -> list[Any]:
        async with env.serving():
            tasks = list(itertools.islice(env.taskset, n))  # 0.3.x's tasksets have no take()
            return list(await asyncio.gather(*(env.run_slot(RunSlot(task), ctx) for task in tasks)))

    return asyncio.run(main())


def answers_with_the_reference(tasks: list[Task]) -> Policy:
    """Asks once, then answers with the reference of the task named in its prompt."""

    def respond(messages: list[dict[str, Any]]) -> str:
        task = next(t for t in tasks if t.problem_description.strip() in messages[0]["content"])
        if not any(m["role"] == "assistant" for m in messages):
            return "What should happen with an empty input?"
        return f"I WANT TO ANSWER:\n{task.ground_truth}"

    return respond


def test_verifiers_loads_and_plays_colbench(bundled_tasks: list[Task], policy_key: str) -> None:
    config = vf.EnvConfig.model_validate({"taskset": {"id": TASKSET_ID}})  # a run config naming only the taskset
    assert vf.environment_class(config.taskset.id) is ColbenchEnv
    env = colbench_env(tasks="backend-sample", max_turns=3, sandbox="bwrap", simulator="scripted")
    with StreamingPolicy(answers_with_the_reference(bundled_tasks)) as policy:
        episodes = play(env, policy, policy_key, 2)
    for episode in episodes:
        assert episode.ok and not episode.errors
        (trace,) = episode.traces
        assert trace.rewards["colbench_reward"].score == 1.0 and trace.metrics["colbench_success"] == 1.0
        assert trace.num_turns == 2
    # The human's reply reached the policy as its second user turn; its own first turn is in the context.
    second = next(r["messages"] for r in policy.requests if len(r["messages"]) > 1)
    assert [m["role"] for m in second][-3:] == ["user", "assistant", "user"]
    assert second[-2]["content"] == "What should happen with an empty input?"
    assert second[-1]["content"] == "I don't know."  # the scripted human's default


def test_the_turn_cap_scores_the_last_turn(policy_key: str) -> None:
    env = colbench_env(tasks="backend-sample", max_turns=2, sandbox="bwrap", simulator="scripted")
    with StreamingPolicy(lambda messages: "Tell me more?") as policy:
        (episode,) = play(env, policy, policy_key, 1)
    (trace,) = episode.traces
    assert episode.ok and trace.num_turns == 2 and trace.rewards["colbench_reward"].score == 0.0


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_a_lost_episode_is_the_episodes_error_not_a_score(turn: int, policy_key: str) -> None:
    with human_failing_at(turn) as human, StreamingPolicy(lambda messages: "Tell me more?") as policy:
        env = colbench_env(tasks="backend-sample", max_turns=3, sandbox="bwrap", **human)
        (episode,) = play(env, policy, policy_key, 1)
    assert not episode.ok and "HTTP 400" in episode.errors[0].message  # what trainers mask out
    (trace,) = episode.traces
    assert "colbench_reward" not in trace.rewards and trace.num_turns == turn  # ended at the failing turn
