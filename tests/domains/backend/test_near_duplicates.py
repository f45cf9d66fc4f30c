"""Near-duplicate detection of backend references: disguised copies are found, distinct tasks are not, the index is
exact, and hostile sources (unparsable, empty, enormous, deeply nested) cost a bounded time and never crash."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict

import pytest

from colbench.domains.backend.near_copies import KINDS, near_copies
from colbench.domains.backend.near_duplicates import (
    DUPLICATE_THRESHOLD,
    MAX_TOKENS,
    NearDuplicateIndex,
    Nearest,
    code_fingerprint,
    similarity,
)
from colbench.errors import DataError
from colbench.types.task import Task

REFERENCE = '''import math

def weighted_score(values, weights, cap=10):
    """Weighted mean, capped."""
    total = 0.0
    norm = sum(weights)
    for value, weight in zip(values, weights):
        total += value * weight
    if norm == 0:
        return 0.0
    else:
        return min(cap, total / norm)
'''

NEW_NAMES = dict(weighted_score="compute", values="xs", weights="ws", cap="limit", total="acc", norm="denom")

DISGUISED = {
    "renamed": re.sub(  # every name new, the docstring dropped
        r"\w+",
        lambda word: {**NEW_NAMES, "value": "x", "weight": "w"}.get(word[0], word[0]),
        REFERENCE.replace('    """Weighted mean, capped."""\n', ""),
    ),
    "reformatted and commented": """import math
def weighted_score( values,weights,cap = 10 ) :
  # running sum
  total=0.0 ; norm=sum( weights )   # the normalizer

  for value,weight in zip( values,weights ) :
     total+=( value*weight )
  if norm==0 : return 0.0
  else : return min( cap,( total/norm ) )
""",
    "reordered and branch swapped": """import math

def weighted_score(values, weights, cap=10):
    norm = sum(weights)
    total = 0.0
    for value, weight in zip(values, weights):
        total += value * weight
    if not norm == 0:
        return min(cap, total / norm)
    else:
        return 0.0
""",
    "literal changed": REFERENCE.replace("cap=10", "cap=100"),
}

OTHER = """def count_words(text, stop_words):
    counts = {}
    for word in text.lower().split():
        if word in stop_words:
            continue
        counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
