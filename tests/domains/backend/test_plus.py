"""ColBench+: mutants, input generation, batched calls in the sandbox, augmentation and the audit."""

from __future__ import annotations

import ast
import json
import operator
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hand_tasks import TIERED, TIERED_TESTS, make_task

from colbench.domains.backend.plus.audit import TaskAudit, audit_task, summarize
from colbench.domains.backend.plus.augment import AUGMENTER_VERSION, MAX_TESTS, augment_task, is_fit
from colbench.domains.backend.plus.calls import run_calls, run_sources
from colbench.domains.backend.plus.coverage import instrument
from colbench.domains.backend.plus.inputs import domain_of, mutated_calls, random_calls, template, templates
from colbench.domains.backend.plus.mutants import OPERATORS, mutants
from colbench.domains.backend.plus.plus_cache import PlusCache
from colbench.domains.backend.plus.proposals import ModelProposer, kept_proposals
from colbench.domains.backend.scorer import BackendScorer
from colbench.llm.specs import connect
from colbench.sandbox.contract import Budget
from colbench.tasks import Task, load_jsonl
from colbench.types.task import PlusTests


def tiered_task() -> Task:
    return make_task(TIERED, TIERED_TESTS, task_id="tiered")


def test_every_operator_makes_single_edits_that_compile() -> None:
    made = mutants(TIERED)
    assert {m.operator for m in made} >= {
        "arithmetic",
        "comparison",
        "boolean",
        "constant",
        "negate",
        "remove",
        "return",
    }
    assert set(OPERATORS) >= {m.operator for m in made}
    baseline = ast.unparse(ast.parse(TIERED))
    for m in made:
        compile(m.code, "m", "exec")
        assert m.code != baseline
        changed = [a for a, b in zip(baseline.splitlines(), m.code.splitlines(), strict=False) if a != b]
        assert len(changed) <= 1 or m.operator == "remove", m.edit  # one line changes (an edit of one node)
    edits = {m.edit for m in made}
    assert "line 3: weight > 20 -> weight >= 20" in edits
    assert "line 9: express and weight < 50 -> express or weight < 50" in edits
    assert "line 11: return round(cost, 2) -> return None" in edits
    assert not any("Price of a parcel" in m.before for m in made)  # docstrings are never mutated
    assert len({m.code for m in made}) == len(made)


def test_mutant_limit_keeps_a_seeded_spread() -> None:
    all_of_them = mutants(TIERED)
    a, b = mutants(TIERED, limit=5, seed="x"), mutants(TIERED, limit=5, seed="x")
    assert [m.code for m in a] == [m.code for m in b] and len(a) == 5
    assert {m.code for m in a} <= {m.code for m in all_of_them}
    assert mutants("def broken(:") == []


def test_templates_slots_and_skeletons() -> None:
    found = template("f(3, [1, 2], {'a': -1.5}, key='x')")
    assert found is not None
    assert found.values == (3, [1, 2], {"a": -1.5}, "x")
    assert found.fill({0: 7, 3: "y"}) == "f(7, [1, 2], {'a': -1.5}, key='y')"
    assert found.skeleton() == "f(<int>, <list[int]>, <dict[str:float]>, key=<str>)"
    method = template("Account(5).deposit(10)")
    assert method is not None and method.values == (5, 10)
    assert template("f(x)") is None  # no literal argument to vary
    families = templates(
        [("t1", "f(1, 'a')"), ("t2", "print(f(2, 'b'))"), ("t3", "g([1])")], "def f(a, b): pass\ndef g(x): pass"
    )
    assert [(f.skeleton, f.seen) for f in families] == [
        ("f(<int>, <str>)", [[1, 2], ["a", "b"]]),
        ("g(<list[int]>)", [[[1]]]),
    ]


def test_new_inputs_stay_in_the_tests_domain_and_hit_the_references_boundaries() -> None:
    families = templates([(f"t{i}", c) for i, c in enumerate(TIERED_TESTS)], TIERED)
    domain = domain_of(families, TIERED)
    assert domain.boundaries == [5, 20, 50] and not domain.negative and not domain.zero
    made = mutated_calls(families, domain, random.Random(0), 300)
    calls = [c.call for c in made]
    assert {
        "shipping_cost(20, False)",
        "shipping_cost(5, False)",
        "shipping_cost(4, False)",
        "shipping_cost(50, True)",
    } <= set(calls)
    for call in calls:
        found = template(call)
        assert found is not None and found.skeleton() == "shipping_cost(<int>, <bool>)"
        assert found.values[0] > 0  # the tests never pass a weight <= 0, so neither does the augmenter
        assert call not in TIERED_TESTS
    assert made == mutated_calls(families, domain, random.Random(0), 300)  # seeded: the same calls
    fresh = random_calls(families, domain, random.Random(1), 50)
    assert len(fresh) == 50 and all(template(c).values[0] > 0 for c in fresh)  # type: ignore[union-attr]


