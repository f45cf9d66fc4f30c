"""ColBench+ plus tests reach what the task's tests hide, and stay in the tests' magnitude (issue 39).

* A constant the reference only computes with (``i * 7919``) never becomes an input: a plus input goes past the
  tests' magnitude only where a comparison of the reference needs it, and never so far that an answer recursing
  once per unit goes deeper than the tests' own inputs could take it.
* A comparison whose outcome the rest of an ``or`` chain hides on every test, and a coefficient that a cap hides on
  every test, are both put where they decide the value.
"""

from __future__ import annotations

import random

import pytest
from hand_tasks import make_task

from colbench.domains.backend.plus.augment import augment_task
from colbench.domains.backend.plus.inputs import (
    depth_safe,
    domain_of,
    in_magnitude,
    mutated_calls,
    template,
    templates,
)
from colbench.domains.backend.plus.mutants import fit_only, mutants
from colbench.domains.backend.scorer import BackendScorer
from colbench.tasks import Task

CHECKSUM = """def checksum(n):
    total = 0
    for i in range(1, n + 1):
        total = (total + i * 7919) % 1000003
    if n > 40:
        return -total
    return total
"""
"""An iterative reference with a large constant it only multiplies by, and one comparison beyond the tests."""
CHECKSUM_TESTS = [f"checksum({n})" for n in (1, 2, 3, 5, 8, 10)]
RECURSIVE = """def checksum(n):
    def walk(k):
        return 0 if k == 0 else (walk(k - 1) + k * 7919) % 1000003

    total = walk(n)
    return -total if n > 40 else total
"""
"""A correct answer that recurses once per unit: fine to depth 900 or so, never at 7919."""


def _numbers(call: str) -> list[int]:
    found = template(call)
    assert found is not None
    return [v for v in found.values if isinstance(v, int)]


def test_magnitude_bounds() -> None:
    assert in_magnitude(20, 10) and not in_magnitude(21, 10)  # twice the tests' largest in the place
    assert in_magnitude(3, 1) and not in_magnitude(4, 1)  # at least two more
    assert in_magnitude(1.6, 0.6) and not in_magnitude(1.7, 0.6)  # a float at least one more
    assert not in_magnitude(7919, 10) and in_magnitude(-20, 10)
    # An int beyond the tests' largest: an answer recursing up to 3 frames per unit stays within 950 frames
    # wherever the tests' own inputs keep it there.
    assert depth_safe(316, 10) and not depth_safe(317, 10)
    assert depth_safe(475, 400) and not depth_safe(476, 400) and depth_safe(402, 400)  # two more: always
    assert depth_safe(950, 500) and not depth_safe(951, 500)
    assert depth_safe(5000, 2000) and depth_safe(5000.0, 10)  # the tests break such an answer already; a float
    assert not in_magnitude(600, 300) and in_magnitude(302, 300)


def test_new_inputs_stay_in_the_tests_magnitude_unless_a_comparison_needs_more() -> None:
    families = templates([(f"t{i}", c) for i, c in enumerate(CHECKSUM_TESTS)], CHECKSUM)
    domain = domain_of(families, CHECKSUM)
    assert domain.boundaries == [40] and 7919 in domain.numbers  # compared with / only computed with
    made = mutated_calls(families, domain, random.Random(0), 400)
    values = {n for c in made for n in _numbers(c.call)}
    assert values and not values & {7918, 7919, 7920, 1000002, 1000003}
    beyond = {n for c in made if c.beyond for n in _numbers(c.call)}
    assert beyond == {39, 40, 41} and all(n <= 20 for n in values - beyond)  # 20: twice the tests' largest
    # Nested places keep their own magnitude: a list of small counts beside a large total.
    nested = templates([("t", "f([1, 2, 3], 5000)"), ("u", "f([2, 4], 8000)")], "def f(xs, total):\n    return 1\n")
    calls = mutated_calls(nested, domain_of(nested, "def f(xs, total):\n    return 1\n"), random.Random(1), 200)
    for c in calls:
        found = template(c.call)
        assert found is not None
        xs, total = found.values
        assert all(abs(x) <= 8 for x in xs) and abs(total) <= 16000 and not c.beyond


def test_a_recursive_answer_passes_v2_on_an_iterative_reference(scorer: BackendScorer) -> None:
    task = make_task(CHECKSUM, CHECKSUM_TESTS, task_id="checksum")
    made = augment_task(task, scorer)
    assert made.plus.cases
    for _, call in made.plus.cases:  # nothing near 7919; 39..41 only where `n > 40` decides
        assert all(n <= 41 for n in _numbers(call)), call
    assert scorer.score(task, RECURSIVE).success
    v2 = BackendScorer(scorer.sandbox, plus=True)
    assert v2.score(made.task, RECURSIVE).success
    assert not v2.score(made.task, CHECKSUM.replace("n > 40", "n >= 40")).success  # the boundary is tested


def _killed_by_plus_only(scorer: BackendScorer, task: Task, wrong: str) -> bool:
    """The wrong answer passes the task's tests and fails its plus tests."""
    made = augment_task(task, scorer).task
    v2 = BackendScorer(scorer.sandbox, plus=True)
    return bool(scorer.score(task, wrong).success) and v2.score(made, wrong).success is False


