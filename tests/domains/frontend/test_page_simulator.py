"""The frontend's simulated human: what a vision model is shown, through the real openai client and a stub server."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path

import pytest
from openai_stub import StubOpenAIServer

from colbench.domains.frontend.page_human import MAX_REPLY_CHARS, NO_PAGE_NOTE, PAGE_CUT, PageSimulator
from colbench.env.domain import get_domain
from colbench.env.simulators import make_simulator
from colbench.errors import ConfigError
from colbench.llm import Endpoint, LLMClient, ResponseCache
from colbench.tasks import Task
from colbench.types.dialogue import Turn

FRONTEND, BACKEND = get_domain("frontend"), get_domain("backend")

REFERENCE = '<html><body class="bg-blue-500"><h1>Bakery</h1></body></html>'
TASK = Task(
    task_id="f1",
    domain="frontend",
    problem_description="A bakery landing page with a blue header.",
    ground_truth=REFERENCE,
    hidden_information=REFERENCE,
)
REF_PNG = b"\x89PNG\r\n\x1a\nreference"
AGENT_PNG = b"\x89PNG\r\n\x1a\nagent"
AGENT_PAGE = '<html><body class="bg-red-500"><h1>Cakes</h1></body></html>'


@pytest.fixture
def stub(make_stub: Callable[..., StubOpenAIServer]) -> StubOpenAIServer:
    return make_stub(lambda request: "Make the header blue and call it Bakery.")


def _client(stub: StubOpenAIServer, cache: ResponseCache | None = None) -> LLMClient:
    return LLMClient(Endpoint(model="vision-model", base_url=stub.base_url, api_key="k", max_retries=0), cache=cache)


def page_simulator(stub: StubOpenAIServer, **options: object) -> PageSimulator:
    return PageSimulator(_client(stub), FRONTEND.simulator_prompt, **options)  # type: ignore[arg-type]


def _images(content: list[dict[str, object]]) -> list[bytes]:
    urls = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]  # type: ignore[index]
    assert all(url.startswith("data:image/png;base64,") for url in urls)
    return [base64.b64decode(url.split(",", 1)[1]) for url in urls]


def test_the_model_sees_both_pages_and_the_message_without_its_html(stub: StubOpenAIServer) -> None:
    sim = page_simulator(stub)
    turn = Turn("agent", f"Does this work? Any colour wishes?\n```html\n{AGENT_PAGE}\n```", image=AGENT_PNG)
    reply = sim.reply(TASK, [turn], reference_image=REF_PNG)
    assert reply.text == "Make the header blue and call it Bakery."
    assert reply.usage.calls == 1
    (request,) = stub.requests
    system, user = request["messages"]
    assert system["role"] == "system" and TASK.problem_description in system["content"]
    assert REFERENCE not in system["content"]  # the reference is shown as a picture, not as code
    assert _images(user["content"]) == [REF_PNG, AGENT_PNG]  # reference first, as the prompt says
    texts = " ".join(part["text"] for part in user["content"] if part["type"] == "text")
    assert "Any colour wishes?" in texts and PAGE_CUT in texts
    assert AGENT_PAGE not in texts and "bg-red-500" not in texts


def test_no_page_yet_is_said_in_words(stub: StubOpenAIServer) -> None:
    sim = page_simulator(stub)
    sim.reply(TASK, [Turn("agent", "What should the page show first?")], reference_image=REF_PNG)
    user = stub.requests[0]["messages"][1]
    assert _images(user["content"]) == [REF_PNG]
    assert any(part.get("text") == NO_PAGE_NOTE for part in user["content"])


def test_a_page_that_did_not_render_is_no_page_for_the_human(stub: StubOpenAIServer) -> None:
    sim = page_simulator(stub)
    sim.reply(TASK, [Turn("agent", AGENT_PAGE, image=None)], reference_image=REF_PNG)
    user = stub.requests[0]["messages"][1]
    assert _images(user["content"]) == [REF_PNG]


def test_html_mode_sends_plain_text_for_text_only_models(stub: StubOpenAIServer) -> None:
    sim = page_simulator(stub, image_mode="html")
    sim.reply(TASK, [Turn("agent", f"Here:\n{AGENT_PAGE}", image=AGENT_PNG)])
    content = stub.requests[0]["messages"][1]["content"]
    assert isinstance(content, str)
    assert REFERENCE in content and AGENT_PAGE in content and "base64" not in content


def test_replies_are_capped_and_cached(stub: StubOpenAIServer, tmp_path: Path) -> None:
    stub.default = lambda request: "word " * 400
    sim = PageSimulator(_client(stub, ResponseCache(tmp_path / "sim.sqlite")), FRONTEND.simulator_prompt)
    dialogue = [Turn("agent", AGENT_PAGE, image=AGENT_PNG)]
    first = sim.reply(TASK, dialogue, reference_image=REF_PNG)
    assert 0 < len(first.text) <= MAX_REPLY_CHARS
    again = asyncio.run(sim.areply(TASK, dialogue, reference_image=REF_PNG))
    assert again.cached and again.text == first.text and len(stub.requests) == 1
    # Another agent page is another request.
    sim.reply(TASK, [Turn("agent", AGENT_PAGE, image=AGENT_PNG + b"x")], reference_image=REF_PNG)
    assert len(stub.requests) == 2


def test_bad_use_is_a_clear_error(stub: StubOpenAIServer) -> None:
    sim = page_simulator(stub)
    with pytest.raises(ConfigError, match="reference_image"):
        sim.reply(TASK, [Turn("agent", AGENT_PAGE)])
    with pytest.raises(ConfigError, match="end with an agent turn"):
        sim.reply(TASK, [], reference_image=REF_PNG)
    with pytest.raises(ConfigError, match="image_mode"):
        page_simulator(stub, image_mode="video")  # type: ignore[arg-type]
    assert stub.requests == []


def test_specs_pick_the_page_simulator_for_frontend(stub: StubOpenAIServer) -> None:
    sim = make_simulator(FRONTEND, "openai:gpt-4o", base_url=stub.base_url, api_key="k", image_mode="html")
    assert isinstance(sim, PageSimulator) and sim.image_mode == "html"
    assert not isinstance(make_simulator(BACKEND, "openai:gpt-4o", base_url=stub.base_url, api_key="k"), PageSimulator)
    with pytest.raises(
        ConfigError, match=r"unknown simulator option\(s\) image_mode for backend tasks; known: .*api_key"
    ):
        make_simulator(BACKEND, "openai:gpt-4o", base_url=stub.base_url, api_key="k", image_mode="html")


def test_the_local_model_sees_html_not_images() -> None:
    from colbench.llm import llamacpp

    try:
        llamacpp.resolve_gguf()
        llamacpp.require_xllamacpp()
    except ConfigError as exc:
        pytest.skip(f"the embedded model is not installed: {exc}")
    sim = make_simulator(FRONTEND, "llamacpp")
    assert isinstance(sim, PageSimulator) and sim.image_mode == "html"