def test_model_proposals_keep_only_calls_in_the_tests_shape_and_domain() -> None:
    families = templates([(f"t{i}", c) for i, c in enumerate(TIERED_TESTS)], TIERED)
    reply = "shipping_cost(20, True)\n1. shipping_cost(5, False)\nshipping_cost('heavy', True)\nshipping_cost(-4, True)\n`shipping_cost(50, False)`\nother(1)"
    assert kept_proposals(reply, families, TIERED) == ["shipping_cost(20, True)", "shipping_cost(50, False)"]


def test_instrumented_reference_computes_the_same_values() -> None:
    source = (
        "from __future__ import annotations\n"
        + TIERED
        + "\nclass C:\n    def m(self, x):\n        return 1 if x == 2 else 3 <= x < 9\n"
    )
    probed = instrument(source)
    assert probed.count("__colbench_cmp__") == 4  # three in TIERED, one in C.m; the chained one stays as it is
    original: dict[str, object] = {}
    exec(source, original)
    assert "__colbench_cmp__" not in original
    operators = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq}
    spy: dict[str, object] = {"__colbench_cmp__": lambda i, a, b, op: operators[op](a, b)}
    exec(probed, spy)
    for weight in range(0, 60):
        for express in (True, False):
            assert spy["shipping_cost"](weight, express) == original["shipping_cost"](weight, express)  # type: ignore[operator]
    assert [spy["C"]().m(x) for x in range(12)] == [original["C"]().m(x) for x in range(12)]  # type: ignore[operator]


def test_batched_calls_in_the_sandbox(scorer: BackendScorer) -> None:
    source = "import time\nSEEN = []\ndef f(n):\n    SEEN.append(n)\n    return len(SEEN), n * 2\ndef loop():\n    while True:\n        pass\ndef deep(k):\n    return deep(k + 1)\ndef big():\n    return list(range(100000))\ndef obj():\n    return object()\ndef nap():\n    time.sleep(30)\n"
    # A value the scorer holds equal to nothing (a function, a bare object) is "opaque", one it carries otherwise
    # "other"; a class whose metaclass claims equality with every type is not taken for a function.
    source += "import datetime\ndef when():\n    return datetime.date(2020, 1, 1)\ndef fn():\n    return [len]\n"
    source += "class Meta(type):\n    __eq__ = lambda cls, other: True\n    __hash__ = type.__hash__\n"
    source += "class Spoof(metaclass=Meta):\n    pass\n"
    calls = ["f(1)", "f(2)", "f('a')", "1 / 0", "loop()", "deep(0)", "big()", "obj()", "undefined()"]
    calls += ["when()", "fn()", "Spoof()", "f"]
    got = run_calls(scorer.sandbox, source, calls, budget=Budget(max_ops=20_000))
    assert [o.kind for o in got] == [
        "value",
        "value",
        "value",
        "raised",
        "budget",
        "budget",
        "budget",
        "opaque",
        "raised",
        "other",
        "opaque",
        "other",
        "opaque",
    ]
    assert (got[7].detail, got[10].detail, got[11].detail) == ("object", "builtin_function_or_method", "Spoof")
    assert got[0].value == (1, 2) and got[1].value == (1, 4)  # each call in a fresh module: no state carried over
    assert got[2].value == (1, "aa") and got[0].ops > 0
    assert got[3].detail == "ZeroDivisionError" and got[4].detail == "ops" and got[5].detail == "depth"
    assert got[6].detail == "size"
    # A call the budgets cannot stop (C code, sleeping) runs into the batch's wall-clock backstop: that batch is run
    # again one call per process, so only the call itself is lost.
    got = run_calls(scorer.sandbox, source, ["f(1)", "nap()", "f(3)"], budget=Budget(backstop_s=1.0))
    assert [o.kind for o in got] == ["value", "lost", "value"] and got[2].value == (1, 6)
    covered = run_calls(scorer.sandbox, instrument(TIERED), ["shipping_cost(20, True)"], cover=True)[0].covered
    assert {"C1:eq", "C2:gt", "C3:lt"} <= covered and any(item.startswith("L") for item in covered)


