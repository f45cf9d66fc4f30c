"""Posting a chat request the short way, through the openai client's own URL, headers and errors: everything colbench
takes from the openai and httpx2 packages' private API is here (tests/llm/test_private_api.py names each piece, and
pyproject.toml bounds both packages to the minor versions tested).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx2
import openai
from openai._models import FinalRequestOptions

from colbench.llm.http11 import Http11Transport

log = logging.getLogger(__name__)

CHAT_PATH = "/chat/completions"
BEARER: Any = {"security": {"bearer_auth": True}}  # the request options chat.completions.create sends


class ChatPost:
    """``client.post(CHAT_PATH, ...)`` without the openai client's per-request pipeline (option models copied twice,
    headers merged and validated, the URL parsed again) nor httpx's request and response objects: about 0.5 ms of
    CPU a request, which N requests sent at once (a vector env's step) pay one after the other before the last one
    leaves (docs/rl.md, "Throughput"). The URL and headers are the ones the openai client builds, taken once from a
    request it builds; the bytes go to the connection pool of its HTTP client (:class:`Http11Transport`, through
    ``exchange``), and errors become the openai client's own (status errors by its mapping, timeouts and dropped
    connections as ``APITimeoutError`` / ``APIConnectionError``), so retries and messages are unchanged. Auth other
    than a fixed API key (refreshing tokens), and a proxy from the environment, take the openai client's path."""

    def __init__(self, client: openai.AsyncOpenAI, http: httpx2.AsyncClient, transport: Http11Transport) -> None:
        self.client = client
        self._transport = transport
        self._direct: tuple[httpx2.URL, list[tuple[bytes, bytes]], dict[str, Any]] | None = None
        if type(client) is not openai.AsyncOpenAI or not isinstance(client.api_key, str) or client.custom_auth:
            return
        try:
            template = client._build_request(FinalRequestOptions.construct(method="post", url=CHAT_PATH, **BEARER))
            routed = http._transport_for_url(template.url)
        except Exception:  # private details of the openai and httpx clients: without them, the openai path
            log.debug("could not build the openai client's request template", exc_info=True)
            return
        if routed is transport:  # not a proxy's
            headers = [(k, v) for k, v in template.headers.raw if k.lower() != b"content-length"]
            self._direct = (template.url, headers, http.timeout.as_dict())

    async def send(self, body: Mapping[str, Any]) -> object:
        """The decoded JSON reply to ``body`` (a body that is not JSON raises ``json.JSONDecodeError``)."""
        if self._direct is None:
            return await self.client.post(CHAT_PATH, body=body, cast_to=object, options=BEARER)
        url, headers, timeouts = self._direct
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()  # as openai's
        head = [*headers, (b"Content-Length", str(len(content)).encode())]
        try:
            reply = await self._transport.exchange(url, (b"POST", url.raw_path, head, content), timeouts)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=httpx2.Request("POST", url, headers=head)) from exc
        except httpx2.HTTPError as exc:
            raise openai.APIConnectionError(request=httpx2.Request("POST", url, headers=head)) from exc
        if reply.status_code >= 400:
            response = reply.response()
            response.request = httpx2.Request("POST", url, headers=head, content=content)
            raise self.client._make_status_error_from_response(response)
        return reply.response().json() if reply.encoded else json.loads(reply.body)


def know_platform(client: openai.AsyncOpenAI) -> None:
    """Tell a new client its platform now. Otherwise its first requests, all of them while it is unknown, each ask a
    worker thread (the openai client avoids the blocking call on the loop): one thread hop per episode at once."""
    try:
        from openai._base_client import get_platform

        if getattr(client, "_platform", False) is None:
            client._platform = get_platform()
    except Exception:  # a private detail of the openai client: without it the client finds out itself
        log.debug("could not set the openai client's platform", exc_info=True)
