"""The plots of the HTML report (colbench/report/plots.py): what each figure shows, escaping, determinism, degenerate
runs, the page without matplotlib, and the page in real headless Chromium (no network, no console errors).

Run directories are built in tmp_path as ``colbench eval`` writes them (``make_run`` of test_report); one backend run
is a real eval (scripted agent and a scripted human who pastes the hidden answer, scored in bubblewrap), so the leak
fields are the ones the env records.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from test_report import RUNS, make_run, record, run_json

from colbench.report import build_report, load_prices, load_run, render_run, write_run_report
from colbench.report.columns import estimate_cell

pytest.importorskip("matplotlib")

from colbench.report import figure_data

PNG = (RUNS / "frontend-a" / "screens" / "f1.0.png").read_bytes()
EVIL = "<script>alert(1)</script>&$x$"


# -- helpers ----------------------------------------------------------------------------------------------------
def human(text: str, leak: bool | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "human", "text": text}
    if leak is not None:
        turn.update(leak_score=0.9 if leak else 0.1, leak=leak, leak_action="shown", leak_scores=[0.1])
    return turn


def dialogue(*replies: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for reply in replies:
        out += [{"role": "agent", "text": "question?"}, reply]
    return [*out, {"role": "agent", "text": "I WANT TO ANSWER: def f(): pass"}]


def usage(agent: int, simulator: int) -> dict[str, Any]:
    return {
        "agent": {"prompt_tokens": agent, "completion_tokens": agent // 10, "calls": 1},
        "simulator": {"prompt_tokens": simulator, "completion_tokens": simulator // 10, "calls": 1},
    }


def svg(page: str, name: str) -> str:
    found = re.findall(rf'<svg class="plot"[^>]*data-plot="{name}".*?</svg>', page, re.S)
    assert len(found) == 1, f"{len(found)} {name} plots"
    return found[0]


def ids(fragment: str, prefix: str) -> list[str]:
    return re.findall(rf'id="({re.escape(prefix)}[^"]*)"', fragment)


def cells(grid: str) -> dict[str, int]:
    """Cells per category: each category is one compound path, each cell one subpath."""
    out = {}
    for name, data in re.findall(r'<g id="grid-cells-([\w-]+)">\s*<path d="([^"]*)"', grid):
        out[name] = data.count("M ")
    return out


def texts(fragment: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", fragment, re.S)]


@pytest.fixture
def backend(tmp_path: Path) -> dict[str, Path]:
    """Two backend runs of 2 trials on t1..t3 (and the odd task id): every outcome of the grid once."""
    tasks = ("t1", "t2", "t3", EVIL)
    alpha = [
        record("t1", 0, 1.0, True, turns=2, answer="a" * 10, dialogue=dialogue(human("use ints", False)),
               usage=usage(1000, 100)),
        record("t1", 1, 1.0, True, turns=3, answer="a" * 30, dialogue=dialogue(human("", False), human("ok", True)),
               usage=usage(1000, 100)),
        record("t2", 0, 0.0, False, turns=1, answer="a" * 20, dialogue=dialogue(human("Sorry, I can't say.", True)),
               usage=usage(1000, 100)),
        record("t2", 1, 0.5, False, turns=1, answer="a" * 20, dialogue=[], usage=usage(1000, 100)),
        record("t3", 0, 1.0, True, turns=2, answer="a" * 10, usage=usage(1000, 100)),
        record("t3", 1, 0.0, False, turns=2, answer="a" * 10, usage=usage(1000, 100)),
        record(EVIL, 0, None),
        record(EVIL, 1, None),
    ]  # fmt: skip
    beta = [
        record("t1", 0, 0.0, False, turns=4, usage=usage(500, 0)),
        record("t1", 1, 0.0, False, turns=4, usage=usage(500, 0)),
        record("t2", 0, 1.0, True, turns=4, usage=usage(500, 0)),
        record("t2", 1, 1.0, True, turns=4, usage=usage(500, 0)),
    ]
    return {
        "alpha": make_run(tmp_path, "alpha", run_json(task_ids=tasks, trials=2), alpha),
        "beta": make_run(tmp_path, "beta", run_json(task_ids=tasks, trials=2, agent="other"), beta),
    }


@pytest.fixture
def frontend(tmp_path: Path) -> dict[str, Path]:
    """Two frontend runs; ``fa`` has its screenshots (and the reference page of f1), ``fb`` has lost them."""
    records = [
        record(f"f{i}", 0, value, None, screenshot=f"screens/f{i}.0.png", usage=usage(100, 10))
        for i, value in enumerate([0.9, 0.35, 0.62], start=1)
    ]
    fa = make_run(tmp_path, "fa", run_json("frontend", task_ids=("f1", "f2", "f3")), records)
    (fa / "screens" / "reference").mkdir(parents=True)
    for i in (1, 2, 3):
        (fa / "screens" / f"f{i}.0.png").write_bytes(PNG)
    (fa / "screens" / "reference" / "f1.png").write_bytes(PNG)
    lost = [{**r, "reward": value} for r, value in zip(records, [0.45, 0.2], strict=False)]
    fb = make_run(tmp_path, "fb", run_json("frontend", task_ids=("f1", "f2", "f3"), agent="b"), lost)
    return {"fa": fa, "fb": fb}


def pages(paths: list[Path], **kwargs: Any) -> dict[str, str]:
    runs = [load_run(p) for p in paths]
    report = build_report(runs, **kwargs)
    return {run.path.name: render_run(run, report) for run in runs}


# -- what the figures show --------------------------------------------------------------------------------------
def test_leaderboard_has_one_bar_and_interval_per_run(backend: dict[str, Path]) -> None:
    runs = [load_run(p) for p in backend.values()]
    report = build_report(runs)
    page = render_run(runs[0], report)
    board = svg(page, "leaderboard")
    rows = report.tables[0].rows
    for slug, get in (("success", lambda r: r.primary), ("reward", lambda r: r.secondary)):
        assert len(ids(board, f"leaderboard-{slug}-bar-")) == len(rows) == 2
        assert len(set(ids(board, f"leaderboard-{slug}-ci-"))) == 2  # both runs scored two tasks: intervals
        shown = texts(board)
        for row in rows:
            assert estimate_cell(get(row)) in shown
    # alpha: success per task 1, 0, 1/2 -> 50.0; tests passed (1 + 0.25 + 0.5) / 3 = 58.3. beta: 50.0 and 50.0,
    # so alpha ranks first on tests passed.
    assert any(t.startswith("58.3 [") for t in texts(board)) and sum(t.startswith("50.0 [") for t in texts(board)) == 3
    assert [t for t in texts(board) if t[:2] in ("1.", "2.")] == ["1. alpha", "2. beta"]


def test_outcome_grid_has_a_cell_per_task_and_run(backend: dict[str, Path]) -> None:
    page = pages(list(backend.values()))["alpha"]
    grid = svg(page, "grid")
    found = cells(grid)
    # Columns alpha, beta (their rank); rows t1, t2, t3, EVIL (as they first appear).
    # alpha: success t1, fail t2, mixed t3, infra EVIL. beta: fail t1, success t2, not run t3 and EVIL.
    assert found == {"success": 2, "fail": 2, "mixed": 1, "infra": 1, "not-run": 2}
    assert sum(found.values()) == 4 * 2
    assert "0.50" in texts(grid)  # the mixed cell's share of successful trials
    assert {"success", "fail", "mixed", "infra", "not run"} <= set(texts(grid))  # the legend
    assert "Outcome per task (4 tasks x 2 runs)" in page


def test_frontend_grid_is_a_colour_scale_with_values(frontend: dict[str, Path]) -> None:
    page = pages(list(frontend.values()))["fa"]
    grid = svg(page, "grid")
    found = cells(grid)
    assert found.pop("not-run") == 1 and sum(found.values()) == 5  # fb has no f3
    assert all(name.startswith("scale-") for name in found)
    assert found["scale-18"] == found["scale-07"] == 1  # 0.90 and 0.35 in bins of 0.05 from 0
    assert {"0.90", "0.35", "0.62", "0.45", "0.20"} <= set(texts(grid))
    assert "similarity" in texts(grid)  # the colour bar


def test_histograms_of_turns_answers_and_replies(backend: dict[str, Path]) -> None:
    page = pages([backend["alpha"]])["alpha"]
    dist = svg(page, "dist")
    # alpha's 6 scored episodes: turns 2, 3, 1, 1, 2, 2 -> bins 1, 2, 3 of heights 2, 3, 1
    assert len(ids(dist, "dist-turns-bin-")) == 3
    assert {"1", "2", "3"} <= set(texts(dist))  # integer ticks
    # answers: 10, 30, 20, 20, 10, 10 chars; the human's replies: 8, 0, 2, 19 chars
    title = [t for t in texts(dist) if t.startswith("n = ")]
    assert title == ["n = 6, median 2", "n = 6, median 15", "n = 4, median 5"]


def test_human_reply_statistics(backend: dict[str, Path]) -> None:
    page = pages(list(backend.values()))["alpha"]
    fig = svg(page, "human")
    shown = texts(fig)
    # alpha: 4 replies ("use ints", "", "ok", "Sorry, I can't say."): mean 7.2 chars, 2 of 4 empty or refusing,
    # 2 of 4 flagged as leaks. beta: no human reply recorded.
    assert "7 (4)" in shown and "50.0" in shown
    assert shown.count("50.0") == 2 and "not measured" in shown and "-" in shown
    assert len(ids(fig, "human-reply-chars-bar-")) == 1  # beta has no bar


def test_cost_in_usd_with_prices_and_tokens_without(backend: dict[str, Path], tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"as_of": "2025-01-15", "agent-model": {"input": 1.0, "output": 2.0}, '
                      '"other": {"input": 1.0, "output": 2.0}, "sim-model": {"input": 0.5, "output": 1.0}}')  # fmt: skip
    page = pages(list(backend.values()), prices=load_prices(prices))["alpha"]
    cost = svg(page, "cost")
    # alpha: 6 records with usage, agent 6 x (1000 in, 100 out), simulator 6 x (100 in, 10 out); 8 episodes
    alpha = (6000 * 1.0 + 600 * 2.0 + 600 * 0.5 + 60 * 1.0) / 1e6
    assert f"${alpha:,.2f} (${alpha / 8:,.4f}/ep)" in texts(cost)
    assert len(ids(cost, "cost-agent-bar-")) == 2 and "cost per run in USD, prices as of 2025-01-15" in page
    page = pages(list(backend.values()))["alpha"]
    assert "tokens per run (a model is not in the price table: cost unknown)" in page
    assert f"{6 * 1210:,.0f} ({6 * 1210 / 8:,.0f}/ep)" in texts(svg(page, "cost"))


def test_screenshots_side_by_side_with_their_cosine(frontend: dict[str, Path]) -> None:
    page = pages(list(frontend.values()))["fa"]
    gallery = page[page.index("Reference and final pages") :]
    first = gallery.index("task f2, trial 0: cosine 0.350")  # lowest first
    assert first < gallery.index("cosine 0.620") < gallery.index("task f1, trial 0: cosine 0.900")
    assert '<img class="thumb" src="screens/reference/f1.png" alt="reference of f1"' in gallery
    assert '<img class="thumb" src="screens/f1.0.png" alt="final page of f1"' in gallery
    assert gallery.count("reference: not stored in the run directory") == 2
    lost = pages(list(frontend.values()))["fb"]
    assert "final page: screens/f1.0.png (file missing)" in lost


# -- safety and determinism -------------------------------------------------------------------------------------
def test_untrusted_text_in_plots_is_escaped(backend: dict[str, Path], tmp_path: Path) -> None:
    odd = tmp_path / "a&b<i>"
    shutil.copytree(backend["beta"], odd)
    page = pages([backend["alpha"], odd])["alpha"]
    assert not re.search(r"<script", page, re.I) and "<i>" not in page
    grid = svg(page, "grid")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;$x$" in grid  # escaped, and "$x$" is not mathtext
    assert "a&amp;b&lt;i&gt;" in svg(page, "leaderboard")
    # Every id on the page is unique (several SVGs share it), and nothing is loaded from outside.
    every = re.findall(r'<[^>]*\sid="([^"]*)"', page)
    assert len(every) == len(set(every)) > 50
    assert all(v.startswith(("#", "screens/")) for v in re.findall(r'(?:src|href)="([^"]*)"', page))


def test_plots_are_deterministic(backend: dict[str, Path]) -> None:
    first = pages(list(backend.values()))["alpha"]
    assert pages(list(backend.values()))["alpha"] == first
    assert "dc:date" not in first and "<?xml" not in first and "<!DOCTYPE svg" not in first


def test_degenerate_runs_render(tmp_path: Path) -> None:
    empty = make_run(tmp_path, "empty", run_json(), [])
    (empty / "episodes.jsonl").unlink()
    infra = make_run(tmp_path, "infra", run_json(), [record("t1", 0, None), record("t2", 0, None)])
    one = make_run(tmp_path, "one", run_json(task_ids=("t1",)), [record("t1", 0, 1.0, True, usage=None)])
    lost = make_run(tmp_path, "lost", run_json("frontend", task_ids=("f1",)),
                    [record("f1", 0, 0.5, None, screenshot="screens/f1.0.png")])  # fmt: skip
    found = pages([empty, infra, one])
    assert "no scored episode: no histograms" in found["empty"] and "no scored episode: no histograms" in found["infra"]
    assert cells(svg(found["infra"], "grid")) == {"infra": 2, "success": 1, "not-run": 3}
    assert len(ids(svg(found["one"], "leaderboard"), "leaderboard-success-bar-")) == 1  # bars of 3 runs: 1 scored
    assert "1. one" in texts(svg(found["one"], "leaderboard"))
    assert "no usage recorded" in texts(svg(found["one"], "cost"))
    assert "no episode recorded: no grid" in pages([empty])["empty"]
    page = pages([lost])["lost"]
    assert "final page: screens/f1.0.png (file missing)" in page and "cosine 0.500" in page


def test_without_matplotlib_the_report_says_how_to_get_plots(
    frontend: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    page = pages(list(frontend.values()))["fa"]
    assert "<svg" not in page
    assert page.count("plots need matplotlib: pip install &#x27;colbench[report]&#x27;") == 1
    assert "cosine 0.900" in page  # the screenshots need no plotting library


@pytest.mark.slow
def test_a_real_eval_run_shows_its_leaks(tmp_path: Path) -> None:
    """The leak fields as the env records them: the leaky human pastes the hidden answer, every reply flagged."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    from plans import scripted_plan

    from colbench.eval import run_eval

    out = tmp_path / "leaky"
    config = scripted_plan(
        out,
        agent="scripted:copycat",
        simulator="scripted:leaky",
        limit=3,
        max_turns=3,
        sandbox="bwrap",
        leak_policy="flag",
    )
    assert run_eval(config).overall.ok == 3
    run = load_run(out)
    stats = figure_data.reply_stats(run)
    assert stats.replies >= 3 and stats.leaked == 1.0
    page = render_run(run, build_report([run]))
    assert "100.0" in texts(svg(page, "human"))
    assert sum(cells(svg(page, "grid")).values()) == 3