def test_augmentation_kills_what_the_tasks_tests_miss_and_is_deterministic(scorer: BackendScorer) -> None:
    task = tiered_task()
    first, again = augment_task(task, scorer), augment_task(task, scorer)
    assert first.plus.cases == again.plus.cases and first.plus.augmenter
    assert 0 < len(first.plus.cases) <= MAX_TESTS - len(task.test_cases)
    calls = [c for _, c in first.plus.cases]
    assert all(c.startswith("shipping_cost(") for c in calls) and not set(calls) & set(TIERED_TESTS)
    assert {name for name, _ in first.plus.cases}.isdisjoint({name for name, _ in task.test_cases})
    # Near-miss answers that the task's own tests pass: every one fails a plus test.
    near_misses = [
        TIERED.replace("weight > 20", "weight >= 20"),
        TIERED.replace("weight >= 5", "weight > 5"),
        TIERED.replace("weight < 50", "weight <= 50"),
        TIERED.replace("weight < 50", "weight < 40"),
    ]
    original = scorer.score_many([(task, m) for m in near_misses])
    assert all(s.success for s in original)
    plus_only = make_task(TIERED, calls, task_id="tiered-plus")
    assert scorer.score(plus_only, TIERED).success
    assert not any(s.success for s in scorer.score_many([(plus_only, m) for m in near_misses]))
    # The fit half and the held-out half split the mutants by a hash of their code.
    fit = [m for m in first.mutants if is_fit(task, m)]
    assert 0 < len(fit) < len(first.mutants) and frozenset(m.index for m in fit) == first.fit


def test_tasks_whose_reference_cannot_anchor_tests_get_no_plus_tests(scorer: BackendScorer) -> None:
    # the clock in nanoseconds never repeats between runs (modulo a small number it did, by chance, in CI)
    flaky = make_task(
        "import time\ndef f(x):\n    return time.perf_counter_ns() + x\n", ["f(1)", "f(2)"], task_id="flaky"
    )
    broken = make_task("def f(x):\n    return x / 0\n", ["f(1)", "f(2)"], task_id="broken")
    for task, why in ((flaky, "nondeterministic on its own test"), (broken, "passes none of its own tests")):
        made = augment_task(task, scorer)
        assert made.plus.cases == () and why in made.plus.note
        audit = audit_task(task, scorer)
        assert audit.mutants == 0 and why in audit.problem


def test_audit_reports_survivors_with_their_edits_and_witnesses(scorer: BackendScorer) -> None:
    audit = audit_task(tiered_task(), scorer)
    assert audit.mutants == len(mutants(TIERED)) and audit.killed + len(audit.survivors) == audit.mutants
    edits = {s.mutant.edit: s for s in audit.survivors}
    assert "line 3: weight > 20 -> weight >= 20" in edits  # the tests never weigh 20
    assert edits["line 3: weight > 20 -> weight >= 20"].witness  # ...and the independent inputs show it is wrong
    row = audit.row()
    assert row["mutation_score"] == audit.score and row["surviving"] == len(audit.survivors)
    dead = make_task("def f(x):\n    if x > 100:\n        return 1\n    return 1\n", ["f(1)", "f(200)"], task_id="dead")
    dead_audit = audit_task(dead, scorer)
    assert dead_audit.possibly_equivalent >= 1  # `x > 100` -> `x >= 100` changes nothing: no input tells
    summary = summarize([audit, dead_audit, audit_task(make_task("def f(x):\n    return x / 0\n", ["f(1)"]), scorer)])
    assert summary.tasks == 3 and summary.audited == 2 and summary.tasks_with_wrong_survivor >= 1
    assert "mutation score" in summary.line()


