"""The private names of openai and httpx2 that colbench.llm.chat_post relies on, each checked for existence and shape.

pyproject.toml bounds both packages to the minor versions tested, because a private name may move in any minor
release. Raising a bound starts here: a failure names the piece that moved. Most of them fail soft at run time
(ChatPost falls back to the openai client's own path, slower by about 0.5 ms a request), so without this test a
move would only show as lost throughput."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import httpx2
import openai
import pytest

from colbench.llm.chat_post import ChatPost, know_platform
from colbench.llm.http11 import Http11Transport

VERSIONS = f"openai {openai.__version__}, httpx2 {httpx2.__version__}"

# name -> the positional parameters it must take without a default (after self)
CALLABLES = {
    "openai._models.FinalRequestOptions.construct": [],
    "openai.AsyncOpenAI._build_request": ["options"],
    "openai.AsyncOpenAI._make_status_error_from_response": ["response"],
    "openai._base_client.get_platform": [],
    "httpx2.AsyncClient._transport_for_url": ["url"],
}


def resolve(dotted: str) -> Any:
    """``dotted`` imported as far as it is a module, then read attribute by attribute (AssertionError naming it)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(found, attr):
                raise AssertionError(
                    f"{VERSIONS}: {'.'.join(parts[: i + 1])} is gone (colbench.llm.chat_post uses {dotted})"
                )
            found = getattr(found, attr)
        return found
    raise AssertionError(f"{VERSIONS}: no module of {dotted} imports")


@pytest.mark.parametrize("dotted", list(CALLABLES))
def test_each_private_callable_exists_with_its_parameters(dotted: str) -> None:
    target = resolve(dotted)
    assert callable(target), f"{VERSIONS}: {dotted} is no longer callable"
    required = [
        p.name
        for p in inspect.signature(target).parameters.values()
        if p.name != "self" and p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    assert required == CALLABLES[dotted], f"{VERSIONS}: {dotted} now takes {required}, not {CALLABLES[dotted]}"


def test_the_request_options_and_the_client_attributes_keep_their_shape() -> None:
    fields = set(resolve("openai._models.FinalRequestOptions").model_fields)
    assert {"method", "url", "security"} <= fields, f"{VERSIONS}: FinalRequestOptions fields are now {sorted(fields)}"
    custom_auth = inspect.getattr_static(openai.AsyncOpenAI, "custom_auth", None)
    assert isinstance(custom_auth, property), f"{VERSIONS}: openai.AsyncOpenAI.custom_auth is no longer a property"
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url="http://127.0.0.1:9/v1")
    assert getattr(client, "_platform", False) is None, f"{VERSIONS}: openai.AsyncOpenAI._platform is gone"
    know_platform(client)
    assert client._platform is not None


def test_the_direct_path_is_taken_and_errors_map_as_the_openai_client_maps_them() -> None:
    """Built as LLMClient builds it, ChatPost posts directly (not through the openai client's fallback path), to the
    URL and with the headers the openai client would use; a status maps to the openai client's own error."""
    transport = Http11Transport(openai.DEFAULT_CONNECTION_LIMITS)
    http = openai.DefaultAsyncHttpxClient(transport=transport, limits=openai.DEFAULT_CONNECTION_LIMITS, timeout=5.0)
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url="http://127.0.0.1:9/v1", http_client=http)
    post = ChatPost(client, http, transport)
    assert post._direct is not None, f"{VERSIONS}: ChatPost fell back to the openai path (a private name moved)"
    url, headers, _ = post._direct
    assert str(url) == "http://127.0.0.1:9/v1/chat/completions"
    assert (b"authorization", b"Bearer EMPTY") in headers
    response = httpx2.Response(429, json={"error": {"message": "slow down"}}, request=httpx2.Request("POST", url))
    error = client._make_status_error_from_response(response)
    assert isinstance(error, openai.RateLimitError) and error.status_code == 429, f"{VERSIONS}: {error!r}"
