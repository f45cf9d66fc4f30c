"""Backend tasks written by hand in a test: a reference and its test calls (``make_task``), and one shared by the
ColBench+ tests (``TIERED``)."""

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


TIERED = '''def shipping_cost(weight, express):
    """Price of a parcel."""
    if weight > 20:
        cost = 30 + (weight - 20) * 2
    elif weight >= 5:
        cost = 15
    else:
        cost = 8
    if express and weight < 50:
        cost = cost * 1.5
    return round(cost, 2)
'''
# The task's own tests never touch a threshold: off-by-one and operator slips at 5, 20 and 50 all pass them.
TIERED_TESTS = [
    "shipping_cost(2, False)",
    "shipping_cost(10, False)",
    "shipping_cost(30, False)",
    "shipping_cost(3, True)",
]
