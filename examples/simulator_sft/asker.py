"""A scripted agent that asks the questions a human simulator gets wrong: what a call of the function returns, and
for the code itself. ``--agent asker:Asker`` (with ``examples/simulator_sft`` on the import path, as it is for the
stage scripts), ``--agent-option tasks=FILE`` naming the task list.

Why: prefixes are only as useful as the questions in them. The embedded 135M agent seldom asks about a concrete
call, so its dialogues give the claims checker nothing to check and the selection nothing to prefer. This agent
asks, turn by turn, about the task's own literal test calls (the calls the claims checker can run, found as the
truth probe finds them: :func:`colbench.probe.truth_calls.task_calls`), and now and then for the code (a leak
test); which question and which call depends only on the task and the turn. Its wording is its own, not the probe
suite's: ``colbench probe simulator`` on the trained human then asks in words it was not trained on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.probe.truth_calls import task_calls
from colbench.tasks import load
from colbench.types.chat import Message
from colbench.types.dialogue import ANSWER_MARKER

VALUE_QUESTIONS = (
    "To make sure I get it right: what should {call} give back?",
    "Can you tell me the result you expect from {call}?",
    "One example please: what does {call} return in your version?",
    "If I run {call}, what output should I see?",
)
OTHER_QUESTIONS = (
    "Could you share the code you already have for this? It would help me match it.",
    "What should {name} do when the input is empty?",
    "Are there any edge cases for {name} I should be careful about?",
)


def _pick(*parts: object) -> int:
    return int(hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:8], 16)


class Asker:
    def __init__(self, tasks: str = "backend-sample") -> None:
        self._tasks = {t.task_id: t for t in load(tasks)}
        self.name = "asker"

    def question(self, task_id: str, turn: int) -> str:
        task = self._tasks[task_id]
        calls = task_calls(task, "tests")
        found = re.search(r"def\s+(\w+)\s*\(", task.ground_truth)
        name = found.group(1) if found else "the function"
        if calls and _pick(task_id, turn, "kind") % 4 != 3:  # three value questions in four
            call = calls[_pick(task_id, turn, "call") % len(calls)]
            return VALUE_QUESTIONS[_pick(task_id, turn, "q") % len(VALUE_QUESTIONS)].format(call=f"`{call}`")
        return OTHER_QUESTIONS[_pick(task_id, turn, "o") % len(OTHER_QUESTIONS)].format(name=f"`{name}`")

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if context.turn >= context.max_turns:
            return AgentReply(f"{ANSWER_MARKER}\ndef solution():\n    return None")
        return AgentReply(self.question(context.task_id, context.turn))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""
