"""Simulators: the chat-model human via a real HTTP stub, the response cache, scripted humans, specs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from openai_stub import StubOpenAIServer
from paths import REPO

from colbench.env import simulators
from colbench.env.domain import get_domain
from colbench.errors import ConfigError, LLMError
from colbench.humans.simulator import ChatSimulator, ScriptedSimulator, SimReply, Simulator, truncate
from colbench.llm import Endpoint, LLMClient, ResponseCache
from colbench.tasks import Task
from colbench.types.dialogue import Turn

BACKEND = get_domain("backend")
system_prompt = BACKEND.simulator_prompt
make_simulator = partial(simulators.make_simulator, BACKEND)


# Braces, f-strings and dollar signs: everything a str.format or a naive template would choke on.
HIDDEN = textwrap.dedent(
    """\
    def price(items, currency="$"):
        table = {"apple": 3, "pear": {"ripe": 5}}
        total = sum(table.get(i, 1) if not isinstance(table.get(i), dict) else 5 for i in items)
        return f"{currency}{total:.2f} ${'{'}done{'}'}"
    """
)
PROBLEM = "Write a function that prices a basket of fruit. The signature of the function is: def price(items):"

TASK = Task(
    task_id="t1",
    domain="backend",
    problem_description=PROBLEM,
    ground_truth=HIDDEN,
    hidden_information=HIDDEN,
    test_cases=(("test1", "price(['apple'])"),),
)


def sim_for(
    stub: StubOpenAIServer, *, model: str = "sim-model", cache: ResponseCache | None = None, max_chars: int = 400
) -> ChatSimulator:
    endpoint = Endpoint(model=model, base_url=stub.base_url, timeout_s=5.0, max_retries=2, backoff_s=0.01)
    return ChatSimulator(LLMClient(endpoint, cache=cache), system_prompt, max_chars=max_chars)


def dialogue(*texts: str) -> list[Turn]:
    """Alternating turns starting with the agent."""
    return [Turn("agent" if i % 2 == 0 else "human", text) for i, text in enumerate(texts)]


# -- ChatSimulator ------------------------------------------------------------------------------------------


def test_system_prompt_carries_problem_and_hidden_information_verbatim() -> None:
    prompt = system_prompt(TASK)
    assert HIDDEN.strip() in prompt  # braces, f-string and "$" survive untouched
    assert PROBLEM in prompt
    assert "$problem_description" not in prompt and "$hidden_information" not in prompt
    assert "don't know" in prompt  # the rule for questions the hidden information does not settle


def test_dialogue_arrives_as_chat_messages_in_order(stub: StubOpenAIServer) -> None:
    stub.enqueue(("text", "Apples cost three."))
    turns = dialogue("What does an apple cost?", "Three.", "And a pear?")
    reply = sim_for(stub).reply(TASK, turns)
    assert reply.text == "Apples cost three."
    messages = stub.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:]] == [t.text for t in turns]
    assert messages[0]["content"] == system_prompt(TASK)
    assert stub.requests[0]["temperature"] == 0.0
    assert reply.usage.calls == 1 and reply.usage.completion_tokens == 3 and not reply.cached


def test_reply_is_truncated_on_a_word_boundary(stub: StubOpenAIServer) -> None:
    long = "word " * 200
    stub.enqueue(("text", long))
    reply = sim_for(stub, max_chars=53).reply(TASK, dialogue("Tell me everything."))
    assert len(reply.text) <= 53
    assert long.startswith(reply.text)
    assert reply.text.endswith("word")  # no half word at the end


def test_truncate_edge_cases() -> None:
    assert truncate("  short answer \n", 400) == "short answer"
    assert truncate("x" * 500, 400) == "x" * 400  # no space: hard cut
    assert truncate("a " + "b" * 300, 100) == ("a " + "b" * 300)[:100]  # space too far back: hard cut
    assert truncate("one two three", 9) == "one two"


@pytest.mark.parametrize("turns", [[], dialogue("Question?", "Answer.")])
def test_dialogue_must_end_with_an_agent_turn(stub: StubOpenAIServer, turns: list[Turn]) -> None:
    with pytest.raises(ConfigError, match="agent turn"):
        sim_for(stub).reply(TASK, turns)
    assert stub.request_count == 0


def test_endpoint_failure_is_an_infra_error_not_a_canned_reply(stub: StubOpenAIServer) -> None:
    stub.enqueue(*[("status", 500)] * 5)
    with pytest.raises(LLMError, match="sim-model"):
        sim_for(stub).reply(TASK, dialogue("Hello?"))
    assert stub.request_count == 3


def test_async_reply_matches_sync(stub: StubOpenAIServer) -> None:
    sim = sim_for(stub)
    turns = dialogue("Is a pear five?")
    async_reply = asyncio.run(sim.areply(TASK, turns))
    sync_reply = sim.reply(TASK, turns)
    assert async_reply.text == sync_reply.text == "echo: Is a pear five?"
    assert stub.requests[0] == stub.requests[1]


# -- ResponseCache ------------------------------------------------------------------------------------------


def test_cache_serves_identical_requests_without_http(stub: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    sim = sim_for(stub, cache=cache)
    first = sim.reply(TASK, dialogue("Apple price?"))
    second = sim.reply(TASK, dialogue("Apple price?"))
    assert stub.request_count == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text
    assert second.usage.calls == 0 and second.usage.prompt_tokens == 0
    third = sim.reply(TASK, dialogue("Apple price?", first.text, "Pear price?"))
    assert stub.request_count == 2 and not third.cached
    assert len(cache) == 2


def test_async_reply_uses_the_cache(stub: StubOpenAIServer, tmp_path: Path) -> None:
    sim = sim_for(stub, cache=ResponseCache(tmp_path / "c.sqlite"))
    sim.reply(TASK, dialogue("Apple price?"))
    reply = asyncio.run(sim.areply(TASK, dialogue("Apple price?")))
    assert reply.cached and stub.request_count == 1


def test_cache_persists_across_instances_and_keys_on_the_model(stub: StubOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.sqlite"
    sim_for(stub, cache=ResponseCache(path)).reply(TASK, dialogue("Apple price?"))
    again = sim_for(stub, cache=ResponseCache(path)).reply(TASK, dialogue("Apple price?"))
    assert again.cached and stub.request_count == 1
    other_model = sim_for(stub, model="other", cache=ResponseCache(path)).reply(TASK, dialogue("Apple price?"))
    assert not other_model.cached and stub.request_count == 2


def test_cache_stores_the_full_reply_and_truncates_on_the_way_out(stub: StubOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    stub.enqueue(("text", "alpha beta gamma delta"))
    assert sim_for(stub, cache=ResponseCache(path), max_chars=11).reply(TASK, dialogue("Q?")).text == "alpha beta"
    wide = sim_for(stub, cache=ResponseCache(path), max_chars=400).reply(TASK, dialogue("Q?"))
    assert wide.cached and wide.text == "alpha beta gamma delta"


def test_cache_key_covers_every_request_field() -> None:
    base = {
        "model": "m",
        "base_url": None,
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.0,
    }
    keys = {
        ResponseCache.key(base),
        ResponseCache.key({**base, "model": "n"}),
        ResponseCache.key({**base, "base_url": "http://h/v1"}),
        ResponseCache.key({**base, "temperature": 1.0}),
        ResponseCache.key({**base, "max_tokens": 9}),
        ResponseCache.key({**base, "extra_body": {"seed": 1}}),
        ResponseCache.key({**base, "messages": [{"role": "user", "content": "y"}]}),
    }
    assert len(keys) == 7
    assert ResponseCache.key(dict(reversed(list(base.items())))) == ResponseCache.key(base)  # order-free


def test_cache_is_safe_across_threads(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")

    def work(i: int) -> str | None:
        request = {"model": "m", "messages": [{"role": "user", "content": str(i)}]}
        cache.put(request, f"reply {i}")
        return cache.get(request)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(200)))
    assert results == [f"reply {i}" for i in range(200)]
    assert len(cache) == 200


def test_cache_is_safe_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        """
        import sys
        from colbench.llm import ResponseCache
        cache = ResponseCache(sys.argv[1])
        for i in range(100):
            cache.put({"model": sys.argv[2], "n": i}, f"{sys.argv[2]} {i}")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(path), name], env=env, stderr=subprocess.PIPE)
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    cache = ResponseCache(path)
    assert len(cache) == 200
    assert cache.get({"model": "b", "n": 99}) == "b 99"


