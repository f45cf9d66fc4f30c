"""The records every layer passes around a chat model: messages, token usage, replies.

They live apart from the LLM client so that reading a run directory or a transcript never loads the ``openai``
package and its HTTP stack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Message = Mapping[str, Any]
"""One chat message as the OpenAI chat API takes it (``role``, ``content``, ...)."""


@dataclass
class Usage:
    """Token accounting. ``calls`` counts completions the endpoint returned (each one may be billed)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ChatReply:
    text: str
    usage: Usage
    finish_reason: str | None = None
    cached: bool = False
    #: The ids the model sampled, where the server returns them (vLLM's ``return_token_ids``), and their log-probs
    #: where it also returned those: a trainer then trains on exactly them (``colbench.types.sampled``).
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
