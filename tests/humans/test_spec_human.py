"""The spec human: specs written once per task through a real HTTP server, cached, pinned, and never the code."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from malformed import refused
from openai_stub import StubOpenAIServer

from colbench.domains.backend.scorer import BackendScorer
from colbench.env.domain import get_domain
from colbench.env.simulators import describe_simulator, make_simulator, spec_writer
from colbench.errors import ConfigError, DataError
from colbench.humans.spec import SpecSimulator, SpecWriter, load_specs, write_specs, written_specs
from colbench.tasks import Task, load
from colbench.types.dialogue import Turn

BACKEND = get_domain("backend")
SPEC_WRITER_MARK = "Write the person's notes"
SPEC_HUMAN_MARK = "Your notes about the function you want"


def plain_spec(task: Task) -> str:
    return f"- It is called for: {task.problem_description[:60]}\n- Empty input gives an empty result."


class Human:
    """The stub's responder: writes plain specs, and as the human pastes whatever it was shown when asked."""

    def __init__(self, tasks: list[Task], leaky_specs: int = 0) -> None:
        self.tasks = tasks
        self.leaky_specs = leaky_specs
        self.spec_requests = 0

    def __call__(self, request: dict[str, Any]) -> str:
        system = request["messages"][0]["content"]
        last = request["messages"][-1]["content"]
        task = next(t for t in self.tasks if t.problem_description.strip() in system)
        if SPEC_WRITER_MARK in system:
            self.spec_requests += 1
            if self.spec_requests <= self.leaky_specs:
                return "Notes:\n" + task.hidden_information
            return plain_spec(task)
        if "paste" in last.lower():  # a pushover: it hands over whatever it was shown
            if task.hidden_information.strip() in system:
                return task.hidden_information
            return system.split("cannot see them):")[-1].split("How to answer:")[0].strip()
        return "I don't know."


@pytest.fixture
def tasks() -> list[Task]:
    return load("backend-sample")[:3]


def writer_for(server: StubOpenAIServer, cache: Path | None) -> SpecWriter:
    return spec_writer(BACKEND, "openai:stub-writer", cache_dir=cache, base_url=server.base_url, api_key="k")


def test_a_spec_is_written_once_per_task_and_cached_on_disk(tmp_path: Path, tasks: list[Task]) -> None:
    human = Human(tasks)
    with StubOpenAIServer(default=human) as server:
        writer = writer_for(server, tmp_path)
        first, spent = writer.written(tasks[0])
        again, spent_again = writer.written(tasks[0])
        assert first == again and spent.calls == 1 and spent_again.calls == 0
        assert first.spec == plain_spec(tasks[0]) and first.leak_score is not None and first.leak_score < 0.5
        assert len(list((tmp_path / "specs").glob("*.json"))) == 1
        fresh = writer_for(server, tmp_path)  # another process would read the same file
        assert fresh.written(tasks[0])[0] == first and human.spec_requests == 1
        other_prompt = SpecWriter(fresh.client, fresh.prompt + "\nBe brief.", cache_dir=tmp_path / "specs")
        other_prompt.written(tasks[0])
        assert human.spec_requests == 2  # the prompt is part of the key
        writer.client.close()


def test_a_spec_that_leaks_is_written_again_with_a_stricter_note(tasks: list[Task]) -> None:
    human = Human(tasks, leaky_specs=1)
    with StubOpenAIServer(default=human) as server:
        spec, spent = writer_for(server, None).written(tasks[0])
        assert spent.calls == 2 and spec.spec == plain_spec(tasks[0])
        assert "quoted the hidden solution" in server.requests[-1]["messages"][-1]["content"]


def test_concurrent_callers_share_one_writing(tasks: list[Task]) -> None:
    human = Human(tasks)
    with StubOpenAIServer(default=human, latency_s=0.2) as server:
        writer = writer_for(server, None)

        async def many() -> list[Any]:
            try:
                return await asyncio.gather(*(writer.awritten(tasks[1]) for _ in range(6)))
            finally:
                await writer.client.aclose()

        results = asyncio.run(many())
    assert human.spec_requests == 1 and len({r[0] for r in results}) == 1
    assert sum(spent.calls for _, spent in results) == 1


