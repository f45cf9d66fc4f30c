"""``colbench claims check --extractor MODEL_SPEC``: a model turns prose claims ("an empty list gives 0") into calls.

The model only *reads*: for each reply it lists the statements about what the function returns for specific
inputs as ``{"quote", "call", "value"}`` lines. Each line is written out as ``CALL returns VALUE`` and read by the
domain's own checker (``find``), so what the model proposes must still be a literal call of the task's function
and a value the checker can read; the verdict comes only from running the reference (``settle``). A proposal the
checker cannot read is dropped; one that repeats a claim the checker found itself is dropped too. Off by default:
a model is slower, costs tokens, and can misread, which is why it never decides a verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import is_dataclass, replace
from typing import TYPE_CHECKING, Any

from colbench.env.claim_check import ClaimChecker
from colbench.llm.specs import connect
from colbench.types.claims import Claim, Grounded

if TYPE_CHECKING:
    from colbench.llm.client import LLMClient
    from colbench.types.task import Task

PROMPT = (
    "You read a reply a person wrote while discussing a Python function. The function is called as in these "
    "examples: {examples}. List every statement of the reply about what the function returns for one specific "
    "input, one JSON object per line: "
    '{{"quote": "<the words of the reply that say it, copied exactly>", "call": "<the call, with literal Python '
    'arguments>", "value": "<the result stated, as a Python literal>"}}. '
    "Leave out statements about no specific input or no specific result. If there are none, answer NONE.\n\n"
    "{question}Reply: {reply}"
)
MAX_PROPOSALS = 8
_LINE = re.compile(r"\{.*\}")


class ExtractingChecker:
    """``inner`` with a model's proposals added to what ``find`` reads (see the module docstring)."""

    def __init__(self, inner: ClaimChecker, client: LLMClient, spec: str) -> None:
        self.inner = inner
        self.client = client
        self.name = f"{inner.name}+extractor({spec})"

    def find(self, task: Task, reply: str, question: str | None = None) -> Sequence[object]:
        own = list(self.inner.find(task, reply, question))
        examples = "; ".join(call for _, call in task.test_cases[:3]) or "(none given)"
        asked = f"The reply answers: {question}\n" if question else ""
        prompt = PROMPT.format(examples=examples, question=asked, reply=reply[:4000])
        answer = self.client.chat([{"role": "user", "content": prompt}]).text
        for proposal in _proposals(answer):
            text = f"{proposal['call']} returns {proposal['value']}"
            read = [f for f in self.inner.find(task, text) if is_dataclass(f) and hasattr(f, "span")]
            if len(read) != 1:
                continue
            at = reply.find(proposal["quote"]) if proposal["quote"] else -1
            span = (at, at + len(proposal["quote"])) if at >= 0 else (0, len(reply))
            found: Any = replace(read[0], span=span)  # type: ignore[type-var]
            if not any(getattr(o, "call", None) == found.call and getattr(o, "span", None) == span for o in own):
                own.append(found)
        return own

    def settle(self, task: Task, found: Sequence[Sequence[object]]) -> list[tuple[Claim, ...]]:
        return self.inner.settle(task, found)

    def ground(self, task: Task, agent_text: str) -> tuple[Grounded, ...]:
        return self.inner.ground(task, agent_text)


def _proposals(answer: str) -> list[dict[str, str]]:
    out = []
    for match in _LINE.finditer(answer):
        try:
            row = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("call"), str) and row.get("value") is not None:
            value = row["value"] if isinstance(row["value"], str) else json.dumps(row["value"])
            out.append({"call": row["call"], "value": value, "quote": str(row.get("quote") or "")})
        if len(out) >= MAX_PROPOSALS:
            break
    return out


def with_extractor(checker: ClaimChecker, spec: str) -> ClaimChecker:
    """``checker`` with a model (``openai:MODEL``, ``llamacpp``) turning prose claims into calls, temperature 0."""
    client = connect(spec, "extractor", defaults_for="agent", temperature=0.0)
    return ExtractingChecker(checker, client, spec)