"""


def _task(task_id: str, code: str) -> Task:
    return Task(task_id, "backend", "Write a function.", code, code)


@pytest.mark.parametrize("kind", sorted(DISGUISED))
def test_a_disguised_copy_is_a_duplicate_of_its_original_and_only_of_it(kind: str) -> None:
    index = NearDuplicateIndex([_task("other", OTHER), _task("original", REFERENCE)])
    nearest = index.nearest(code_fingerprint(DISGUISED[kind]))
    assert nearest is not None and nearest.task_id == "original"
    assert nearest.similarity.duplicate, nearest
    assert [n.task_id for n in index.above(code_fingerprint(DISGUISED[kind]))] == ["original"]


def test_a_range_loop_and_the_while_loop_that_counts_are_one_construct() -> None:
    ranged = "def total(xs, n):\n    s = 0\n    for i in range(n):\n        s += xs[i] * i\n    return s\n"
    counted = (
        "def acc(v, m):\n    r = 0\n    k = 0\n    while k < m:\n        r += v[k] * k\n        k += 1\n    return r\n"
    )
    stepped = counted.replace("k += 1", "k += 2")  # not a loop over consecutive integers
    assert similarity(code_fingerprint(ranged), code_fingerprint(counted)).duplicate
    assert (
        similarity(code_fingerprint(ranged), code_fingerprint(counted)).ast
        > similarity(code_fingerprint(ranged), code_fingerprint(stepped)).ast
    )


def test_an_unrelated_function_is_not_a_duplicate() -> None:
    sim = similarity(code_fingerprint(REFERENCE), code_fingerprint(OTHER))
    assert not sim.duplicate and 0 <= sim.score < DUPLICATE_THRESHOLD
    assert sim.score == pytest.approx((sim.ast + sim.tokens) / 2)


def test_every_kind_of_near_copy_of_the_bundled_tasks_is_found(bundled_tasks: list[Task]) -> None:
    found = _recall(bundled_tasks, random.Random(1))
    assert set(found) >= set(KINDS) - {"loop_swapped"}  # the sample has every other kind of edit
    for kind in ("renamed", "reformatted", "commented", "all_cosmetic", "literal_changed"):
        assert found[kind] == 1.0, (kind, found)


def test_on_the_colbench_sample_copies_are_found_and_distinct_tasks_are_kept_apart(
    shared_backend_sample: list[Task],
) -> None:
    tasks = shared_backend_sample
    found = _recall(tasks, random.Random(0))
    for kind in ("renamed", "reformatted", "commented", "all_cosmetic", "literal_changed"):
        assert found[kind] == 1.0, (kind, found)
    assert found["branch_swapped"] >= 0.95 and found["reordered"] >= 0.9, found
    assert found["loop_swapped"] >= 0.75, found  # the hardest edit: a while loop over indices is another shape (docs)

    index = NearDuplicateIndex(tasks)
    prints = [code_fingerprint(task.ground_truth) for task in tasks]
    flagged = 0
    for task, fingerprint in zip(tasks, prints, strict=True):
        others = [n for n in index.above(fingerprint, 0.0) if n.task_id != task.task_id]
        flagged += bool(others) and others[0].similarity.duplicate
    assert flagged / len(tasks) <= 0.05, flagged  # the calibrated false-positive side: 2.7% (docs/generate.md)


def test_the_index_finds_the_exact_nearest_reference(shared_backend_sample: list[Task]) -> None:
    tasks = shared_backend_sample[:120]
    index = NearDuplicateIndex(tasks)
    prints = [code_fingerprint(task.ground_truth) for task in tasks]
    rng = random.Random(2)
    for query in rng.sample(shared_backend_sample, 25):
        fingerprint = code_fingerprint(query.ground_truth)
        brute = max(range(len(tasks)), key=lambda i: (similarity(fingerprint, prints[i]).score, -i))
        nearest = index.nearest(fingerprint)
        assert nearest is not None
        assert nearest.similarity == similarity(fingerprint, prints[brute])
        assert nearest.task_id == tasks[brute].task_id


def test_the_nearest_task_round_trips_through_its_record() -> None:
    nearest = NearDuplicateIndex([_task("original", REFERENCE)]).nearest(code_fingerprint(DISGUISED["renamed"]))
    assert nearest is not None
    row = json.loads(json.dumps(nearest.to_row()))
    again = Nearest.from_row(row)
    assert again.task_id == "original" and again.similarity.score == pytest.approx(nearest.similarity.score, abs=1e-4)
    for bad in ({}, {**row, "score": "high"}, {**row, "ast": 2.0}, {**row, "task_id": 3}, {**row, "tokens": None}):
        with pytest.raises(DataError, match="bad nearest-task record"):
            Nearest.from_row(bad)


def test_added_references_are_found_for_within_set_deduplication() -> None:
    index = NearDuplicateIndex()
    assert index.nearest(code_fingerprint(REFERENCE)) is None and len(index) == 0
    index.add("kept-1", code_fingerprint(OTHER))
    index.add("kept-2", code_fingerprint(REFERENCE))
    nearest = index.nearest(code_fingerprint(DISGUISED["renamed"]))
    assert nearest is not None and nearest.task_id == "kept-2" and len(index) == 2


def test_code_that_does_not_parse_is_compared_by_its_tokens() -> None:
    broken = REFERENCE.replace("def weighted_score(values, weights, cap=10):", "def weighted_score(values, weights")
    fingerprint = code_fingerprint(broken)
    assert not fingerprint.parsed and not fingerprint.ast and fingerprint.tokens
    sim = similarity(code_fingerprint(REFERENCE), fingerprint)
    assert sim.ast == 0.0 and sim.score == sim.tokens and sim.duplicate
    index = NearDuplicateIndex([_task("other", OTHER), _task("original", REFERENCE), _task("broken", broken)])
    nearest = index.nearest(code_fingerprint(REFERENCE))
    assert nearest is not None and nearest.task_id == "original" and nearest.similarity.score == 1.0
    assert [n.task_id for n in index.above(fingerprint)][:1] == ["broken"]
    assert not similarity(code_fingerprint(OTHER), code_fingerprint("def f(:\n  return ((")).duplicate


@pytest.mark.parametrize("empty", ["", "   \n\n", "# only a comment\n", '"""only a docstring"""\n'])
def test_an_empty_reference_is_a_duplicate_of_nothing(empty: str) -> None:
    fingerprint = code_fingerprint(empty)
    assert fingerprint.parsed and not fingerprint.ast and not fingerprint.tokens
    assert similarity(fingerprint, fingerprint).score == 0.0
    index = NearDuplicateIndex([_task("empty", empty), _task("original", REFERENCE)])
    assert index.nearest(fingerprint) is None
    nearest = index.nearest(code_fingerprint(REFERENCE))
    assert nearest is not None and nearest.task_id == "original"


def test_enormous_and_deeply_nested_sources_are_bounded() -> None:
    huge = "\n".join(f"def f{i}(a):\n    return a * {i} + len('{i}')" for i in range(40_000))
    fingerprint = code_fingerprint(huge)
    assert fingerprint.parsed  # cut before a whole statement, not in the middle of one
    assert len(fingerprint.tokens) <= MAX_TOKENS and len(fingerprint.ast) <= MAX_TOKENS
    assert similarity(fingerprint, code_fingerprint(huge + "\n" + huge)).score == 1.0  # what is past the cut: unread
    nested = "x = " + "(" * 5_000 + "1" + ")" * 5_000
    deep = code_fingerprint(nested)  # too deep for the parser: the tokens remain
    assert not deep.parsed and deep.tokens
    deep_lambda = code_fingerprint("f = " + "lambda: " * 3_000 + "0")
    assert deep_lambda.tokens
    for hostile in ("\x00", "x = '\ud800'", "def f():\n\x00 return 1", "x = 1" + " + 1" * 50_000):
        assert not code_fingerprint(hostile).parsed  # null bytes, lone surrogates, too deep for the walk
    assert code_fingerprint("\ufeff" + REFERENCE) == code_fingerprint(REFERENCE)  # a byte-order mark is no code
    one_line = code_fingerprint("x" * 1_000_000)  # a single huge token
    assert one_line.tokens and similarity(one_line, fingerprint).score < DUPLICATE_THRESHOLD


def test_fingerprints_do_not_depend_on_the_process() -> None:
    """Shingles are strings, not salted hashes: a fingerprint made elsewhere (a worker) compares the same."""
    fingerprint = code_fingerprint(REFERENCE)
    assert all(isinstance(s, str) for s in fingerprint.ast | fingerprint.tokens)
    assert fingerprint == code_fingerprint(REFERENCE)


def _recall(tasks: list[Task], rng: random.Random) -> dict[str, float]:
    """Per kind of copy, the share found as a duplicate of its original."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for task in tasks:
        original = code_fingerprint(task.ground_truth)
        for copy in near_copies(task.ground_truth, rng):
            hits[copy.kind].append(similarity(original, code_fingerprint(copy.code)).duplicate)
    kinds = Counter({kind: len(found) for kind, found in hits.items()})
    return {kind: sum(hits[kind]) / kinds[kind] for kind in kinds}