RISK = """def risk_level(age, bmi, smoker_years, bp):
    if age > 65 or bmi >= 35 or smoker_years > 20 or bp > 140:
        return 'high'
    if age > 45 or bmi >= 30 or bp > 130:
        return 'medium'
    return 'low'
"""
# At each threshold the tests put a value on, another comparison of the chain is true: none decides there.
RISK_TESTS = [
    "risk_level(70, 22, 0, 120)",
    "risk_level(66, 36, 25, 150)",
    "risk_level(30, 35, 21, 141)",
    "risk_level(50, 31, 5, 125)",
    "risk_level(40, 24, 0, 110)",
    "risk_level(45, 30, 20, 140)",
    "risk_level(60, 28, 10, 135)",
    "risk_level(25, 20, 2, 118)",
]


OFFER = """def best_offer(prices, fees):
    return min(prices, key=lambda k: prices[k] + 0.3 * fees[k])
"""
# The prices are far apart on every test: the fees never decide which offer is best.
OFFER_TESTS = [
    "best_offer({'a': 100, 'b': 80, 'c': 120}, {'a': 10, 'b': 20, 'c': 5})",
    "best_offer({'a': 50, 'b': 70, 'c': 90}, {'a': 15, 'b': 5, 'c': 1})",
    "best_offer({'a': 200, 'b': 150, 'c': 180}, {'a': 0, 'b': 30, 'c': 10})",
    "best_offer({'a': 60, 'b': 65, 'c': 100}, {'a': 5, 'b': 2, 'c': 8})",
]


# (task id, reference, its tests, the edits that make it wrong where no test looks)
HIDDEN_BY_THE_TESTS = [
    # A comparison masked in an or chain is put where it decides. (Augmenter 1 let `age > 66` and `age >= 45`
    # through: too many tests wanted for the cap, none of them these.)
    (
        "risk",
        RISK,
        RISK_TESTS,
        [("age > 65", "age > 66"), ("age > 45", "age >= 45"), ("bmi >= 35", "bmi >= 36"), ("bp > 130", "bp > 131")],
    ),
    # A coefficient no test makes matter is made to. (Augmenter 1 let `- 0.3 * fees` through: its few killing
    # inputs were never run against the wider edits.)
    (
        "offer",
        OFFER,
        OFFER_TESTS,
        [(" + 0.3 * ", " + 1.3 * "), (" + 0.3 * ", " + 0.6 * "), (" + 0.3 * ", " - 0.3 * ")],
    ),
]


@pytest.mark.parametrize(
    ("task_id", "reference", "tests", "edits"), HIDDEN_BY_THE_TESTS, ids=[case[0] for case in HIDDEN_BY_THE_TESTS]
)
def test_a_wrong_edit_the_tests_miss_is_killed_by_the_plus_tests(
    scorer: BackendScorer, task_id: str, reference: str, tests: list[str], edits: list[tuple[str, str]]
) -> None:
    task = make_task(reference, tests, task_id=task_id)
    for old, new in edits:
        assert reference.count(old) == 1, old  # the edit touches the one place the case is about
        assert _killed_by_plus_only(scorer, task, reference.replace(old, new)), (old, new)


RISES = """def ends_rising(notes):
    steps = [notes[i] - notes[i - 1] for i in range(1, len(notes))]
    return steps[-1] > 0
"""
RISES_TESTS = [
    "ends_rising([60, 62, 64, 65, 67])",
    "ends_rising([67, 65, 64, 62, 60])",
    "ends_rising([60, 64, 62, 65, 63])",
]


def test_lists_shorter_than_every_tests_are_tried(scorer: BackendScorer) -> None:
    """Every test passes five notes: an answer that skips the first step is wrong on two notes only."""
    task = make_task(RISES, RISES_TESTS, task_id="rises")
    assert _killed_by_plus_only(scorer, task, RISES.replace("range(1,", "range(2,"))
    families = templates(task.test_cases, RISES)
    assert families[0].short(0, [1, 2]) and families[0].short(0, [5]) and not families[0].short(0, [1, 2, 3])


def test_wider_edits_are_never_the_measured_mutants() -> None:
    for source in (RISK, OFFER, CHECKSUM):
        wider = fit_only(source)
        assert wider and not {m.code for m in mutants(source)} & {m.code for m in wider}
    edits = {m.edit for m in fit_only(RISK)}
    assert {"line 2: age > 65 -> age - 1 > 65", "line 2: age > 65 -> age + 1 > 65", "line 2: 65 -> 52"} <= edits
    assert "line 2: 65 -> 66" not in edits  # the constant operator's edit: measured, never fitted on
    source = "def f(t, ys, a, b):\n    return max(t, max(ys)) + round(abs(a) // b, 2) + (40 <= t < 60)\n"
    edits = {m.after for m in fit_only(source)}
    assert {"t", "max(ys)", "abs(a) // b", "a", "-(-abs(a) // b)", "40 <= t - 1 < 60", "40 <= t < 60 + 1"} <= edits
    assert len(fit_only(CHECKSUM, limit=3, seed="s")) == 3
    assert fit_only(CHECKSUM, limit=3, seed="s") == fit_only(CHECKSUM, limit=3, seed="s")