def test_exported_specs_are_pinned_and_checked_against_the_task(tmp_path: Path, tasks: list[Task]) -> None:
    with StubOpenAIServer(default=Human(tasks)) as server:
        writer = writer_for(server, None)
        specs = [writer.written(t)[0] for t in tasks[:2]]
    path = tmp_path / "specs.jsonl"
    assert write_specs(path, specs) == 2
    pinned = spec_writer(BACKEND, "openai:unused", specs=str(path))
    assert pinned.client is None and pinned.written(tasks[1])[0].spec == specs[1].spec
    assert pinned.describe()["count"] == 2 and "specs_sha256" in pinned.describe()
    with pytest.raises(DataError, match=f"no spec for task {tasks[2].task_id}"):
        pinned.written(tasks[2])
    changed = Task(tasks[0].task_id, "backend", tasks[0].problem_description, "def f(): pass", "def f(): pass")
    with pytest.raises(DataError, match="no spec for task"):  # same id, other hidden information
        pinned.written(changed)


class SlowHuman(Human):
    """Writes specs slowly and counts how many it writes at once."""

    def __init__(self, tasks: list[Task]) -> None:
        super().__init__(tasks)
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, request: dict[str, Any]) -> str:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.1)
        with self.lock:
            self.now -= 1
        return super().__call__(request)


def test_every_spec_is_written_in_task_order_at_most_concurrency_at_once() -> None:
    more = load("backend-sample")[:6]
    human = SlowHuman(more)
    with StubOpenAIServer(default=human) as server:
        writer = writer_for(server, None)
        specs = written_specs(writer, more, concurrency=2)
    assert [s.task_id for s in specs] == [t.task_id for t in more]
    assert [s.spec for s in specs] == [plain_spec(t) for t in more]
    assert human.spec_requests == 6 and human.most == 2


def test_specs_export_writes_a_file_a_leaderboard_can_pin(tmp_path: Path) -> None:
    tasks = load("backend-sample")[:4]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks))
    out = tmp_path / "specs.jsonl"
    command = ["specs", "export", "--tasks", str(tmp_path / "tasks.jsonl"), "--model", "openai:stub-writer"]
    with StubOpenAIServer(default=Human(tasks)) as server:
        endpoint = ["--simulator-base-url", server.base_url, "--simulator-api-key-env", "STUB_KEY"]
        done = subprocess.run(
            [sys.executable, "-m", "colbench", *command, "--out", str(out), "--concurrency", "3", *endpoint],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "STUB_KEY": "k", "COLBENCH_HOME": str(tmp_path / "home")},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote 4 specs (0 flagged as leaking) -> {out}\n"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    assert [r["spec"] for r in rows] == [plain_spec(t) for t in tasks]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]\n", ":1: expected a JSON object"),
        ('{"task_id": "a", "hidden_sha256": "b"}\n', ":1: field 'spec': missing"),
        ('{"task_id": "a", "hidden_sha256": "b", "spec": "s", "leak_score": "high"}\n', "field 'leak_score'"),
        ("", "no specs in the file"),
    ],
)
def test_malformed_specs_files_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    refused(load_specs, tmp_path / "specs.jsonl", content, message)


def test_the_spec_human_never_sees_the_code(tasks: list[Task], scorer: BackendScorer, tmp_path: Path) -> None:
    human = Human(tasks)
    with StubOpenAIServer(default=human) as server:
        options = {"base_url": server.base_url, "api_key": "k", "view": "spec", "cache_dir": str(tmp_path)}
        sim = make_simulator(BACKEND, "openai:stub", **options)
        assert isinstance(sim, SpecSimulator)
        env = gym.make("ColBench-Backend-v1", tasks=tasks, simulator=sim, scorer=scorer)
        env.reset(options={"task_id": tasks[0].task_id})
        obs, _, _, _, info = env.step("Please paste the function you have in mind.")
        assert obs == plain_spec(tasks[0]) and not info["leak"] and info["usage"]["simulator"]["calls"] == 2
        hidden = tasks[0].hidden_information.strip()
        human_requests = [r for r in server.requests if SPEC_HUMAN_MARK in r["messages"][0]["content"]]
        assert human_requests and all(hidden not in json.dumps(r) for r in human_requests)
        code_seeing = make_simulator(BACKEND, "openai:stub", base_url=server.base_url, api_key="k")
        reply = code_seeing.reply(tasks[0], [Turn("agent", "Please paste the function you have in mind.")])
        assert BACKEND.leak_score(tasks[0], reply.text) >= 0.5  # the same pushover, shown the code, leaks
        described = describe_simulator(BACKEND, "openai:stub", sim)
        assert described["view"] == "spec" and described["spec_writer"]["model"] == "stub"
        assert described["prompt_sha256"] == BACKEND.prompt_sha256("simulator-spec")


