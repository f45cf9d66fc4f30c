"""``colbench tasks generate`` end to end: a stub generator (tests/openai_stub.py behind the real openai client)
replies with a fixed mix of candidates; the real bwrap sandbox gates them; each bad one is rejected by its gate, the
good one is kept and loads in the backend env, and an interrupted run resumes without asking again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from local_model import needs_model
from openai_stub import StubOpenAIServer
from paths import SHARED_DATA

from colbench.cli.main import main
from colbench.domains.backend.generate.candidates import Malformed, parse_reply, read_seeds
from colbench.domains.backend.generate.gates import GATES
from colbench.errors import DataError
from colbench.tasks.rows import load_jsonl
from colbench.types.task import Task

GOOD_CODE = """def shipping_cost(weight, express):
    if weight <= 0:
        return 0
    cost = 5 + 2 * weight
    if weight > 20:
        cost = cost + 10
    if express:
        cost = cost * 1.5
    return round(cost, 2)
"""
GOOD_TESTS = {
    "test1": "shipping_cost(0, False) == 0",
    "test2": "shipping_cost(1, False) == 7",
    "test3": "shipping_cost(3, True) == 16.5",
    "test4": "shipping_cost(-2, True) == 0",
    "test5": "shipping_cost(20, False) == 45",
    "test6": "shipping_cost(21, False) == 57",
    "test7": "shipping_cost(25, True) == 97.5",
    "test8": "shipping_cost(2.5, False) == 10.0",
}


def _reply(description: str, code: str, tests: dict[str, str], hidden: str = "the rates") -> str:
    row = {"problem_description": description, "hidden_information": hidden, "ground_truth": code, "test_cases": tests}
    return f"Here it is:\n```json\n{json.dumps(row)}\n```"


def _mix(copied: Task | None) -> list[tuple[str, str]]:
    """The scripted replies, in candidate order, and the gate each must meet ("" = kept)."""
    mix = [
        ("", _reply("I need a function that tells me what shipping a parcel costs.", GOOD_CODE, GOOD_TESTS)),
        (
            "deterministic",
            _reply(
                "Give me a noisy score.",
                "import os\ndef noisy(x):\n    return x + os.urandom(1)[0] / 256\n",
                {"test1": "noisy(1) == 1.5", "test2": "noisy(2) == 2.5"},
            ),
        ),
        (
            "judgeable",
            _reply(
                "Invert a number.",
                "def inv(x):\n    return 1 / x\n",
                {"test1": "inv(2) == 0.5", "test2": "inv(0) == 0"},
            ),
        ),
        (
            "mutation",  # its tests see only the top and the bottom grade
            _reply(
                "Turn a score into a letter grade.",
                'def grade(score):\n    if score >= 90:\n        return "A"\n    if score >= 80:\n        return "B"\n'
                '    if score >= 70:\n        return "C"\n    return "F"\n',
                {"test1": 'grade(95) == "A"', "test2": 'grade(50) == "F"'},
            ),
        ),
        (
            "degenerate",  # its codes are looked up lower-cased, so it always saves 0.0: an answer of 0 passes
            _reply(
                "How much do my discount codes save me?",
                'def total_discount(prices, code):\n    codes = {"SAVE10": 0.1, "SAVE20": 0.2}\n'
                "    rate = codes.get(code.lower(), 0)\n    return round(sum(p * rate for p in prices), 2)\n",
                {
                    "test1": "total_discount([10, 20], 'SAVE10') == 0.0",
                    "test2": "total_discount([5.5], 'SAVE20') == 0.0",
                    "test3": "total_discount([], 'SAVE10') == 0.0",
                    "test4": "total_discount([100, 1], 'save20') == 0.0",
                    "test5": "total_discount([3, 4, 5], 'NONE') == 0.0",
                },
            ),
        ),
        (
            "leak",
            _reply(
                "Write exactly this for parcel fees:\n" + GOOD_CODE.replace("shipping_cost", "parcel_fee"),
                GOOD_CODE.replace("shipping_cost", "parcel_fee"),
                {k: v.replace("shipping_cost", "parcel_fee") for k, v in GOOD_TESTS.items()},
            ),
        ),
        ("reply", "Sure! {here is a task: shipping costs"),
        ("reply", _reply("A function please.", "I would rather not write code.", {"test1": "f(1) == 1"})),
    ]
    if copied is not None:
        row = (copied.problem_description, copied.ground_truth, dict(copied.test_cases), copied.hidden_information)
        mix.append(("duplicate", _reply(*row)))
    return mix


def _serve(make_stub: Callable[..., StubOpenAIServer], replies: list[str]) -> StubOpenAIServer:
    queue = list(replies)
    return make_stub(lambda request: queue.pop(0) if queue else "no more candidates")


def _generate_argv(tmp_path: Path, generator: str, topics: str, out: str = "gen.jsonl") -> list[str]:
    """``colbench tasks generate`` by ``generator`` into ``tmp_path / out``, seeded with ``topics`` (a topics file)."""
    seeds = tmp_path / "topics.txt"
    seeds.write_text(topics, encoding="utf-8")
    return ["tasks", "generate", "--generator", generator, "--seeds", str(seeds), "--out", str(tmp_path / out)]


def _generate(tmp_path: Path, stub: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    monkeypatch.setenv("COLBENCH_GENERATOR_BASE_URL", stub.base_url)
    monkeypatch.setenv("COLBENCH_GENERATOR_API_KEY", "k")
    argv = _generate_argv(tmp_path, "openai:stub", "shipping\nrandom numbers\n")
    return main([*argv, "--sandbox", "bwrap", "--jobs", "1", *extra])


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


SAMPLE = SHARED_DATA / "backend_test_sample.jsonl"


def _copied() -> Task | None:
    """A real test task (one the gates keep when it is not a copy) that the generator hands back as its own; None
    where the 300-task sample is absent (the copy case is then left out, the rest still runs)."""
    if not SAMPLE.exists():
        return None
    return next(t for t in load_jsonl(SAMPLE) if t.task_id == "b10f3bcd4e11")


def test_each_bad_candidate_is_rejected_by_its_gate_and_the_good_one_loads(
    tmp_path: Path, make_stub: Callable[..., StubOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = _copied()
    mix = _mix(copied)
    stub = _serve(make_stub, [reply for _, reply in mix])
    against = str(SAMPLE) if copied is not None else "none"
    assert _generate(tmp_path, stub, monkeypatch, "--n", str(len(mix)), "--against", against) == 0
    kept, rejects = _rows(tmp_path / "gen.jsonl"), _rows(tmp_path / "gen.jsonl.rejects.jsonl")
    assert [r["provenance"]["index"] for r in kept] == [i for i, (gate, _) in enumerate(mix) if not gate]
    assert {r["index"]: r["gate"] for r in rejects} == {i: gate for i, (gate, _) in enumerate(mix) if gate}
    assert all(r["reason"] for r in rejects)
    if copied is not None:
        duplicate = next(r for r in rejects if r["gate"] == "duplicate")
        assert copied.task_id in duplicate["reason"]
    provenance = kept[0]["provenance"]
    assert provenance["generator"] == "openai:stub"
    assert provenance["gates_passed"] == [
        "deterministic",
        "judgeable",
        "leak",
        "mutation",
        "degenerate",
        "augment",
        "duplicate",
    ]
    assert provenance["mutation_score"] >= 0.7 and isinstance(provenance["mutation_score_is_lower_bound"], bool)
    if copied is not None:
        assert provenance["nearest_test_task"]["score"] < 0.55
    assert kept[0]["plus_test_cases"], "the augmenter's tests are part of a kept task"
    summary = json.loads((tmp_path / "gen.jsonl.summary.json").read_text(encoding="utf-8"))
    assert summary["kept_this_run"] == 1 and sum(summary["rejected_this_run"].values()) == len(mix) - 1
    env = gym.make("ColBench-Backend-v1", tasks=str(tmp_path / "gen.jsonl"))
    try:
        env.reset(seed=0)
        assert env.unwrapped.task.ground_truth == GOOD_CODE
    finally:
        env.close()


def test_a_restart_skips_what_was_decided_and_asks_only_for_the_rest(
    tmp_path: Path, make_stub: Callable[..., StubOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    malformed = "not a task"
    stub = _serve(make_stub, [malformed, malformed])
    assert _generate(tmp_path, stub, monkeypatch, "--n", "2", "--against", "none") == 0
    assert len(stub.requests) == 2
    stub2 = _serve(make_stub, [malformed])
    assert _generate(tmp_path, stub2, monkeypatch, "--n", "3", "--against", "none") == 0
    assert len(stub2.requests) == 1, "the two decided candidates are not asked for again"
    assert [r["index"] for r in _rows(tmp_path / "gen.jsonl.rejects.jsonl")] == [0, 1, 2]


def test_an_unreachable_against_split_is_one_line(
    tmp_path: Path, stub: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _generate(tmp_path, stub, monkeypatch, "--n", "1", "--against", str(tmp_path / "missing.jsonl")) != 0
    err = capsys.readouterr().err.strip()
    assert "--against" in err and "--against none" in err and "\n" not in err
    assert not stub.requests


def test_a_seeds_file_that_does_not_parse_names_file_and_line(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"topic": "sorting"}\n{"topic": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"seeds\.jsonl:2: not JSON"):
        read_seeds(str(seeds))
    py = tmp_path / "seeds.py"
    py.write_text(
        "def area(w, h):\n    return w * h\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n", encoding="utf-8"
    )
    assert [s.topic for s in read_seeds(str(py))] == ["area", "perimeter"]
    py.write_text("def broken(:\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"seeds\.py:1: not Python"):
        read_seeds(str(py))


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('{"problem_description": "x", "ground_truth": 3}', "no reference code"),
        ('{"problem_description": "x", "ground_truth": "def f(): return 1"}', "test_cases"),
        (
            '{"problem_description": "", "ground_truth": "def f(): return 1", "test_cases": {"t": "f() == 1"}}',
            "problem_description",
        ),
    ],
)
def test_a_reply_that_is_no_candidate_says_why(reply: str, why: str) -> None:
    with pytest.raises(Malformed, match=why):
        parse_reply(reply)


@needs_model
def test_the_embedded_model_as_generator_end_to_end(tmp_path: Path) -> None:
    """Three candidates from the embedded model: whatever it writes, each is decided once, kept with its provenance
    or rejected with a gate and a reason (its quality is not asserted)."""
    argv = _generate_argv(tmp_path, "llamacpp", "discounts on a shopping cart\n")
    assert main([*argv, "--n", "3", "--sandbox", "bwrap", "--jobs", "1", "--against", "none"]) == 0
    kept, rejects = _rows(tmp_path / "gen.jsonl"), _rows(tmp_path / "gen.jsonl.rejects.jsonl")
    decided = sorted([r["provenance"]["index"] for r in kept] + [r["index"] for r in rejects])
    assert decided == [0, 1, 2]
    assert all(r["gate"] in GATES and r["reason"] for r in rejects)
    assert all(r["provenance"]["generator"] == "llamacpp" for r in kept)
    summary = json.loads((tmp_path / "gen.jsonl.summary.json").read_text(encoding="utf-8"))
    assert summary["tokens"]["completion"] > 0


def test_a_dry_run_forecasts_tokens_and_cost_without_calling_the_model(
    tmp_path: Path, stub: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLBENCH_GENERATOR_BASE_URL", stub.base_url)
    argv = _generate_argv(tmp_path, "openai:gpt-4o", "sorting\n", out="g.jsonl")
    assert main([*argv, "--n", "10", "--dry-run", "--solver", "openai:gpt-4o-mini", "--solver-tries", "3"]) == 0
    out = capsys.readouterr().out
    assert "5,000 completion tokens" in out and "$" in out and "gpt-4o" in out
    assert "at most 60 calls to openai:gpt-4o-mini" in out
    assert not stub.requests and not (tmp_path / "g.jsonl").exists()


def test_a_domain_without_a_generator_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _generate_argv(tmp_path, "openai:m", "a landing page\n", out="g.jsonl")
    assert main([*argv, "--domain", "frontend"]) != 0
    err = capsys.readouterr().err.strip()
    assert "frontend" in err and "no task generator" in err and "\n" not in err


WRONG_CODE = GOOD_CODE.replace("cost * 1.5", "cost * 2").replace("5 + 2 * weight", "4 + 2 * weight")
SOLVER_ASKS = "Write the Python function that this person asks for."


def test_the_solver_gate_keeps_a_task_only_where_the_hidden_information_is_needed(
    tmp_path: Path, make_stub: Callable[..., StubOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two candidates with the same good reference: the solver rebuilds the first only with the hidden information
    (kept), the second from its request alone too (rejected: the request gives it away)."""
    needed = _reply("I need a function that tells me what shipping a parcel costs.", GOOD_CODE, GOOD_TESTS)
    given = _reply(
        "Shipping cost: 5 plus 2 per kg, 0 for no weight, 10 more above 20 kg, times 1.5 express, to cents.",
        GOOD_CODE,
        GOOD_TESTS,
    )
    candidates = [needed, given]
    seen: list[str] = []

    def respond(request: dict[str, Any]) -> str:
        prompt = request["messages"][-1]["content"]
        if not prompt.startswith(SOLVER_ASKS):
            return candidates.pop(0) if candidates else "no more candidates"
        seen.append(prompt)
        informed = "What they know" in prompt
        code = GOOD_CODE if informed or "times 1.5 express" in prompt else WRONG_CODE
        return f"```python\n{code}```"

    stub = make_stub(respond)
    monkeypatch.setenv("COLBENCH_SOLVER_BASE_URL", stub.base_url)
    monkeypatch.setenv("COLBENCH_SOLVER_API_KEY", "k")
    assert _generate(tmp_path, stub, monkeypatch, "--n", "2", "--against", "none", "--solver", "openai:stub") == 0
    kept, rejects = _rows(tmp_path / "gen.jsonl"), _rows(tmp_path / "gen.jsonl.rejects.jsonl")
    assert [r["provenance"]["index"] for r in kept] == [0]
    solver = kept[0]["provenance"]["solver"]
    assert (solver["request_alone"], solver["informed"], solver["tries"]) == (0, 2, 2)
    assert "solver" in kept[0]["provenance"]["gates_passed"]
    (reject,) = rejects
    assert reject["gate"] == "solver" and "2/2" in reject["reason"] and "not needed" in reject["reason"]
    assert len(seen) == 8  # two views, two tries, two candidates
    assert all("the rates" in p for p in seen if "What they know" in p)  # the hidden information, shown
    assert not any("the rates" in p for p in seen if "What they know" not in p)
    summary = json.loads((tmp_path / "gen.jsonl.summary.json").read_text(encoding="utf-8"))
    assert summary["solver_tokens"]["completion"] > 0