# -- ScriptedSimulator --------------------------------------------------------------------------------------


def test_scripted_list_answers_in_order_per_episode_then_repeats_the_last() -> None:
    sim = ScriptedSimulator(["first", "second"])
    turns: list[Turn] = [Turn("agent", "q1")]
    texts = []
    for i in range(4):
        reply = sim.reply(TASK, turns)
        texts.append(reply.text)
        turns += [Turn("human", reply.text), Turn("agent", f"q{i + 2}")]
    assert texts == ["first", "second", "second", "second"]
    # A new episode starts from the first reply again; no hidden state carries over.
    assert sim.reply(TASK, [Turn("agent", "new episode")]).text == "first"
    assert sim.reply(TASK, turns).usage.as_dict() == {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}


def test_scripted_empty_list_does_not_know() -> None:
    assert ScriptedSimulator([]).reply(TASK, [Turn("agent", "q")]).text == "I don't know."


def test_scripted_callable_sees_task_and_dialogue() -> None:
    seen: list[tuple[str, int]] = []

    def answer(task: Task, turns: Sequence[Turn]) -> str:
        seen.append((task.task_id, len(turns)))
        return f"you said {turns[-1].text!r}"

    sim = ScriptedSimulator(answer)
    reply = asyncio.run(sim.areply(TASK, dialogue("hi", "hello", "bye")))
    assert isinstance(reply, SimReply) and reply.text == "you said 'bye'" and not reply.cached
    assert seen == [("t1", 3)]