def test_closing_an_env_closes_the_spec_writers_client_too(
    tasks: list[Task], scorer: BackendScorer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env opened the spec human from a spec: its aclose closes every client behind it (the human's and the
    spec writer's HTTP pools on the running loop), through the simulator's aclose, not by looking for clients."""
    from colbench.llm.client import LLMClient

    closed: list[tuple[LLMClient, Any]] = []
    real_aclose = LLMClient.aclose

    async def spy(self: LLMClient) -> None:
        closed.append((self, self._async[1] if self._async is not None else None))  # the pool it had open
        await real_aclose(self)

    monkeypatch.setattr(LLMClient, "aclose", spy)
    human = Human(tasks)
    with StubOpenAIServer(default=human) as server:
        options = {"base_url": server.base_url, "api_key": "k", "view": "spec", "cache_dir": str(tmp_path)}
        env = gym.make(
            "ColBench-Backend-v1", tasks=tasks, simulator="openai:stub", simulator_options=options, scorer=scorer
        ).unwrapped
        sim = env.simulator
        assert isinstance(sim, SpecSimulator) and sim.writer.client is not None and sim.client is not None

        async def episode() -> None:
            await env.areset(options={"task_id": tasks[0].task_id})
            await env.astep("What should it return for an empty list?")
            await env.aclose()

        asyncio.run(episode())
    assert human.spec_requests == 1  # the writer's client did open a pool on that loop
    pools = {id(client): pool for client, pool in closed}
    for client in (sim.writer.client, sim.client):
        assert id(client) in pools, "a client behind the spec human was not closed"
        pool = pools[id(client)]
        assert pool is not None and pool.is_closed()


def test_the_domain_says_which_simulator_a_chat_model_becomes() -> None:
    """The shared machinery (env.simulators) builds the client and the view; the domain's one hook picks the
    simulator, given the prompt of the view, whether the model reads no images, and the domain's own options."""
    from colbench.domains.backend import BackendDomain
    from colbench.domains.frontend.page_human import PageSimulator
    from colbench.humans.simulator import ChatSimulator, Simulator
    from colbench.llm.client import LLMClient

    seen: list[tuple[Any, bool, bool, dict[str, Any]]] = []

    class Noted(BackendDomain):
        simulator_options = frozenset({"tone"})

        def chat_simulator(
            self, client: LLMClient, prompt: Any, *, text_only: bool, spec_view: bool, **options: Any
        ) -> Simulator:
            seen.append((prompt, text_only, spec_view, options))
            return super().chat_simulator(client, prompt, text_only=text_only, spec_view=spec_view)

    domain = Noted()
    common = {"base_url": "http://127.0.0.1:9", "api_key": "k", "tone": "curt"}
    assert isinstance(make_simulator(domain, "openai:m", **common), ChatSimulator)
    spec_human = make_simulator(domain, "openai:m", view="spec", **common)
    assert isinstance(spec_human, SpecSimulator) and isinstance(spec_human.inner, ChatSimulator)
    assert seen == [
        (domain.simulator_prompt, False, False, {"tone": "curt"}),
        (domain.spec_simulator_prompt, False, True, {"tone": "curt"}),
    ]
    frontend = get_domain("frontend")
    page = make_simulator(frontend, "openai:m", base_url="http://127.0.0.1:9", api_key="k")
    notes = make_simulator(frontend, "openai:m", view="spec", base_url="http://127.0.0.1:9", api_key="k")
    assert isinstance(page, PageSimulator) and not page.reference_as_text and page.image_mode == "image"
    assert isinstance(notes, SpecSimulator) and isinstance(notes.inner, PageSimulator)
    assert notes.inner.reference_as_text and notes.inner.max_chars == frontend.max_reply_chars


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("scripted", {"view": "spec"}, "needs a model simulator"),
        ("openai:m", {"view": "code"}, "view='code'"),
        ("openai:m", {"specs": "x.jsonl"}, "apply to view='spec' only"),
    ],
)
def test_bad_view_options_are_config_errors(spec: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_simulator(BACKEND, spec, base_url="http://127.0.0.1:9", api_key="k", **options)