def test_a_gate_threshold_probes_only_as_far_as_its_question_needs(scorer: BackendScorer) -> None:
    """A gate's audit settles where the kills alone reach the threshold (no probes), where a few wrong survivors put
    it out of reach, and where a few possibly equivalent ones reach it; each answer is the full audit's. (Two
    unused lines give the reference mutants no input can tell apart.)"""
    padded = TIERED.replace(
        "    if weight > 20:", "    unused = weight * 3 + 1\n    label = 'parcel'\n    if weight > 20:", 1
    )
    task = make_task(padded, TIERED_TESTS, task_id="tiered-padded")
    full = audit_task(task, scorer)
    wrong = {s.mutant.index: s.witness for s in full.survivors if s.witness}
    equivalent = {s.mutant.index for s in full.survivors if s.possibly_equivalent}
    least = full.killed / full.mutants
    assert full.witnessed and full.score is not None and full.most == full.score
    assert len(wrong) >= 2 and len(equivalent) >= 2 and least < full.score < 0.99

    def agrees(gated: TaskAudit, threshold: float) -> None:
        """Its answer is the full audit's, every witness it found is the full audit's, and its bounds hold."""
        assert gated.score is not None and gated.most is not None and full.score is not None
        assert (gated.score >= threshold) == (full.score >= threshold)
        assert gated.score <= full.score <= gated.most
        for s in gated.survivors:
            assert s.witness == wrong.get(s.mutant.index, "") if s.settled else not s.witness

    settled_low = audit_task(task, scorer, threshold=least)  # every survivor wrong still reaches it
    assert not settled_low.witnessed and settled_low.score == least and settled_low.possibly_equivalent == 0
    assert settled_low.row()["witnessed"] is False and not any(s.settled for s in settled_low.survivors)
    agrees(settled_low, least)
    above = audit_task(task, scorer, threshold=0.99)  # one wrong survivor settles it
    assert not above.witnessed and above.row()["unsettled"] > 0 and 1 <= above.wrong < len(wrong)
    agrees(above, 0.99)
    # Just above the kills alone: one possibly equivalent survivor reaches it, the rest need not run every input.
    low = next(t for t in (i / 1000 for i in range(1000)) if t > least and full.killed / (full.mutants - 1) >= t)
    gated = audit_task(task, scorer, threshold=low)
    assert not gated.witnessed and gated.possibly_equivalent < len(equivalent)
    agrees(gated, low)
    # At the full score itself, every possibly equivalent survivor must be found: the score is the full one.
    exact = audit_task(task, scorer, threshold=full.score)
    assert exact.score == full.score and exact.possibly_equivalent == len(equivalent)
    agrees(exact, full.score)


def test_many_sources_in_one_request_give_what_each_alone_gives(scorer: BackendScorer) -> None:
    sources = [TIERED, TIERED.replace("weight > 20", "weight >= 20"), "def shipping_cost(w, e):\n    return 1 / 0\n"]
    calls = [f"shipping_cost({w}, {e})" for w in (0, 5, 20, 21, 49, 50) for e in (True, False)] * 5
    together = run_sources(scorer.sandbox, [(s, calls) for s in sources])
    assert together == [run_calls(scorer.sandbox, s, calls) for s in sources]
    assert {o.kind for o in together[2]} == {"raised"} and together[0] != together[1]
    assert run_sources(scorer.sandbox, []) == [] and run_sources(scorer.sandbox, [(TIERED, [])]) == [[]]


def test_the_audits_kills_given_to_the_augmenter_change_nothing(scorer: BackendScorer) -> None:
    task = tiered_task()
    audit = audit_task(task, scorer)
    assert augment_task(task, scorer, killed=audit.killed_indices).plus == augment_task(task, scorer).plus


@pytest.mark.slow
def test_plus_tests_on_real_sample_tasks(scorer: BackendScorer, shared_backend_sample: list[Task]) -> None:
    for task in shared_backend_sample[:3]:
        made = augment_task(task, scorer)
        plus_only = make_task(task.ground_truth, [c for _, c in made.plus.cases] or ["None"], task_id=task.task_id)
        assert not made.plus.cases or scorer.score(plus_only, task.ground_truth).success


