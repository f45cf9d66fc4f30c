"""The simulated human's false claims in ``colbench report``, the HTML report and ``colbench show``.

The fixture ``tests/data/run_dirs/backend-claims`` (ColBench-Backend-v1, truth policy resample:2, a grounded human)
holds, by hand (the numbers below are worked out from it):

- c1 succeeded: a true claim and an unchecked one, then a reply with no claim: 2 checked replies, none untrue;
- c2 failed: the first draw said ``f(0, 1)`` returns 2 (the reference gives 1), the second draw (true) was shown;
- c3 failed: three draws, all false, the last shown: its false claim is marked in the text;
- c4 failed: a hostile reply (markup everywhere, spans out of range, overlapping, not integers, a bad verdict);
- c5 failed: one true claim;
- c6 an infrastructure error (not scored).

So 6 checked replies, 3 untrue (c2, c3, c4): 50%; failed episodes c2 to c5, 3 of them with an untrue reply.
``backend-a`` is a run written before claims were checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_report import RUNS, make_run, record, run_json

from colbench.report import build_report, load_run, render_markdown, render_run, render_text
from colbench.report.columns import leaderboard_columns
from colbench.report.compare import simulator_swaps
from colbench.report.show import show
from colbench.report.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ratio_ci, ratio_estimate
from colbench.report.truth import EpisodeTruth, episode_truth, truth_config
from colbench.runs.turns import read_turns

CLAIMS = RUNS / "backend-claims"
OLD = RUNS / "backend-a"


def human(text: str, *verdicts: str, **extra: object) -> dict[str, object]:
    claims = [
        {"span": [0, len(text)], "call": "f(1)", "stated": "2", "actual": "3" if v == "false" else "2", "verdict": v}
        for v in verdicts
    ]
    return {"role": "human", "text": text, "claims": claims, "untrue": "false" in verdicts, "truth_action": "shown",
            **extra}  # fmt: skip


def checked_run(tmp_path: Path, name: str, records: list[dict[str, object]], **truth: str) -> Path:
    config = run_json(task_ids=tuple(str(r["task_id"]) for r in records))
    config["truth"] = {"policy": "flag", "checker": "exec-claims/1", "human_grounding": "off", **truth}
    return make_run(tmp_path, name, config, records)


# -- the estimator ----------------------------------------------------------------------------------------------
def test_the_untrue_share_is_pooled_over_replies_with_a_bootstrap_over_tasks() -> None:
    per_task = {"a": [(1, 2), (0, 1)], "b": [(0, 4)], "c": [(2, 2)], "d": [(0, 0)]}  # d: nothing checked
    est = ratio_estimate(per_task)
    assert est.value == pytest.approx(3 / 9) and est.n == 3 and est.method == "bootstrap"
    hits, totals = np.array([1.0, 0.0, 2.0]), np.array([3.0, 4.0, 2.0])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    ratios = []
    for _ in range(BOOTSTRAP_RESAMPLES // 1000):
        drawn = rng.integers(0, 3, size=(1000, 3))
        ratios += list(hits[drawn].sum(axis=1) / totals[drawn].sum(axis=1))
    low, high = np.percentile(ratios, [2.5, 97.5])
    assert (est.low, est.high) == (pytest.approx(low), pytest.approx(high))
    assert ratio_estimate({"a": [(1, 3)]}).low is None  # one task: no interval
    assert ratio_estimate({"a": [(0, 0)]}).value is None
    assert ratio_ci([0, 0], [1, 1]) == (0.0, 0.0)
    with pytest.raises(ValueError, match="positive"):
        ratio_ci([0, 1], [0, 1])


def truth(dialogue: list[dict[str, object]] | None) -> EpisodeTruth | None:
    """The counts of a recorded dialogue, read as a record's turns are."""
    return episode_truth(read_turns(dialogue, "a record"))


def test_episode_counts_read_what_the_checker_wrote_and_nothing_else() -> None:
    assert truth(None) is None and truth([{"role": "human", "text": "old run"}]) is None
    assert truth([{"role": "agent", "claims": []}]) is None  # only the human's replies are checked
    found = truth([human("a", "true"), human("b", "false"), human("c"), {"role": "human", "text": "d"}])
    assert found is not None and (found.checked, found.untrue) == (3, 1)
    # no ``untrue`` key (a hand-written record): the first draw's claims decide, not the shown reply's
    turn = human("shown", "true")
    del turn["untrue"]
    turn["truth_draws"] = [{"reply": "first", "claims": [{"span": [0, 5], "verdict": "false"}]}, {"reply": "shown"}]
    found = truth([turn])
    assert found is not None and found.untrue == 1


