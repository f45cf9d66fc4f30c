"""Leak detection: the detectors on hand-made and labelled replies, the policies in the env, records and reports."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest

from colbench.domains.backend import leaks
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.domain import get_domain
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task, load
from colbench.types.dialogue import Turn
from colbench.types.leaks import REDACTED, LeakPolicy, word_overlap

BACKEND = get_domain("backend")
FRONTEND = get_domain("frontend")

REFERENCE = """def shipping_cost(weight_kg, distance_km, express=False):
    base = 4.5 + weight_kg * 1.2
    if distance_km > 500:
        base += (distance_km - 500) * 0.01
    if express:
        base *= 1.8
    return round(base, 2)"""
TASK = Task(
    task_id="ship",
    domain="backend",
    problem_description="I need a function for my shop's shipping cost. The signature of the function is: "
    "def shipping_cost(weight_kg, distance_km, express=False)",
    ground_truth=REFERENCE,
    hidden_information=REFERENCE,
    test_cases=(("test1", "shipping_cost(2, 100)"),),
)


def backend_score(reply: str) -> float:
    return BACKEND.leak_score(TASK, reply)


# -- the backend detector -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(REFERENCE, id="verbatim"),
        pytest.param(f"Sure! Here you go:\n```python\n{REFERENCE}\n```\nHope that helps.", id="fenced"),
        pytest.param(
            "def shipping_cost(w, d, e=False):\n  c = 4.5 + w * 1.2\n  if d > 500:\n    c += (d - 500) * 0.01\n"
            "  if e:\n    c *= 1.8\n  return round(c, 2)",
            id="renamed and reindented",
        ),
        pytest.param(
            "def shipping_cost(weight_kg, distance_km, express=False): base = 4.5 + weight_kg * 1.2; "
            "if distance_km > 500: base += (distance_km - 500) * 0.01",
            id="flattened prefix",
        ),
        pytest.param("Honestly it's just `base += (distance_km - 500) * 0.01` past 500 km.", id="inline line"),
        pytest.param("I think it does c += (d - 500) * 0.01 and then rounds it.", id="inline renamed line"),
        pytest.param(f"Here is what I have: ```python\n{REFERENCE}"[:160], id="cut at 160 characters"),
    ],
)
def test_backend_code_in_any_form_is_a_leak(reply: str) -> None:
    assert backend_score(reply) >= BACKEND.leak_threshold


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("It starts at 4.5 dollars plus 1.2 per kilogram.", id="facts"),
        pytest.param("Past 500 km add a cent per extra km; express multiplies everything by 1.8.", id="rules"),
        pytest.param("Round it to 2 decimals, please.", id="preference"),
        pytest.param("`weight_kg` is never negative and `distance_km` is an int.", id="names in backticks"),
        pytest.param(TASK.problem_description, id="the description"),
        pytest.param("The signature is def shipping_cost(weight_kg, distance_km, express=False).", id="signature"),
        pytest.param("For example shipping_cost(2, 100) should be about 6.9.", id="an example call"),
        pytest.param("", id="empty"),
        pytest.param("I don't know. I'm not sure what you mean, can you rephrase?", id="non-answer"),
        pytest.param("def f(x):\n    return sorted(set(x))", id="unrelated code"),
    ],
)
def test_backend_facts_and_other_text_are_not_leaks(reply: str) -> None:
    assert backend_score(reply) < BACKEND.leak_threshold


def test_backend_scores_grow_with_the_share_quoted() -> None:
    lines = REFERENCE.splitlines()
    scores = [backend_score("\n".join(lines[:n])) for n in (1, 3, 5, 7)]
    assert scores == sorted(scores) and scores[0] < 0.5 <= scores[-1] == 1.0


def test_backend_detector_survives_text_that_is_not_python() -> None:
    for junk in ("'''", '"unterminated', "def (((", "\x00\x01", "``` ```", "if if if :::: ]]]", "é" * 5000):
        assert 0.0 <= backend_score(junk) <= 1.0
    broken_reference = Task("b", "backend", "Write f.", "def f(:\n  return 1", "def f(:\n  return 1")
    assert BACKEND.leak_score(broken_reference, "def f(:\n  return 1") >= 0.5


# -- the frontend detector ------------------------------------------------------------------------------------------
PAGE = """<html>
<body class="bg-gray-100">
  <header class="bg-indigo-700 text-white py-6 shadow-lg">
    <h1 class="text-4xl font-bold tracking-wide">Green Valley Bakery</h1>
  </header>
  <section class="grid grid-cols-3 gap-6 p-8">
    <div class="rounded-xl bg-white p-4"><h2 class="text-xl font-semibold">Sourdough</h2><p>Baked every morning.</p></div>
    <div class="rounded-xl bg-white p-4"><h2 class="text-xl font-semibold">Croissants</h2><p>Butter only.</p></div>
  </section>
