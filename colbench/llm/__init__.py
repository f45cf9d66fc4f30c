"""The LLM layer: one client for every chat model (agents and simulated humans), the spec parser, the response
cache, request limits and the embedded llama.cpp server (imported only when a ``llamacpp`` spec asks for it)."""

from __future__ import annotations

from colbench.llm.cache import ResponseCache
from colbench.llm.client import ENDPOINT_FIELDS, ChatRequest, Endpoint, LLMClient, LLMRequestRejected
from colbench.llm.limits import EndpointLimits, Gate
from colbench.llm.specs import FORMS, ModelSpec, connect, endpoint_for, parse_spec
from colbench.types.chat import ChatReply, Message, Usage

__all__ = [
    "ENDPOINT_FIELDS",
    "FORMS",
    "ChatReply",
    "ChatRequest",
    "Endpoint",
    "EndpointLimits",
    "Gate",
    "LLMClient",
    "LLMRequestRejected",
    "Message",
    "ModelSpec",
    "ResponseCache",
    "Usage",
    "connect",
    "endpoint_for",
    "parse_spec",
]
