"""TRL's AsyncGRPOTrainer path, through TRL 1.16's own rollout worker (``_AsyncRolloutLoop``: the generate and score
loops AsyncGRPOTrainer runs in its rollout process): the env's reward reaches it only through ``get_reward`` (the
worker passes no ``environments=`` to reward functions), and one run mixes backend and frontend tasks through TRL's
``environment`` column, each row played by its own env with its own tools.

AsyncGRPOTrainer itself needs vLLM (``AsyncRolloutWorker`` refuses to start without it) and a CUDA device, so it
cannot run here: the worker loop is TRL's, and only the vLLM server is a stub (``/v1/completions``, token ids in
and out) whose policy writes scripted tool calls. Everything else is real: TRL's prompt rendering with each env's
tool schemas, its tool-call parsing and tool loop, its reward columns, advantages and training rows; the envs score
with bwrap (backend) and headless Chromium (frontend, the offline ``test`` embedder).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import queue
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from chromium import renderer_or_skip

from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import load_shared

pytest.importorskip("trl")
pytest.importorskip("aiohttp")

PAGE = '<html><body class="bg-white"><h1 class="text-3xl">Welcome</h1><p>Our services.</p></body></html>'


def tool_call(name: str, argument: str, value: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {argument: value}}) + "\n</tool_call>"


class ScriptedVllm:
    """A stand-in for ``vllm serve``'s ``/v1/completions`` with ``return_token_ids``: the policy reads its prompt
    (token ids) and writes, by which tools the prompt lists and how many tool responses it holds, a question or a
    page, then the answer, then a closing turn without a call: the backend's answers alternate between the reference code and a wrong function, so a
    group's rewards differ."""

    def __init__(self, tokenizer: Any, backend_answer: str) -> None:
        self.tokenizer, self.backend_answer = tokenizer, backend_answer
        self.prompts: list[str] = []
        self.answers = 0
        self.lock = threading.Lock()

    def turn(self, prompt: str) -> str:
        if "the session is over" in prompt:  # the env said so: the rollout ends with a turn that calls no tool
            return "Thank you."
        answered = "<tool_response>" in prompt
        if "submit_page" in prompt:
            return tool_call("submit_page" if answered else "show_page", "page", PAGE)
        if not answered:
            return tool_call("ask_human", "question", "Which input types?")
        with self.lock:
            self.answers += 1
            right = self.answers % 2 == 1
        return tool_call("submit_answer", "answer", self.backend_answer if right else "def nope():\n    return 0")

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = self.tokenizer.decode(body["prompt"])
        self.prompts.append(prompt)
        ids = [*self.tokenizer(self.turn(prompt), add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]
        return {"choices": [{"token_ids": ids, "logprobs": {"token_logprobs": [-0.5] * len(ids)}}]}

    def serve(self) -> ThreadingHTTPServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(stub.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


@pytest.fixture(scope="module")
def worker_samples(exported_model: Path) -> Iterator[dict[str, Any]]:
    """TRL's rollout worker over a dataset of one backend and one frontend row (TRL's ``environment`` column picks
    ``ColbenchToolEnv`` or ``ColbenchPageToolEnv``), groups of 2, no reward function: the scored samples of the first
    group of each, and the prompts the policy was given."""
    import datasets
    from accelerate import PartialState
    from transformers import AutoTokenizer
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    from colbench.integrations.chatml_tools import with_tool_calling
    from colbench.integrations.trl_environment import ColbenchPageToolEnv, ColbenchToolEnv, tool_dataset

    backend, frontend = load_shared("backend-sample")[0], load_shared("frontend-sample")[0]
    tokenizer = with_tool_calling(AutoTokenizer.from_pretrained(exported_model))
    policy = ScriptedVllm(tokenizer, backend.ground_truth)
    PartialState(cpu=True)  # as the rollout process sets it up (TRL's loggers need it)
    renderer_or_skip().close()  # headless Chromium starts, or the test is skipped
    page_envs = ColbenchPageToolEnv.factory(
        "ColBench-Frontend-v1",
        tasks=[frontend],
        max_turns=2,
        embedder="test",
        simulator=ScriptedSimulator(["Bigger title."]),
    )
    rows = datasets.concatenate_datasets(
        [
            tool_dataset([backend], max_turns=2, environment="backend"),
            tool_dataset([frontend], max_turns=2, environment="frontend"),
        ]
    )
    server = policy.serve()
    buffer: Any = multiprocessing.Queue()
    loop = _AsyncRolloutLoop(
        model_name="policy",
        dataset=rows,
        reward_funcs=[],  # the envs own the reward
        processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id],
        rollout_buffer=buffer,
        model_version_value=multiprocessing.Value("i", 0),
        heartbeat_value=multiprocessing.Value("d", 0.0),
        failed_event=multiprocessing.Event(),
        exception_info_queue=multiprocessing.Queue(maxsize=1),
        metrics_queue=multiprocessing.Queue(),
        environment_factory={
            "backend": ColbenchToolEnv.factory(
                "ColBench-Backend-v1",
                tasks=[backend],
                max_turns=2,
                sandbox="bwrap",
                simulator=ScriptedSimulator(["Lists of ints."]),
            ),
            "frontend": page_envs,
        },
        num_generations=2,
        max_inflight_tasks=2,
        vllm_server_url=f"http://127.0.0.1:{server.server_address[1]}",
        max_tokens=256,
        max_tool_calling_iterations=3,
    )
    worker = threading.Thread(target=loop.run, daemon=True)
    worker.start()
    samples: list[Any] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and worker.is_alive():
        if sum(s.group_id in (0, 1) for s in samples) == 4:  # both rollouts of the first group of each env
            break
        try:
            samples.append(buffer.get(timeout=1))
        except queue.Empty:
            continue
    loop._loop.call_soon_threadsafe(loop._stop_event.set)
    worker.join(timeout=120)
    server.shutdown()
    assert sum(s.group_id in (0, 1) for s in samples) == 4, "the worker did not score a group of each environment"
    yield {
        "samples": [s for s in samples if s.group_id in (0, 1)],
        "prompts": policy.prompts,
        "names": loop.reward_func_names,
    }


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_async_worker_takes_the_env_reward_from_get_reward(worker_samples: dict[str, Any]) -> None:
    """No reward function: each env's ``get_reward`` is a reward column of its own, the env's reward of its rows
    (NaN on the other env's rows), summed into the group's advantages."""
    assert worker_samples["names"] == ["ColbenchToolEnv", "ColbenchPageToolEnv"]
    backend = [s for s in worker_samples["samples"] if s.group_id == 0]
    frontend = [s for s in worker_samples["samples"] if s.group_id == 1]
    assert len(backend) == len(frontend) == 2  # one training row per rollout: no re-tokenization drift
    assert sorted(s.metrics["rewards/ColbenchToolEnv"] for s in backend) == [0.0, 1.0]  # the right answer, a wrong one
    assert all(math.isnan(s.metrics["rewards/ColbenchPageToolEnv"]) for s in backend)
    assert sorted(s.advantage for s in backend) == pytest.approx([-1.0, 1.0], abs=1e-6)
    for sample in frontend:
        similarity = sample.metrics["rewards/ColbenchPageToolEnv"]
        assert 0.0 < similarity <= 1.0 and sample.metrics["reward"] == similarity
        assert math.isnan(sample.metrics["rewards/ColbenchToolEnv"])
        assert sample.metrics["tools/call_frequency"] == 2.0  # show_page, submit_page
    assert all(s.metrics["tools/call_frequency"] == 2.0 for s in backend)  # ask_human, submit_answer


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_each_row_gets_its_own_envs_tools_and_prompt(worker_samples: dict[str, Any]) -> None:
    """TRL's ``environment`` column routes each row: a backend prompt lists ``ask_human`` / ``submit_answer`` and
    asks for them, a frontend one ``show_page`` / ``submit_page``; neither asks for the text protocol's marker."""
    first_turns = [p for p in worker_samples["prompts"] if "<tool_response>" not in p]
    backend = [p for p in first_turns if "ask_human" in p]
    frontend = [p for p in first_turns if "show_page" in p]
    assert backend and frontend and len(backend) + len(frontend) == len(first_turns)
    assert not any("show_page" in p or "submit_page" in p for p in backend)
    assert not any("ask_human" in p or "submit_answer" in p for p in frontend)
    assert not any("I WANT TO ANSWER" in p for p in first_turns)
