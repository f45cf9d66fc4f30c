"""The human's false claims in the viewer: marked in the reply as leak spans are, the other draws and what a
grounded human was told, the "untrue" filter, the runs index's figures, the bundle, and hostile spans.

The run ``tests/data/run_dirs/backend-claims`` is described in tests/report/test_truth.py; ``backend-a`` is an older
run without claim checks."""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from view_runs import RUN_DIRS, backend_record, write_run

from colbench.report.truth import claims_of
from colbench.types.claims import Claim
from colbench.view.app import make_app
from colbench.view.bundle import write_bundle
from colbench.view.episode import MAX_TEXT, Segment, place_claims, segments
from colbench.view.index import RunIndex

CLAIMS = RUN_DIRS / "backend-claims"
OLD = RUN_DIRS / "backend-a"


ALLOWED_TAGS = {
    "h1", "h2", "h3", "h4", "p", "div", "section", "aside", "span", "strong", "small", "pre", "mark", "ul", "li", "code",
    "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "a", "br",
}  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def no_live_markup(html: str) -> None:
    """Parsed, not searched: the page's main part holds only the viewer's own elements, none with an event handler
    or a script URL; hostile text inside an attribute value (a claim's title) is only text."""
    parser = _Tags()
    parser.feed(html.split("<main>", 1)[1].split("</main>", 1)[0])
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs:
            assert not name.startswith("on") and not (value or "").lower().lstrip().startswith("javascript:"), name


def client(make_site: Any, *dirs: Path) -> TestClient:
    return TestClient(make_app(make_site(*dirs)))


def episode(web: TestClient, task: str, rid: int = 0) -> str:
    page = web.get(f"/runs/{rid}/episode", params={"task": task, "trial": 0})
    assert page.status_code == 200, page.text
    return page.text


def test_a_false_claim_is_marked_with_what_was_said_and_what_the_reference_gives(make_site: Any) -> None:
    web = client(make_site, CLAIMS)
    html = episode(web, "c3")
    note = "f(1, 1): said 3, the reference gives 2 (the reference returns 2)"
    assert f'For <mark class="claim false" title="false: {note}">f(1, 1) it gives 3</mark>, I think.' in html
    assert f'<li class="false"><span class="verdict">false</span> {note}</li>' in html
    assert "false claim in the first draw" in html and "resampled (draw 3 shown)" in html
    assert html.count("not shown to the agent (truth policy resample)") == 2  # draws 1 and 2
    true = episode(web, "c1")  # true claims marked subtly, unchecked ones faintly, never as false
    assert (
        '<mark class="claim true" title="true: f(2, 3): said 5, the reference gives 5">f(2, 3) should return 5' in true
    )
    assert '<mark class="claim unchecked"' in true and 'class="claim false"' not in true
    assert "told privately to the human (grounding): the agent never saw this" in true
    assert "<code>f(2, 3)</code> → <code>5</code>" in true and "no checkable claim" in true


def test_a_resampled_turn_shows_the_false_first_draw_under_the_true_reply_the_agent_saw(make_site: Any) -> None:
    html = episode(client(make_site, CLAIMS), "c2")
    shown, rest = html.split("draw 1: not shown to the agent", 1)
    assert '<mark class="claim true" title="true: f(0, 1): said 1, the reference gives 1">f(0, 1) returns 1' in shown
    assert '<mark class="claim false" title="false: f(0, 1): said 2, the reference gives 1' in rest
    assert "<code>f(0, 1)</code> → <code>1</code>" in rest  # the grounding, below the draws