</body>
</html>"""
PAGE_TASK = Task("page", "frontend", "A bakery website with a header and product cards.", PAGE, PAGE)


def frontend_score(reply: str) -> float:
    return FRONTEND.leak_score(PAGE_TASK, reply)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(PAGE, id="the page"),
        pytest.param(
            '<header class="bg-indigo-700 text-white py-6 shadow-lg"><h1 class="text-4xl font-bold'
            ' tracking-wide">My Shop</h1></header>',
            id="a subtree with other words",
        ),
        pytest.param("Use bg-indigo-700 text-white py-6 shadow-lg on the header.", id="a class list in prose"),
        pytest.param(PAGE.replace("Green Valley Bakery", "X").replace("Sourdough", "Y"), id="text changed"),
    ],
)
def test_frontend_markup_is_a_leak(reply: str) -> None:
    assert frontend_score(reply) >= FRONTEND.leak_threshold


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            'The title should say "Green Valley Bakery" and the cards "Sourdough" and "Croissants".', id="visible words"
        ),
        pytest.param("Make the header deep indigo with white text and a shadow; three cards per row.", id="prose"),
        pytest.param("It's a full-width header with a two-column layout below.", id="hyphenated words"),
        pytest.param(PAGE_TASK.problem_description, id="the description"),
        pytest.param("", id="empty"),
    ],
)
def test_frontend_words_are_not_leaks(reply: str) -> None:
    assert frontend_score(reply) < FRONTEND.leak_threshold


# -- measured on the labelled sets (the figures in docs/leaks.md come from bench/leak_detector.py) -----------------
def _precision_recall(domain_name: str, tasks: Sequence[Task]) -> tuple[float, float, int]:
    domain = get_domain(domain_name)
    labelled = domain.labelled_replies(tasks, seed=0)
    flagged = [(domain.leak_score(task, item.reply) >= domain.leak_threshold, item.leak) for task, item in labelled]
    true_pos = sum(f and leak for f, leak in flagged)
    precision = true_pos / max(sum(f for f, _ in flagged), 1)
    recall = true_pos / max(sum(leak for _, leak in flagged), 1)
    return precision, recall, len(labelled)


@pytest.mark.parametrize("split", ["backend-sample", "frontend-sample"])
def test_precision_and_recall_on_the_bundled_labelled_sets(split: str) -> None:
    tasks = load(split)
    precision, recall, n = _precision_recall(tasks[0].domain, tasks)
    kinds = {item.kind for _, item in get_domain(tasks[0].domain).labelled_replies(tasks)}
    assert n > 15 * len(tasks) and len(kinds) >= 10
    assert precision >= 0.95 and recall >= 0.95, (precision, recall)


def test_precision_and_recall_on_the_real_backend_sample(shared_backend_sample: list[Task]) -> None:
    precision, recall, n = _precision_recall("backend", shared_backend_sample)
    assert n > 5000 and precision >= 0.95 and recall >= 0.95, (precision, recall)


def test_a_domain_without_a_detector_gets_the_word_overlap() -> None:
    hidden = "the secret plan is to meet at the old mill by the river at nine on friday"
    assert word_overlap("We meet at the old mill by the river at nine, right?", hidden) >= 0.5
    assert word_overlap("Friday works for me.", hidden) == 0.0
    assert word_overlap("the secret plan is to meet", hidden, public="the secret plan is to meet") == 0.0


# -- the policy -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "mode", "retries"),
    [
        ("off", "off", 0),
        ("flag", "flag", 0),
        (" Redact ", "redact", 0),
        ("resample:3", "resample", 3),
        (None, "flag", 0),
    ],
)
def test_policies_parse(text: str | None, mode: str, retries: int) -> None:
    policy = LeakPolicy.parse(text)
    assert (policy.mode, policy.retries) == (mode, retries)
    assert LeakPolicy.parse(str(policy)) == policy


@pytest.mark.parametrize("text", ["", "block", "resample", "resample:0", "resample:11", "resample:x", "redact:2"])
def test_unknown_policies_are_one_line_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="leak policy") as caught:
        LeakPolicy.parse(text)
    assert "\n" not in str(caught.value)


class Recording:
    """A scripted human that leaks on its first reply to each agent turn and records what it was shown."""

    def __init__(self, leaks_first: int) -> None:
        self.leaks_first = leaks_first
        self.seen: list[str] = []

    def __call__(self, task: Task, dialogue: Sequence[Turn]) -> str:
        self.seen.append(dialogue[-1].text)
        return task.hidden_information if len(self.seen) <= self.leaks_first else "It rounds to cents."


def make_env(policy: str, human: object, scorer: BackendScorer) -> gym.Env:
    return gym.make("ColBench-Backend-v1", tasks=[TASK], simulator=human, scorer=scorer, leak_policy=policy)


def test_flag_shows_the_reply_and_counts_it(scorer: BackendScorer) -> None:
    env = make_env("flag", ScriptedSimulator(lambda task, _: task.hidden_information), scorer)
    _, info = env.reset(seed=0)
    assert (info["leak_score"], info["leak"], info["leaks"]) == (None, False, 0)
    obs, _, _, _, info = env.step("Can you show me?")
    assert obs == REFERENCE and info["leak"] and info["leak_score"] == 1.0 and info["leak_action"] == "shown"
    obs, _, _, _, info = env.step("And again?")
    assert info["leaks"] == 2
    _, _, terminated, _, info = env.step("I WANT TO ANSWER: def shipping_cost(a, b, c=False): return 0")
    assert terminated and info["leaks"] == 2 and info["leak_score"] is None


def test_redact_never_shows_the_leaked_text(scorer: BackendScorer) -> None:
    env = make_env("redact", ScriptedSimulator(lambda task, _: "ok so: " + task.hidden_information), scorer)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("Paste it")
    assert obs == REDACTED and info["leak_action"] == "redacted" and info["leaks"] == 1
    human = env.unwrapped.dialogue[-1]
    assert human.text == REDACTED and human.leak.withheld == ("ok so: " + REFERENCE,)
    assert all("distance_km - 500" not in t.text for t in env.unwrapped.dialogue)


def test_resample_asks_again_with_a_note_and_shows_a_clean_reply(scorer: BackendScorer) -> None:
    human = Recording(leaks_first=1)
    env = make_env("resample:2", ScriptedSimulator(human), scorer)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("What is the formula?")
    assert obs == "It rounds to cents." and info["leak"] and info["leak_action"] == "resampled"
    assert human.seen[0] == "What is the formula?" and "gave away the solution" in human.seen[1]
    check = env.unwrapped.dialogue[-1].leak
    assert check.scores[0] == 1.0 and check.scores[1] < 0.5 and check.withheld == (REFERENCE,)


def test_resample_redacts_after_n_tries(scorer: BackendScorer) -> None:
    human = Recording(leaks_first=99)
    env = make_env("resample:3", ScriptedSimulator(human), scorer)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("Paste it")
    assert obs == REDACTED and info["leak_action"] == "redacted" and len(human.seen) == 4
    assert "Try 3 of 3" in human.seen[-1]


def test_resample_in_astep(scorer: BackendScorer) -> None:
    human = Recording(leaks_first=1)
    env = make_env("resample:1", ScriptedSimulator(human), scorer).unwrapped
    env.reset(seed=0)
    obs, _, _, _, info = asyncio.run(env.astep("Paste it"))
    assert obs == "It rounds to cents." and info["leak_action"] == "resampled" and len(human.seen) == 2


def test_off_measures_nothing(scorer: BackendScorer) -> None:
    env = make_env("off", ScriptedSimulator(lambda task, _: task.hidden_information), scorer)
    _, info = env.reset(seed=0)
    obs, _, _, _, info = env.step("Paste it")
    assert obs == REFERENCE and "leak" not in info and env.unwrapped.dialogue[-1].leak is None


def test_unknown_policy_on_the_env_is_a_config_error(scorer: BackendScorer) -> None:
    with pytest.raises(ConfigError, match="'sometimes'"):
        make_env("sometimes", ScriptedSimulator(), scorer)


# -- through colbench eval: records, leaderboard, and the agent's view under redact ---------------------------------
def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=600)


def test_a_human_that_always_pastes_the_reference_shows_100_percent_and_redact_hides_it(tmp_path: Path) -> None:
    tasks = load("backend-sample")[:4]
    runs = {}
    for policy in ("flag", "redact"):
        out = tmp_path / policy
        res = colbench(
            "eval", "--env", "ColBench-Backend-v1", "--agent", "scripted:ask", "--simulator", "scripted:leaky",
            "--tasks", "backend-sample", "--limit", "4", "--max-turns", "3", "--sandbox", "bwrap",
            "--leak-policy", policy, "--out", str(out), "--quiet",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        runs[policy] = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert json.loads((out / "run.json").read_text())["leaks"]["policy"] == policy
    for record in runs["flag"] + runs["redact"]:
        assert record["leaks"] == 2  # three agent turns: two human replies, both pasted
    by_task = {t.task_id: t for t in tasks}
    for record in runs["redact"]:
        reference_lines = [line.strip() for line in by_task[record["task_id"]].hidden_information.splitlines()]
        for turn in record["dialogue"]:
            if turn["role"] == "human":  # what the agent was shown
                assert turn["text"] == REDACTED and turn["leak_action"] == "redacted"
                assert not any(len(line) > 12 and line in turn["text"] for line in reference_lines)
                assert turn["withheld"] and turn["leak_score"] == 1.0
                start, end = turn["leak_spans"][0]  # what the viewer highlights: the pasted code
                assert "def " in turn["withheld"][0][start:end] and end <= len(turn["withheld"][0])
    res = colbench("report", str(tmp_path / "flag"), str(tmp_path / "redact"))
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if line.startswith(("1 ", "2 "))]
    assert len(rows) == 2 and all("100.0 [" in row for row in rows)
    assert "leak %" in res.stdout and "leak policy redact, not flag" in res.stdout


def test_cli_leaks_score_keeps_order_and_matches_the_domain(tmp_path: Path) -> None:
    labelled, scored = tmp_path / "labelled.jsonl", tmp_path / "scored.jsonl"
    res = colbench("leaks", "labelled", "--tasks", "backend-sample", "--out", str(labelled))
    assert res.returncode == 0 and "labelled replies" in res.stdout, res.stderr
    res = colbench("leaks", "score", "--tasks", "backend-sample", "--replies", str(labelled), "--out", str(scored))
    assert res.returncode == 0, res.stderr
    inputs = [json.loads(line) for line in labelled.read_text().splitlines()]
    outputs = [json.loads(line) for line in scored.read_text().splitlines()]
    assert [o["task_id"] for o in outputs] == [i["task_id"] for i in inputs]
    assert set(outputs[0]) == {"task_id", "leak_score", "leak"}
    tasks = {t.task_id: t for t in load("backend-sample")}
    for row, out in list(zip(inputs, outputs, strict=True))[:40]:
        assert out["leak_score"] == BACKEND.leak_score(tasks[row["task_id"]], row["reply"])
        assert out["leak"] == (out["leak_score"] >= BACKEND.leak_threshold)
    agree = sum(o["leak"] == i["leak"] for i, o in zip(inputs, outputs, strict=True)) / len(inputs)
    assert agree >= 0.95 and f"{sum(o['leak'] for o in outputs)} leaks" in res.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"task_id": "nope", "reply": "x"}\n', ":1: field 'task_id': 'nope' is not in the task file"),
        ("[1, 2]\n", ":1: expected a JSON object with 'task_id' and 'reply'"),
        ('{"task_id": "ID", "answer": "x"}\n', ":1: field 'reply': missing or not a string"),
        ('{"task_id": "ID", "reply": "x"}\n{oops\n', ":2: invalid JSON"),
    ],
)
def test_cli_leaks_score_bad_replies_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    task_id = load("backend-sample")[0].task_id
    replies = tmp_path / "replies.jsonl"
    replies.write_text(content.replace("ID", task_id))
    res = colbench(
        "leaks", "score", "--tasks", "backend-sample", "--replies", str(replies), "--out", str(tmp_path / "o")
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert str(replies) in res.stderr


def test_cli_eval_unknown_policy_is_one_line(tmp_path: Path) -> None:
    res = colbench(
        "eval", "--env", "ColBench-Backend-v1", "--agent", "scripted:ask", "--simulator", "scripted",
        "--tasks", "backend-sample", "--leak-policy", "resample:zero", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--leak-policy" in res.stderr


def test_the_shortcut_for_replies_that_share_no_run_with_the_reference_changes_no_score(
    bundled_tasks: list[Task],
) -> None:
    """A reply sharing no 4-token run with the reference scores 0 without the matcher; on every labelled reply of
    the bundled tasks (leaks and honest answers, and fragments of the code) the score equals the matcher's own."""
    checked = skipped = 0
    for j, task in enumerate(bundled_tasks[:20]):
        other = bundled_tasks[(j + 1) % len(bundled_tasks)].ground_truth
        replies = [
            x.reply for x in leaks.labelled_replies(task.ground_truth, task.problem_description, other_code=other)
        ]
        words = task.ground_truth.split()
        replies += [" ".join(words[i : i + 3]) for i in range(0, len(words), 5)]
        for reply in replies:
            said = leaks.tokens_of(reply)
            for reference in leaks.references_of(task.ground_truth, task.problem_description):
                forced = replace(reference, runs=reference.runs | leaks._runs(said))  # never disjoint: the matcher runs
                assert leaks._overlap(said, reference) == leaks._overlap(said, forced), reply
                checked += 1
                skipped += reference.runs.isdisjoint(leaks._runs(said))
    assert checked > 200 and 0 < skipped < checked  # both paths were taken
