"""ColBench+ validity: the plus tests never fail the reference or a correct answer written another way, and v2
never lets through what v1 caught (issue 26)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from paths import REPO
from rewrites import rewrites

from colbench.domains.backend.plus.augment import augment_task
from colbench.domains.backend.plus.mutants import mutants
from colbench.domains.backend.plus_digest import plus_digest
from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox import Sandbox
from colbench.tasks import Task

ANSWERS = REPO / "bench" / "data" / "plus" / "independent_answers.jsonl"


@pytest.fixture(scope="module")
def v2(bwrap_sandbox: Sandbox) -> BackendScorer:
    return BackendScorer(bwrap_sandbox, plus=True)


def test_the_bundled_sample_ships_its_plus_tests(bundled_tasks: list[Task]) -> None:
    assert all(t.plus is not None for t in bundled_tasks)
    assert sum(len(t.plus.cases) for t in bundled_tasks if t.plus) >= len(bundled_tasks)


def test_every_reference_passes_all_its_plus_tests_on_both_runtimes(
    any_sandbox: Sandbox, bundled_tasks: list[Task]
) -> None:
    scorer = BackendScorer(any_sandbox, plus=True)
    scores = scorer.score_many([(t, t.ground_truth) for t in bundled_tasks])
    for task, score in zip(bundled_tasks, scores, strict=True):
        assert task.plus is not None
        assert score.success and score.tests_total == len(task.test_cases) + len(task.plus.cases), task.task_id


def test_rewrites_of_each_reference_pass_under_v2(v2: BackendScorer, bundled_tasks: list[Task]) -> None:
    pairs = [(t, r.code) for t in bundled_tasks for r in rewrites(t.ground_truth)]
    kinds = {r.kind for t in bundled_tasks for r in rewrites(t.ground_truth)}
    assert len(pairs) >= 2 * len(bundled_tasks) and len(kinds) >= 5
    failed = [(t.task_id, code) for (t, code), s in zip(pairs, v2.score_many(pairs), strict=True) if not s.success]
    assert failed == []


def test_a_mutant_v1_kills_is_killed_by_v2(scorer: BackendScorer, v2: BackendScorer, bundled_tasks: list[Task]) -> None:
    pairs = [(t, m.code) for t in bundled_tasks[:8] for m in mutants(t.ground_truth, limit=20, seed=t.task_id)]
    v1_scores, v2_scores = scorer.score_many(pairs), v2.score_many(pairs)
    killed_v1 = [k for k, s in enumerate(v1_scores) if s.success is False]
    assert killed_v1 and all(v2_scores[k].success is False for k in killed_v1)
    assert sum(s.success is False for s in v2_scores) >= len(killed_v1)


@pytest.mark.slow
def test_independently_written_correct_answers_pass_v2(
    scorer: BackendScorer, shared_backend_sample: list[Task]
) -> None:
    rows = [json.loads(line) for line in ANSWERS.read_text(encoding="utf-8").splitlines()]
    by_id = {t.task_id: t for t in shared_backend_sample}
    tasks = [by_id[r["task_id"]] for r in rows[:12]]
    with ThreadPoolExecutor(2) as pool:
        augmented = list(pool.map(lambda t: augment_task(t, scorer).task, tasks))
    v2 = BackendScorer(scorer.sandbox, plus=True)
    pairs = [(t, r["answer"]) for t, r in zip(augmented, rows, strict=False)]
    assert all(s.success for s in scorer.score_many(pairs))  # they are correct by the task's own tests
    assert [t.task_id for (t, _), s in zip(pairs, v2.score_many(pairs), strict=True) if not s.success] == []


@pytest.mark.slow
def test_correct_answers_written_otherwise_pass_v2(scorer: BackendScorer, shared_backend_sample: list[Task]) -> None:
    """Recursive answers where the reference iterates (and loops, comprehensions, helpers where it does otherwise;
    issue 39): no plus input takes them where the tests' own inputs would not, recursion depth included."""
    rows = [json.loads(line) for line in ANSWERS.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r.get("style") == "recursive"][:8]
    by_id = {t.task_id: t for t in shared_backend_sample}
    with ThreadPoolExecutor(2) as pool:
        augmented = list(pool.map(lambda r: augment_task(by_id[r["task_id"]], scorer).task, rows))
    v2 = BackendScorer(scorer.sandbox, plus=True)
    pairs = [(t, r["answer"]) for t, r in zip(augmented, rows, strict=True)]
    assert len(pairs) == 8 and all(s.success for s in scorer.score_many(pairs))
    assert [t.task_id for (t, _), s in zip(pairs, v2.score_many(pairs), strict=True) if not s.success] == []


SAMPLE_PLUS_DIGEST = "da2043b60055d0031df3bc427e54018bed8a6236e50a9970caf9363bd1ad2ac6"
"""The digest of the bundled sample's plus tests (augmenter 2). The augmenter is deterministic: if a change to it
moves this, the change needs a new AUGMENTER_VERSION and the sample re-augmented."""


def test_augmentation_reproduces_the_shipped_plus_tests(scorer: BackendScorer, bundled_tasks: list[Task]) -> None:
    assert plus_digest(bundled_tasks) == SAMPLE_PLUS_DIGEST
    for task in bundled_tasks[:4]:
        assert augment_task(replace(task, plus=None), scorer).task.plus == task.plus