# -- in a real browser ------------------------------------------------------------------------------------------
@pytest.mark.browser
def test_report_with_plots_in_headless_chromium(frontend: dict[str, Path], backend: dict[str, Path]) -> None:
    """The plots render (every SVG has a size), the console stays clean, and nothing but the file itself and its
    screenshots is requested: no network at all."""
    pytest.importorskip("playwright")
    from playwright.sync_api import ConsoleMessage, Request, sync_playwright

    from colbench.errors import ConfigError as NoChromium
    from colbench.render import find_chromium

    try:
        chromium = find_chromium()
    except NoChromium as exc:
        pytest.skip(str(exc))
    targets = []
    for group in (frontend, backend):
        runs = [load_run(p) for p in group.values()]
        report = build_report(runs)
        targets.append(write_run_report(runs[0], report))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        for target in targets:
            page = browser.new_page()
            requests: list[str] = []
            problems: list[str] = []

            def on_request(request: Request, seen: list[str] = requests) -> None:
                seen.append(request.url)

            def on_console(message: ConsoleMessage, seen: list[str] = problems) -> None:
                if message.type in ("error", "warning"):
                    seen.append(message.text)

            page.on("request", on_request)
            page.on("console", on_console)
            page.on("pageerror", lambda exc, seen=problems: seen.append(str(exc)))
            page.goto(target.as_uri())
            page.wait_for_load_state("load")
            sizes = page.eval_on_selector_all(
                "svg.plot", "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })"
            )
            page.eval_on_selector_all("img.thumb", "els => els.forEach(e => e.scrollIntoView())")  # lazy images
            for _ in range(50):  # (wait_for_function evaluates a string: the page's CSP forbids that)
                if page.eval_on_selector_all("img.thumb", "els => els.every(e => e.complete)"):
                    break
                page.wait_for_timeout(100)
            images = page.eval_on_selector_all("img.thumb", "els => els.map(e => e.naturalWidth)")
            page.close()
            assert len(sizes) == 5 and all(w > 100 and h > 50 for w, h in sizes), sizes
            assert problems == []
            assert [u for u in requests if not u.startswith(("file:", "data:", "about:"))] == []
            assert requests[0] == target.as_uri()
            if target.parent.name == "fa":
                assert len(images) == 4 and all(w > 0 for w in images)  # 3 final pages and 1 reference
        browser.close()
