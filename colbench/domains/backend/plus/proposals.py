"""Candidate calls a model proposes from the task's description (``colbench tasks augment --generator SPEC``).

Off by default. The model sees what the agent and the human see of the task (the request and the hidden
information) and the task's own test calls, and is asked for new calls, one per line. A proposed call is kept only
when it has the skeleton of one of the task's own calls (the same function, the same argument shapes) and its
values are in the tests' input domain and magnitude (``inputs``); then it is a candidate like any other: the
reference must run it within the budgets and it must kill something to be kept. With a model the plus tests also
depend on its replies (temperature 0; cached with ``cache_path``).
"""

from __future__ import annotations

from collections.abc import Sequence

from colbench.domains.backend.plus.inputs import Family, domain_of, magnitude, template
from colbench.llm.client import LLMClient
from colbench.types.task import Task

PROMPT = """You write unit-test inputs for a Python function.

Task request:
{request}

What the requester knows about the function:
{hidden}

Existing test calls:
{calls}

Write {count} NEW test calls that exercise different behaviour: boundary values of every threshold, each branch,
unusual but valid inputs of the same types. Use exactly the same function names and argument types as the existing
calls. Output only the calls, one per line, no numbering, no comments."""


class ModelProposer:
    """Proposes ``count`` calls per task with ``client`` (kept as the module docstring says)."""

    def __init__(self, client: LLMClient, count: int = 20) -> None:
        self.client, self.count = client, count

    def __call__(self, task: Task, families: Sequence[Family]) -> list[str]:
        calls = "\n".join(t.source for f in families for t in f.templates)
        prompt = PROMPT.format(
            request=task.problem_description.strip(),
            hidden=task.hidden_information.strip(),
            calls=calls,
            count=self.count,
        )
        reply = self.client.chat([{"role": "user", "content": prompt}])
        return kept_proposals(reply.text, families, task.ground_truth)


def kept_proposals(text: str, families: Sequence[Family], reference: str) -> list[str]:
    """The lines of a model's reply that are calls in the shape, domain and magnitude of the task's own calls."""
    skeletons = {f.skeleton: f for f in families}
    domain = domain_of(families, reference)
    kept: list[str] = []
    for line in text.splitlines():
        call = line.strip().strip("`").strip()
        found = template(call) if call else None
        if found is None or found.skeleton() not in skeletons or found.source in kept:
            continue
        family = skeletons[found.skeleton()]
        values = dict(enumerate(found.values))
        if all(domain.allows(v) for v in found.values) and magnitude(family, values, domain) is False:
            kept.append(found.source)
    return kept
