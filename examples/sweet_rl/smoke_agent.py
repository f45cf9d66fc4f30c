"""A scripted agent for CPU smoke runs of the trainer: trajectories whose rewards are known in advance.

``colbench eval --agent smoke_agent:NoisyOracle`` (with ``examples/sweet_rl`` on the import path, as it is for the
stage scripts). Every episode asks one question, then answers in the second turn; what it answers depends on the
trial, so the k samples of a task get different, real rewards from the scorer:

- trial 0 (mod 3): the task's reference solution (reward 1: a chosen trajectory);
- trial 1: the reference of another task (a fluent but wrong answer: reward 0 unless the scorer disagrees);
- trial 2: a stub with the right name that returns ``None``.

The hidden information is read from the task list it is given (``tasks``: a split name or JSONL file), as the
``scripted:reference`` agent does: only tests may do that.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from colbench.agents.agent import AgentReply, EpisodeContext
from colbench.tasks import load
from colbench.types.chat import Message
from colbench.types.dialogue import ANSWER_MARKER

QUESTION = "Before I write it: what should happen with empty or unusual inputs?"


class NoisyOracle:
    def __init__(self, tasks: str = "backend-sample") -> None:
        self._tasks = load(tasks)
        self._by_id = {t.task_id: i for i, t in enumerate(self._tasks)}
        self.name = "smoke:noisy-oracle"

    def answer(self, task_id: str, trial: int) -> str:
        index = self._by_id[task_id]
        task = self._tasks[index]
        kind = trial % 3
        if kind == 0:
            code = task.ground_truth
        elif kind == 1:
            code = self._tasks[(index + 1) % len(self._tasks)].ground_truth
        else:
            match = re.search(r"def\s+(\w+)\s*\(", task.ground_truth)
            name = match.group(1) if match else "solution"
            code = f"def {name}(*args, **kwargs):\n    return None"
        return f"{ANSWER_MARKER}\n{code}"

    def act(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        if context.turn == 1 and context.max_turns > 1:
            return AgentReply(QUESTION)
        return AgentReply(self.answer(context.task_id, context.trial))

    async def aact(self, messages: Sequence[Message], context: EpisodeContext) -> AgentReply:
        return self.act(messages, context)

    async def aclose(self) -> None:
        """Nothing to close: it calls no model."""