def test_tasks_augment_and_audit_commands(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    source = tmp_path / "tasks.jsonl"
    rows = [t.to_row() for t in bundled_tasks[:2]]
    for row in rows:
        del row["task_id"]  # ids from content: the augmented file must keep them
    rows.append(
        {"problem_description": "x", "ground_truth": "def f(a):\n    return 1 / 0\n", "test_cases": {"t": "f(1)"}}
    )
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, report = tmp_path / "plus.jsonl", tmp_path / "audit.jsonl"
    run = [sys.executable, "-m", "colbench", "tasks"]

    def tasks_command(action: str, source: Path, out: Path) -> subprocess.CompletedProcess[str]:
        argv = [*run, action, str(source), "--out", str(out), "--jobs", "2", "--sandbox", "bwrap"]
        return subprocess.run(argv, capture_output=True, text=True, check=True)

    done = tasks_command("augment", source, out)
    assert f"augmenter {AUGMENTER_VERSION}:" in done.stdout
    assert "no plus tests: the reference passes none of its own tests" in done.stderr
    before, after = load_jsonl(source), load_jsonl(out)
    assert [t.task_id for t in before] == [t.task_id for t in after]
    assert [t.test_cases for t in before] == [t.test_cases for t in after]
    assert all(t.plus is not None and t.plus.augmenter == AUGMENTER_VERSION for t in after)
    assert after[0].plus is not None and after[0].plus.cases and after[2].plus is not None and not after[2].plus.cases
    done = tasks_command("audit", out, report)
    assert done.stdout.startswith("ColBench-Backend-v1: 2/3 tasks audited") and "mutation score" in done.stdout
    audited = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["task_id"] for r in audited] == [t.task_id for t in before]
    assert audited[0]["mutants"] == audited[0]["killed"] + audited[0]["surviving"] > 0 and audited[2]["problem"]
    strict = subprocess.run(
        [
            *run,
            "audit",
            str(out),
            "--env",
            "ColBench-Backend-v2",
            "--jobs",
            "2",
            "--sandbox",
            "bwrap",
            "--out",
            str(report),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert strict.stdout.startswith("ColBench-Backend-v2: 2/3 tasks audited")
    with_plus = [json.loads(line) for line in report.read_text().splitlines()]
    assert with_plus[0]["tests"] == audited[0]["tests"] + len(after[0].plus.cases)
    assert with_plus[0]["killed"] >= audited[0]["killed"]  # what v1's tests kill, v2's do too
    frontend = subprocess.run([*run, "audit", "frontend-sample"], capture_output=True, text=True)
    assert (
        frontend.returncode != 0
        and "is a frontend task: audit and augment take tasks judged by test calls (backend)" in frontend.stderr
    )
    assert len(frontend.stderr.strip().splitlines()) == 1


def test_plus_tests_computed_once_per_task_content_and_kept_on_disk(scorer: BackendScorer, tmp_path: Path) -> None:
    task = tiered_task()
    cache = PlusCache(tmp_path)
    assert cache.lookup(task) is None
    made = cache.plus_tests(task, scorer)
    assert made.cases and made.augmenter == AUGMENTER_VERSION
    assert len(list(tmp_path.glob("*.json"))) == 1
    renamed = make_task(TIERED, TIERED_TESTS, task_id="the same task in another file")
    assert PlusCache(tmp_path).lookup(renamed) == made  # found on disk, by content
    carried = replace(task, plus=PlusTests((("p", "shipping_cost(1, True)"),), "0"))
    assert cache.lookup(carried) == carried.plus  # a task's own plus tests win
    other = make_task(TIERED, TIERED_TESTS[:3], task_id="other")
    assert cache.lookup(other) is None
    assert cache.plus_tests(other, scorer).cases and cache.lookup(other) == cache.plus_tests(other, scorer)


def test_model_proposals_from_an_openai_compatible_endpoint(scorer: BackendScorer, make_stub: Any) -> None:
    server = make_stub(lambda body: "shipping_cost(20, True)\nshipping_cost(-3, False)\nnonsense(")
    client = connect("openai:stub-model", "generator", base_url=server.base_url, api_key="k", temperature=0.0)
    task = tiered_task()
    families = templates(task.test_cases, TIERED)
    assert ModelProposer(client)(task, families) == ["shipping_cost(20, True)"]
    prompt = server.requests[0]["messages"][0]["content"]
    assert task.problem_description.strip() in prompt and "shipping_cost(30, False)" in prompt
    assert augment_task(task, scorer, proposer=ModelProposer(client)).plus.cases


def test_v2_computes_the_plus_tests_of_a_split_without_them_on_first_use(
    tmp_path: Path, shared_backend_sample: list[Task]
) -> None:
    """The hub-split path (`backend-test` carries no plus tests), on two tasks of the real sample in ../shared:
    `score --env ColBench-Backend-v2` augments each task once, keeps the tests under COLBENCH_HOME, and a second
    run finds them there."""
    tasks, answers = tmp_path / "tasks.jsonl", tmp_path / "answers.jsonl"
    chosen = shared_backend_sample[3:5]
    tasks.write_text("".join(json.dumps(t.to_row()) + "\n" for t in chosen))
    answers.write_text("".join(json.dumps({"task_id": t.task_id, "answer": t.ground_truth}) + "\n" for t in chosen))
    env = {**os.environ, "COLBENCH_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "colbench", "score", "backend", "--tasks", str(tasks), "--answers", str(answers)]
    for run in ("first", "second"):
        out = tmp_path / f"{run}.jsonl"
        done = subprocess.run([*argv, "--out", str(out), "--sandbox", "bwrap"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["env_id"] for r in rows] == ["ColBench-Backend-v2"] * 2 and all(r["success"] for r in rows)
        assert all(r["tests_total"] > 10 for r in rows)  # the task's 10 tests and its plus tests
    kept = sorted((tmp_path / "home" / "plus" / AUGMENTER_VERSION).glob("*.json"))
    assert len(kept) == 2
    assert all(PlusCache(kept[0].parent).lookup(t) for t in chosen)
