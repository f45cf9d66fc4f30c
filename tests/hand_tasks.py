"""Backend tasks written by hand in a test: a reference and its test calls (``make_task``)."""

from __future__ import annotations

from colbench.types.task import Task


def make_task(ground_truth: str, tests: list[str], task_id: str = "t") -> Task:
    return Task(
        task_id=task_id,
        domain="backend",
        problem_description="Write f.",
        ground_truth=ground_truth,
        hidden_information=ground_truth,
        test_cases=tuple((f"test{i + 1}", e) for i, e in enumerate(tests)),
    )