def test_scripted_rejects_a_bare_string() -> None:
    with pytest.raises(ConfigError):
        ScriptedSimulator("not a list")


def test_both_simulators_satisfy_the_protocol(stub: StubOpenAIServer) -> None:
    assert isinstance(ScriptedSimulator([]), Simulator)
    assert isinstance(sim_for(stub), Simulator)
    assert not isinstance(object(), Simulator)


# -- env.simulators.make_simulator ---------------------------------------------------------------------------------


def test_make_scripted() -> None:
    sim = make_simulator("scripted")
    assert isinstance(sim, ScriptedSimulator)
    assert sim.reply(TASK, [Turn("agent", "q")]).text == "I don't know."


def test_make_openai_talks_to_the_endpoint_and_caches(stub: StubOpenAIServer, tmp_path: Path) -> None:
    sim = make_simulator(
        "openai:sim-x", cache_dir=str(tmp_path / "cache"), base_url=stub.base_url, api_key="k", max_retries=0
    )
    assert isinstance(sim, ChatSimulator)
    assert sim.reply(TASK, dialogue("Q?")).text == "echo: Q?"
    assert sim.reply(TASK, dialogue("Q?")).cached
    assert stub.request_count == 1 and stub.requests[0]["model"] == "sim-x"
    assert (tmp_path / "cache" / "simulator.sqlite").is_file()


def test_make_openai_reads_the_simulator_env(stub: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLBENCH_SIMULATOR_BASE_URL", stub.base_url)
    monkeypatch.setenv("COLBENCH_SIMULATOR_API_KEY", "sim-key")
    make_simulator("openai:sim-y").reply(TASK, dialogue("Q?"))
    assert stub.headers[0]["authorization"] == "Bearer sim-key"


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "local:llama", "Scripted", ""])
def test_bad_simulator_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_simulator(spec)
    assert repr(spec) in str(info.value) and "openai:MODEL" in str(info.value)