# -- the leaderboard --------------------------------------------------------------------------------------------
def test_the_leaderboard_by_hand_beside_the_leak_rate() -> None:
    report = build_report([load_run(CLAIMS), load_run(OLD)])
    rows = {row.label: (table, row) for table in report.tables for row in table.rows}
    table, row = rows["backend-claims"]
    assert row.untrue is not None and row.untrue.value == pytest.approx(0.5) and row.untrue_replies == 6
    assert row.untrue.n == 5 and row.untrue.has_ci  # tasks c1..c5 (c6 was not scored)
    assert row.failed_untrue == (3, 4)
    header, body = leaderboard_columns(table)
    assert header.index("untrue %") == header.index("leak %") + 1
    assert header.index("failed untrue") == header.index("untrue %") + 1
    cells = dict(zip(header, body[0], strict=True))
    assert cells["untrue %"].startswith("50.0 [") and cells["failed untrue"] == "3/4 (75.0)"
    old_table, old = rows["backend-a"]
    assert old.untrue is None and old.failed_untrue is None and old.untrue_replies == 0
    old_header, old_body = leaderboard_columns(old_table)
    old_cells = dict(zip(old_header, old_body[0], strict=True))
    assert old_cells["untrue %"] == "-" and old_cells["failed untrue"] == "-"  # not checked: never 0
    text = render_text(report)
    assert "untrue % = share of the simulated human's checked replies" in text
    assert "gpt-4o (grounding exec)" in text  # the cost table's simulator, and the legend
    assert "| untrue % | failed untrue |" in render_markdown(report)


def test_a_checking_run_without_any_reply_shows_no_figure_and_partly_checked_runs_say_so(tmp_path: Path) -> None:
    silent = checked_run(tmp_path, "silent", [record("t1", 0, 1.0, True), record("t2", 0, 0.0, False)])
    row = build_report([load_run(silent)]).tables[0].rows[0]
    assert row.untrue is None and row.failed_untrue is None  # "-": no reply was checked, not "0% untrue"
    mixed = checked_run(
        tmp_path,
        "mixed",
        [
            record("t1", 0, 0.0, False, dialogue=[{"role": "agent", "text": "q"}, human("f(1) is 3", "false")]),
            record("t2", 0, 0.0, False, dialogue=[{"role": "agent", "text": "q"}, {"role": "human", "text": "old"}]),
            record("t3", 0, 1.0, True, dialogue=[{"role": "agent", "text": "q"}, human("ok")]),
        ],
    )
    row = build_report([load_run(mixed)]).tables[0].rows[0]
    assert row.untrue is not None and row.untrue.value == 0.5 and row.failed_untrue == (1, 1)
    assert "untrue % over the 2 of 3 human replies that were checked" in row.notes


def test_grounding_is_part_of_the_simulator_runs_are_told_apart_by(tmp_path: Path) -> None:
    records = [record("t1", 0, 1.0, True), record("t2", 0, 0.0, False), record("t3", 0, 1.0, True)]
    plain = checked_run(tmp_path, "plain", records)
    grounded = checked_run(tmp_path, "grounded", records, human_grounding="exec")
    older = make_run(tmp_path, "older", run_json(), records)  # no truth section at all: not grounded
    report = build_report([load_run(plain), load_run(grounded), load_run(older)])
    notes = {row.label: row.notes for row in report.tables[0].rows}
    assert "simulator sim-model (grounding exec), not sim-model" in notes["grounded"]
    assert not any("simulator" in n for n in notes["plain"] + notes["older"])
    resampled = checked_run(tmp_path, "resampled", records, policy="resample:3")
    notes = {r.label: r.notes for r in build_report([load_run(plain), load_run(resampled)]).tables[0].rows}
    assert "truth policy resample:3, not flag or off" in notes["resampled"]
    assert truth_config(load_run(older).config).policy is None
    # compare's simulator swap groups runs by the same key: a grounded human is another simulator
    agents = []
    for name, agent in (("a1", "agent-1"), ("a2", "agent-2")):
        for grounding in ("off", "exec"):
            config = run_json(agent=agent)
            config["truth"] = {"policy": "flag", "human_grounding": grounding}
            agents.append(load_run(make_run(tmp_path, f"{name}-{grounding}", config, records)))
    (swap,) = simulator_swaps(agents, [str(r.path.name) for r in agents])
    assert (swap.first, swap.second) == ("sim-model", "sim-model (grounding exec)")


# -- the HTML report and show -----------------------------------------------------------------------------------
def test_the_html_report_lists_claims_draws_and_grounding_escaped() -> None:
    run = load_run(CLAIMS)
    page = render_run(run, build_report([run]))
    assert "<th>untrue %</th>" in page and "3/4 (75.0)" in page
    assert "human gpt-4o (grounding exec)" in page and "truth policy resample:2" in page
    assert '<li class="false">false: f(1, 1): said 3, the reference gives 2 (the reference returns 2)</li>' in page
    assert "3 draws (truth policy resample)" in page and "draw 3 (shown to the agent)" in page
    assert "told privately to the human (grounding; the agent never saw it)" in page
    assert "(false claim, resampled)" in page and "1 of 1 checked" in page
    body = page.split("<body>", 1)[1]
    assert not re.search(r"<script|<img[^>]*onerror|<svg onload|<style>", body, re.I)
    assert "said &lt;script&gt;alert(&#x27;stated&#x27;)&lt;/script&gt;, the reference gives &lt;b&gt;actual" in page
    old = load_run(OLD)
    assert "not checked" in render_run(old, build_report([old]))


def test_show_marks_false_claims_and_the_grounded_human() -> None:
    text = show(CLAIMS, "c3")
    assert "human: gpt-4o (grounding exec)" in text
    assert "HUMAN (turn 1)  [false claim in the first draw: resampled]" in text
    assert "    ! false: f(1, 1): said 3, the reference gives 2 (the reference returns 2)" in text
    hostile = show(CLAIMS, "c4")
    assert "[false claim]" in hostile and hostile.count("! false:") == 3
    assert "false claim" not in show(CLAIMS, "c1") and "false claim" not in show(OLD, "t2")