def test_a_hostile_record_is_escaped_clipped_and_never_crashes(make_site: Any) -> None:
    html = episode(client(make_site, CLAIMS), "c4")
    no_live_markup(html)
    stated = "said &lt;script&gt;alert(&#39;stated&#39;)&lt;/script&gt;, the reference gives &lt;b&gt;actual&lt;/b&gt;"
    assert stated in html and "&lt;script&gt;alert(&#39;grounding&#39;)&lt;/script&gt;" in html
    marked = re.findall(r'<mark class="claim (\w+)" title="[^"]*">(.*?)</mark>', html)
    # [33, 99999] clipped to the text's end; [-5, 3] clipped to its start; [35, 40] overlaps a false claim: listed only
    assert marked == [("false", "&lt;sc"), ("false", "(&lt;b&gt;) is &lt;i&gt;9&lt;/i&gt;")]
    assert html.count("(not marked in the text)") == 4  # the overlap, a bool, a reversed and a 3-number span
    assert "f(x)" not in html and "not a claim" not in html  # a bad verdict and a string are not claims


def test_the_untrue_filter_and_column_and_the_runs_figures(make_site: Any) -> None:
    web = client(make_site, CLAIMS, OLD)
    rows = web.get("/api/runs/0/episodes").json()["rows"]
    assert [(r["task_id"], r["checked"], r["untrue"]) for r in rows] == [
        ("c1", 2, 0), ("c2", 1, 1), ("c3", 1, 1), ("c4", 1, 1), ("c5", 1, 0), ("c6", None, None),
    ]  # fmt: skip
    untrue = web.get("/api/runs/0/episodes", params={"filter": "untrue"}).json()["rows"]
    assert [r["task_id"] for r in untrue] == ["c2", "c3", "c4"]
    both = web.get("/api/runs/0/episodes", params=[("filter", "untrue"), ("filter", "failed")]).json()
    assert both["total"] == 3
    assert web.get("/api/runs/1/episodes", params={"filter": "untrue"}).json()["total"] == 0
    assert all(r["untrue"] is None for r in web.get("/api/runs/1/episodes").json()["rows"])
    new, old = web.get("/api/runs").json()
    assert new["untrue"]["value"] == 0.5 and new["untrue"]["low"] is not None and new["untrue_replies"] == 6
    assert new["failed_untrue"] == [3, 4] and new["simulator"] == "gpt-4o (grounding exec)"
    assert new["truth_policy"] == "resample:2"
    assert old["untrue"] is None and old["failed_untrue"] is None and old["simulator"] == "gpt-4o"
    run_page = web.get("/runs/0").text
    assert 'value="untrue"> untrue (a false claim)' in run_page and "truth policy resample:2" in run_page
    assert "untrue %" in web.get("/").text
    older = episode(web, "t1", rid=1)
    assert "not checked for false claims" in older and 'class="claim' not in older


def test_an_index_of_the_previous_schema_is_rebuilt(tmp_path: Path, cache: Path) -> None:
    run = write_run(tmp_path / "run", [json.loads(line) for line in (CLAIMS / "episodes.jsonl").open()])
    cache.mkdir(parents=True)
    key = hashlib.sha256(str(run.resolve()).encode()).hexdigest()[:24]
    db = sqlite3.connect(cache / f"{key}.sqlite")
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "CREATE TABLE episodes (seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL, trial INTEGER NOT NULL,"
        " status TEXT NOT NULL, reward REAL, success INTEGER, failed INTEGER, turns INTEGER, leaks INTEGER,"
        " tokens INTEGER, cost REAL, termination TEXT, error TEXT, offset INTEGER NOT NULL, length INTEGER NOT NULL,"
        " attempts INTEGER NOT NULL, UNIQUE (task_id, trial));"
    )
    config = hashlib.sha256((run / "run.json").read_bytes()).hexdigest()
    size = (run / "episodes.jsonl").stat().st_size
    meta = {"schema": "3", "run_dir": str(run.resolve()), "config": config, "size": str(size), "offset": str(size)}
    db.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
    db.commit()
    db.close()
    index = RunIndex(run, cache)  # an index of schema 3 that is up to date by its size: rebuilt all the same
    assert [r.untrue for r in index.rows()] == [0, 1, 1, 1, 0, None]
    index.close()


