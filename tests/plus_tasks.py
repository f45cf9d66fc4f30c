"""Tasks of the bundled backend sample with ColBench+ tests written by hand, and an answer that only v1 accepts.

The travel task's reference joins every country but the last with commas; its ten tests use at most three
countries. ``OVERFIT`` joins only the first two, so it passes all ten and is wrong from four countries on: the plus
tests give it four and five (and two, which it gets right).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from colbench.tasks import Task
from colbench.types.task import PlusTests

TRAVEL = "summarize_travel_experiences"
TRAVEL_PLUS = (
    ("plus1", "summarize_travel_experiences(['Peru', 'Chile', 'Bolivia', 'Ecuador'])"),
    ("plus2", "summarize_travel_experiences(['A', 'B', 'C', 'D', 'E'])"),
    ("plus3", "summarize_travel_experiences(['Nepal', 'Bhutan'])"),
)
OVERFIT = (
    "I WANT TO ANSWER:\n```python\n"
    "def summarize_travel_experiences(travel_history):\n"
    "    if not travel_history:\n"
    '        return "You have not traveled to any countries."\n'
    "    if len(travel_history) == 1:\n"
    '        return f"You have traveled to {travel_history[0]}"\n'
    "    return f\"You have traveled to {', '.join(travel_history[:2][: len(travel_history) - 1])} and "
    '{travel_history[-1]}"\n'
    "```"
)


def travel(tasks: list[Task]) -> Task:
    """The bundled travel task without the plus tests the sample ships: these tests give it their own."""
    return replace(next(t for t in tasks if TRAVEL in t.ground_truth), plus=None)


def with_plus(task: Task, augmenter: str = "hand/1") -> Task:
    """``task`` with plus tests: the travel task's three above; any other task's first call again, renamed."""
    cases = TRAVEL_PLUS if TRAVEL in task.ground_truth else (("plus1", task.test_cases[0][1]),)
    return replace(task, plus=PlusTests(cases, augmenter))


def write_tasks(path: Path, tasks: list[Task]) -> Path:
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks), encoding="utf-8")
    return path
