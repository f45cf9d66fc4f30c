"""``colbench compare``: paired differences, the exact McNemar test, win/loss/tie, simulator-swap robustness.

Runs are real: scripted agents (the reference, an empty answer, the copycat who answers with whatever code the human
pastes) under two scripted humans (one who never knows, one who pastes the hidden answer), scored in bubblewrap.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plans import scripted_plan

from colbench.cli.main import main as cli_main
from colbench.errors import DataError
from colbench.eval import run_eval
from colbench.report import load_run
from colbench.report.compare import _rank_correlations, compare, mcnemar_exact

AGENTS = ("reference", "empty", "copycat")
SIMULATORS = ("scripted", "scripted:leaky")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Path]]:
    root = tmp_path_factory.mktemp("runs")
    made = {}
    for simulator in SIMULATORS:
        for agent in AGENTS:
            out = root / f"{agent}-{simulator.replace(':', '-')}"
            config = scripted_plan(
                out,
                agent=f"scripted:{agent}",
                simulator=simulator,
                limit=12,
                max_turns=3,
                sandbox="bwrap",
                leak_policy="flag",
            )
            assert run_eval(config).overall.ok == 12
            made[agent, simulator] = out
    yield made


def test_mcnemar_exact_matches_the_binomial_test() -> None:
    assert mcnemar_exact(0, 0) is None
    assert mcnemar_exact(8, 1) == pytest.approx(2 * (1 + 9) / 2**9)
    assert mcnemar_exact(1, 8) == mcnemar_exact(8, 1)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 20) == pytest.approx(2 / 2**20)


def test_rank_correlations_by_hand() -> None:
    assert _rank_correlations([1, 2, 3], [10, 20, 30]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert _rank_correlations([1, 2, 3], [3, 2, 1]) == (pytest.approx(-1.0), pytest.approx(-1.0))
    # reference (1, 1), empty (0, 0), copycat (0, 1): one concordant pair, one tie on each side
    spearman, kendall = _rank_correlations([1, 0, 0], [1, 0, 1])
    assert kendall == pytest.approx(0.5) and spearman == pytest.approx(0.5)
    assert _rank_correlations([1, 1, 1], [1, 2, 3]) == (None, None)


def test_paired_difference_counts_and_test(runs: dict[tuple[str, str], Path]) -> None:
    comparison = compare([load_run(runs["reference", "scripted"]), load_run(runs["empty", "scripted"])])
    (pair,) = comparison.pairs
    assert pair.tasks == 12 and pair.mean_a == 1.0 and pair.mean_b == 0.0
    assert pair.diff.value == -1.0 and (pair.diff.low, pair.diff.high) == (-1.0, -1.0)
    assert (pair.wins, pair.losses, pair.ties) == (0, 12, 0)
    assert (pair.b_only, pair.a_only) == (0, 12)
    assert pair.mcnemar_p == pytest.approx(2 / 2**12)
    assert comparison.swaps == ()  # one simulator only


def test_simulator_swap_reports_changes_and_rank_correlation(runs: dict[tuple[str, str], Path]) -> None:
    comparison = compare([load_run(path) for path in runs.values()])
    assert len(comparison.pairs) == 5
    (swap,) = comparison.swaps
    assert swap.agents == ("scripted:copycat", "scripted:empty", "scripted:reference")
    changes = dict(zip(swap.agents, swap.changes, strict=True))
    # the copycat only scores when the human pastes the answer (and the paste is not cut by the reply cap)
    assert 0.0 < changes["scripted:copycat"].value < 1.0 and changes["scripted:copycat"].low > 0.0
    assert changes["scripted:reference"].value == 0.0 and changes["scripted:empty"].value == 0.0
    # first human: reference 1, copycat 0, empty 0 (tied); second: reference > copycat > empty
    assert swap.kendall == pytest.approx(2 / math.sqrt(6))
    assert swap.spearman == pytest.approx(float(np.corrcoef([3, 1.5, 1.5], [3, 2, 1])[0, 1]))


def test_the_command_prints_a_table_and_writes_html(
    runs: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "compare.html"
    dirs = [str(runs[a, s]) for s in SIMULATORS for a in AGENTS]
    assert cli_main(["compare", *dirs, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "McNemar p" in out and "simulator swap: scripted -> scripted:leaky" in out
    assert "Kendall tau-b +0.82" in out
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "Simulator swap" in html and "<script" not in html


def test_runs_of_two_domains_or_no_common_task_are_one_line_errors(
    runs: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="at least two"):
        compare([load_run(runs["reference", "scripted"])])
    other = tmp_path / "other"
    run_eval(scripted_plan(other, sandbox="bwrap"))
    tail = load_run(other)
    seen = set(load_run(runs["empty", "scripted"]).scored())
    tail.episodes = {key: record for key, record in tail.episodes.items() if key[0] not in seen}
    with pytest.raises(DataError, match="no scored task in common"):
        compare([load_run(runs["empty", "scripted"]), tail])


@pytest.mark.parametrize(
    ("scoring", "named"),
    [
        ({"augmenter": ["{}"], "plus_digest": "{}"}, "plus tests of augmenter 1"),
        ({"taskenv": "{}"}, "task environment 1"),  # answers ran with other libraries
    ],
)
def test_runs_judged_by_other_tests_or_in_another_task_environment_are_never_ranked_or_paired_as_one(
    tmp_path: Path, scoring: dict[str, Any], named: str
) -> None:
    import json
    import shutil

    from paths import REPO

    from colbench.report.columns import legend
    from colbench.report.leaderboard import build_report

    made = []
    for name, which in (("old", "1"), ("new", "2")):
        run = tmp_path / name
        shutil.copytree(REPO / "tests" / "data" / "run_dirs" / "backend-a", run)
        config = json.loads((run / "run.json").read_text())
        filled = json.loads(json.dumps(scoring).replace("{}", which))
        config["scoring"] = {**config["scoring"], **filled}
        (run / "run.json").write_text(json.dumps(config))
        made.append(load_run(run))
    assert made[0].judged_by == f"ColBench-Backend-v0 ({named})"
    report = build_report(made)
    assert [t.judged_by for t in report.tables] == [r.judged_by for r in sorted(made, key=lambda r: r.judged_by)]
    assert any("separate tables" in line and named in line for line in legend(report))
    pair = compare(made).pairs[0]
    assert pair.across_versions and named in pair.env_a