def test_the_bundle_shows_the_same(tmp_path: Path, make_site: Any) -> None:
    out = tmp_path / "site"
    write_bundle(make_site(CLAIMS, OLD), out)
    runs = json.loads((out / "runs.js").read_text().split("=", 1)[1].rstrip(";\n"))
    assert runs[0]["untrue"]["value"] == 0.5 and runs[1]["untrue"] is None
    rows = json.loads((out / "runs/0/data/0.js").read_text().split(", ", 1)[1].rsplit(");", 1)[0])
    assert [r["untrue"] for r in rows] == [0, 1, 1, 1, 0, None]
    pages = {p.name: p.read_text() for p in (out / "runs/0/episodes").iterdir()}
    c3 = next(text for text in pages.values() if "task c3" in text)
    assert '<mark class="claim false" title="false: f(1, 1): said 3, the reference gives 2' in c3
    c4 = next(text for text in pages.values() if "task c4" in text)
    assert "<script>alert" not in c4 and "&lt;script&gt;alert(&#39;stated&#39;)" in c4
    no_live_markup(c4)
    assert 'value="untrue"' in (out / "runs/0/index.html").read_text()


# -- cutting a text at its spans --------------------------------------------------------------------------------
def _claim(start: Any, end: Any, verdict: str = "false") -> Claim:
    return claims_of([{"span": [start, end], "verdict": verdict, "call": "f()", "stated": "1", "actual": "2"}])[0]


def test_leak_and_claim_spans_overlap_and_keep_every_character() -> None:
    text = "0123456789"
    cut = segments(text, [[2, 6]], [_claim(4, 8), _claim(5, 9, "true"), _claim(0, 1, "unchecked")])
    shape = [(s.text, s.leak, None if s.claim is None else s.claim.verdict) for s in cut]
    assert shape == [
        ("0", False, "unchecked"), ("1", False, None), ("23", True, None), ("45", True, "false"), ("67", False, "false"),
        ("89", False, None),
    ]  # fmt: skip
    assert segments("", [[0, 3]], [_claim(0, 3)]) == [Segment("")]
    assert segments("abc", None) == [Segment("abc")]  # what older runs get: unchanged
    assert place_claims([_claim(0, 10**12)], 5) == [(0, 5, 0)]
    long = "x" * (MAX_TEXT + 10)
    (mark, rest) = segments(long, None, [_claim(MAX_TEXT - 1, MAX_TEXT + 5)])[-2:]
    assert mark.text == "x" and mark.claim is not None and "more characters not shown" in rest.text


def test_random_hostile_spans_never_crash_and_never_lose_text() -> None:
    rng = random.Random(7)
    values: list[Any] = [-3, 0, 1, 5, 17, 10**9, True, None, "2", 2.5, [1]]
    for _ in range(500):
        text = "".join(rng.choice("ab<&> \n") for _ in range(rng.randint(0, 20)))
        leaks = [[rng.choice(values), rng.choice(values)] for _ in range(rng.randint(0, 4))]
        raw = [
            {"span": rng.choice([[rng.choice(values), rng.choice(values)], "x", None, [1, 2, 3]]),
             "verdict": rng.choice(["true", "false", "unchecked", "no"])}
            for _ in range(rng.randint(0, 6))
        ]  # fmt: skip
        cut = segments(text, leaks, claims_of(raw))
        assert "".join(s.text for s in cut) == text
        marked = [(s.claim, s.text) for s in cut if s.claim is not None]
        assert all(t for _, t in marked)


@pytest.mark.parametrize("count", [0, 5_000])
def test_many_spans_stay_fast(count: int) -> None:
    claims = [_claim(i, i + 2) for i in range(count)]
    cut = segments("y" * 10_000, [[i, i + 1] for i in range(count)], claims)
    assert "".join(s.text for s in cut) == "y" * 10_000


def test_an_older_run_next_to_a_checked_one(tmp_path: Path, make_site: Any) -> None:
    """A run directory written by hand with the helpers of the other viewer tests: no claims, nothing marked."""
    run = write_run(tmp_path / "old", [backend_record("t1")])
    html = episode(client(make_site, run), "t1")
    assert "not checked for false claims" in html and "untrue" not in html.split("<main>", 1)[1].split("Dialogue")[0]
