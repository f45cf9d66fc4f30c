"""Frontend scoring: cosine, result rows, win rate, the render/embed pipeline (with a stub renderer), and real pages.

Browser tests (``@pytest.mark.browser``) render ColBench pages with the real headless Chromium and score them with the
deterministic TestEmbedder; they skip, saying why, where Playwright, Chromium or the task sample is missing.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from chromium import renderer_or_skip
from paths import REPO
from test_embed import encode_png, page_like

from colbench.domains.frontend.embed import TestEmbedder
from colbench.domains.frontend.scorer import FLOOR, FrontendScore, FrontendScorer, cosine
from colbench.errors import ConfigError, DataError, InfraError
from colbench.render import RenderConfig, RenderResult
from colbench.report.stats import WinRate, win_rate
from colbench.tasks import Task, load_jsonl

SHARED_FRONTEND = REPO.parent / "shared" / "data" / "colbench" / "frontend_test_sample.jsonl"
CONFIG = RenderConfig(load_timeout_s=4.0, screenshot_timeout_s=3.0, close_timeout_s=3.0)


def frontend_task(html: str, task_id: str = "t") -> Task:
    return Task(
        task_id=task_id, domain="frontend", problem_description="A page.", ground_truth=html, hidden_information=html
    )


def answer(html: str) -> str:
    return f"I WANT TO ANSWER:\n```html\n{html}\n```"


# -- cosine, result rows, win rate -------------------------------------------------------------------------------------


def test_cosine() -> None:
    assert cosine([1, 0], [1, 0]) == 1.0
    assert cosine([1, 0], [0, 2]) == 0.0
    assert cosine([1, 1], [-1, -1]) == pytest.approx(-1.0)
    assert cosine([3, 4], [4, 3]) == pytest.approx(24 / 25)
    assert cosine([0, 0], [1, 0]) == 0.0
    v = np.full(512, 1 / math.sqrt(512), np.float32)
    assert cosine(v, v) <= 1.0  # float error never pushes it past 1
    with pytest.raises(ValueError, match="different sizes"):
        cosine([1, 0, 0], [1, 0])


def test_result_rows() -> None:
    ok = FrontendScore(0.8125, "ok", None, "ok", "test-x")
    assert ok.result_row("a") == {"task_id": "a", "similarity": 0.8125, "status": "ok", "error": None, "env_id": None}
    assert ok.details() == {
        "similarity": 0.8125,
        "status": "ok",
        "error": None,
        "env_id": None,
        "answer_render_status": "ok",
        "embedder": "test-x",
    }
    broken = FrontendScore(math.nan, "infra_error", "Chromium did not start", embedder="test-x")
    assert not broken.judged
    assert broken.result_row("b") == {
        "task_id": "b",
        "similarity": None,
        "status": "infra_error",
        "error": "Chromium did not start",
        "env_id": None,
    }


def test_win_rate_hand_checked() -> None:
    a = {"t1": 0.9, "t2": 0.5, "t3": 0.7, "t4": 0.0, "only-a": 1.0}
    b = {"t1": 0.8, "t2": 0.6, "t3": 0.7, "t4": 0.0, "only-b1": 0.1, "only-b2": 0.2}
    # t1 win, t2 loss, t3 tie, t4 tie (both floors): (1 + 2 / 2) / 4
    assert win_rate(a, b) == WinRate(rate=0.5, wins=1, ties=2, losses=1, n=4, only_a=1, only_b=2)
    assert win_rate(b, a) == WinRate(rate=0.5, wins=1, ties=2, losses=1, n=4, only_a=2, only_b=1)
    assert win_rate({"x": 0.3}, {"x": 0.2}).rate == 1.0
    assert win_rate({"x": 0.2, "y": 0.2}, {"x": 0.3, "y": 0.3}).rate == 0.0
    # Exact equality is a tie by default; a tolerance turns near-equal scores into ties too.
    near_a, near_b = {"x": 0.7000001, "y": 0.9}, {"x": 0.7, "y": 0.5}
    assert win_rate(near_a, near_b) == WinRate(1.0, 2, 0, 0, 2)
    assert win_rate(near_a, near_b, tie_tolerance=1e-6) == WinRate(0.75, 1, 1, 0, 2)
    assert win_rate({"x": 0.5, "y": 0.6, "z": 0.1}, {"x": 0.5, "y": 0.7, "z": 0.0}).rate == pytest.approx(0.5)


def test_win_rate_refuses_what_it_cannot_compare() -> None:
    with pytest.raises(DataError, match="no task in common"):
        win_rate({"a": 0.5}, {"b": 0.5})
    with pytest.raises(DataError, match=r"'t'.*run b"):
        win_rate({"t": 0.5}, {"t": math.nan})
    with pytest.raises(DataError, match=r"'t'.*run a"):
        win_rate({"t": None}, {"t": 0.5})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="tie_tolerance"):
        win_rate({"t": 0.5}, {"t": 0.5}, tie_tolerance=-1)


# -- the pipeline, with a stub renderer (no browser) ---------------------------------------------------------------------


class StubRenderer:
    """Renders by table lookup (HTML -> PNG or failure) after a short sleep; counts calls; thread-safe."""

    def __init__(self, pages: dict[str, RenderResult | Exception], delay_s: float = 0.01) -> None:
        self.pages = pages
        self.delay_s = delay_s
        self.calls: list[tuple[str, bool]] = []
        self.closed = False
        self._lock = threading.Lock()

    async def arender(self, html: str, *, cache: bool = False) -> RenderResult:
        with self._lock:
            self.calls.append((html, cache))
        await asyncio.sleep(self.delay_s)
        result = self.pages[html]
        if isinstance(result, Exception):
            raise result
        return result

    def close(self) -> None:
        self.closed = True


class CountingEmbedder:
    """TestEmbedder that records each batch size and can be told to fail on one image."""

    def __init__(self, fail_on: bytes | None = None) -> None:
        self.inner = TestEmbedder(grid=8)
        self.name = self.inner.name
        self.batches: list[int] = []
        self.fail_on = fail_on

    def embed(self, images: Sequence[bytes]) -> Any:
        self.batches.append(len(images))
        if self.fail_on is not None and self.fail_on in images:
            raise RuntimeError("embedder exploded")
        return self.inner.embed(images)


def ok(png: bytes) -> RenderResult:
    return RenderResult(png, "ok")


PNG_REF = encode_png(page_like(seed=0))
PNG_NEAR = encode_png(page_like(seed=0, header=(236, 72, 153)))
PNG_FAR = encode_png(page_like(seed=5, header=(30, 64, 175)))
REF, NEAR, FAR, SLOW, CRASH, GONE = (
    f"<html><body>{name}</body></html>" for name in ("ref", "near", "far", "slow", "crash", "gone")
)
STUB_PAGES: dict[str, RenderResult | Exception] = {
    REF: ok(PNG_REF),
    NEAR: ok(PNG_NEAR),
    FAR: ok(PNG_FAR),
    SLOW: RenderResult(None, "timeout", "loading the page did not finish within 4 s"),
    CRASH: RenderResult(None, "error", "render failed: Target crashed"),
    GONE: InfraError("could not start Chromium (/usr/bin/chromium): exited"),
}


def stub_scorer(
    pages: dict[str, RenderResult | Exception] | None = None, **kwargs: Any
) -> tuple[FrontendScorer, StubRenderer]:
    renderer = StubRenderer(pages or STUB_PAGES)
    kwargs.setdefault("embedder", CountingEmbedder())
    return FrontendScorer(renderer, **kwargs), renderer  # type: ignore[arg-type]


def test_pipeline_statuses_and_floors() -> None:
    scorer, _ = stub_scorer()
    task = frontend_task(REF)
    answers = [
        answer(REF),
        answer(NEAR),
        answer(FAR),
        "Could you tell me more about the colours?",
        answer(SLOW),
        answer(CRASH),
        answer(GONE),
    ]
    same, near, far, none, slow, crash, gone = scorer.score_many([(task, a) for a in answers])
    assert (same.status, same.answer_render_status) == ("ok", "ok")
    assert same.similarity == pytest.approx(1.0, abs=1e-6)
    assert 1.0 > near.similarity > far.similarity
    assert (none.status, none.similarity, none.answer_render_status) == ("no_answer", FLOOR, None)
    assert (slow.status, slow.similarity, slow.answer_render_status) == ("render_failed", 0.0, "timeout")
    assert "within 4 s" in (slow.error or "")
    assert (crash.status, crash.similarity, crash.answer_render_status) == ("render_failed", 0.0, "error")
    assert (
        gone.status == "infra_error"
        and math.isnan(gone.similarity)
        and "could not start Chromium" in (gone.error or "")
    )
    assert {s.embedder for s in (same, none, gone)} == {scorer.embedder.name}


@pytest.mark.parametrize("reference", [SLOW, CRASH, GONE])
def test_a_reference_that_does_not_render_is_an_infra_error_for_every_answer(reference: str) -> None:
    scorer, _ = stub_scorer()
    task = frontend_task(reference)
    results = scorer.score_many([(task, answer(REF)), (task, "no page"), (task, answer(SLOW))])
    assert [r.status for r in results] == ["infra_error"] * 3
    assert all(math.isnan(r.similarity) and r.result_row("x")["similarity"] is None for r in results)
    assert all("reference page" in (r.error or "") for r in results)


def test_an_embedder_failure_is_an_infra_error_for_that_answer_only() -> None:
    scorer, _ = stub_scorer(embedder=CountingEmbedder(fail_on=PNG_FAR))
    task = frontend_task(REF)
    near, far = scorer.score_many([(task, answer(NEAR)), (task, answer(FAR))])
    assert near.status == "ok"
    assert far.status == "infra_error" and "embedder exploded" in (far.error or "")
    scorer, _ = stub_scorer(embedder=CountingEmbedder(fail_on=PNG_REF))
    assert scorer.score(task, answer(NEAR)).status == "infra_error"


def test_references_render_once_and_embeddings_are_batched_and_cached() -> None:
    embedder = CountingEmbedder()
    scorer, renderer = stub_scorer(embedder=embedder, concurrency=8)
    tasks = [frontend_task(REF, "a"), frontend_task(REF, "a2"), frontend_task(FAR, "b")]
    pairs = [(task, answer(html)) for task in tasks for html in (REF, NEAR, FAR) * 3]
    results = scorer.score_many(pairs)
    assert all(r.status == "ok" for r in results)
    references = [html for html, cache in renderer.calls if cache]
    assert sorted(references) == sorted([REF, FAR])  # one render per reference page, with the renderer's cache on
    # each screenshot embedded once; an answer identical to its task's reference is judged on the reference's own
    identical = [task.ground_truth.strip() in text for task, text in pairs]
    assert sum(identical) == 9 and sum(embedder.batches) == len(pairs) - sum(identical) + 2
    selves = {
        (task.task_id, r.similarity) for (task, _), r, same in zip(pairs, results, identical, strict=True) if same
    }
    assert len(selves) == 3 and all(abs(similarity - 1) < 1e-9 for _, similarity in selves)  # one value a task
    assert len(embedder.batches) < len(pairs) / 2  # ... in batches
    assert max(embedder.batches) <= scorer.batch_size
    renderer.calls.clear()
    again = scorer.score_many(pairs[:3])
    assert [html for html, cache in renderer.calls if cache] == []  # the reference embedding is kept
    assert [r.similarity for r in again] == [r.similarity for r in results[:3]]


def test_embedding_overlaps_rendering() -> None:
    """Renders take 0.1 s each, one at a time; embedding takes 0.08 s per image. In series, 9 pages would take 1.6 s;
    overlapped, about the render time plus one embedding."""
    import time

    class SlowEmbedder(CountingEmbedder):
        def embed(self, images: Sequence[bytes]) -> Any:
            time.sleep(0.08 * len(images))
            return super().embed(images)

    pages: dict[str, RenderResult | Exception] = {REF: ok(PNG_REF)}
    pages.update({f"<html><body>{i}</body></html>": ok(PNG_NEAR) for i in range(8)})
    renderer = StubRenderer(pages, delay_s=0.1)
    scorer = FrontendScorer(renderer, SlowEmbedder(), concurrency=1)  # type: ignore[arg-type]
    task = frontend_task(REF)
    started = time.perf_counter()
    results = scorer.score_many([(task, answer(html)) for html in pages if html != REF])
    elapsed = time.perf_counter() - started
    assert all(r.status == "ok" for r in results)
    serial = 9 * 0.1 + 9 * 0.08
    assert elapsed < 0.8 * serial, elapsed


def test_score_rendered_scores_a_finished_render() -> None:
    scorer, renderer = stub_scorer()
    task = frontend_task(REF)
    assert scorer.score_rendered(task, ok(PNG_REF)).similarity == pytest.approx(1.0, abs=1e-6)
    assert scorer.score_rendered(task, None).status == "no_answer"
    assert scorer.score_rendered(task, RenderResult(None, "empty", "no HTML to render")).status == "no_answer"
    assert scorer.score_rendered(task, STUB_PAGES[SLOW]).status == "render_failed"  # type: ignore[arg-type]
    assert [cache for _, cache in renderer.calls] == [True]  # only the reference was rendered


def test_sync_api_inside_a_running_event_loop_and_async_api() -> None:
    scorer, _ = stub_scorer()
    task = frontend_task(REF)

    async def main() -> tuple[FrontendScore, list[FrontendScore]]:
        inside = scorer.score(task, answer(NEAR))  # sync call from async code: runs on a helper thread
        gathered = await asyncio.gather(*(scorer.ascore(task, answer(h)) for h in (REF, NEAR, FAR)))
        return inside, list(gathered)

    inside, gathered = asyncio.run(main())
    assert inside.status == "ok"
    assert [r.status for r in gathered] == ["ok"] * 3
    assert gathered[0].similarity > gathered[1].similarity > gathered[2].similarity


def test_bad_inputs() -> None:
    scorer, renderer = stub_scorer()
    backend = Task("b", "backend", "Write f.", "def f(): pass", "", test_cases=(("t", "f()"),))
    with pytest.raises(DataError, match="backend task"):
        scorer.score(backend, answer(REF))
    with pytest.raises(DataError, match="not text"):
        scorer.score(frontend_task(REF), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="concurrency"):
        FrontendScorer(renderer, "test", concurrency=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown embedder"):
        FrontendScorer(renderer, "clip-tiles")  # type: ignore[arg-type]
    scorer.close()
    assert not renderer.closed  # a renderer passed in belongs to the caller


# -- real pages in headless Chromium ---------------------------------------------------------------------------------

_BG = re.compile(r"\bbg-(red|green|blue|gray|yellow|indigo|purple|pink|teal|orange)-(\d00)\b")
_BODY = re.compile(r"<body[^>]*>", re.IGNORECASE)


def perturb(html: str) -> str:
    """A similar page: the first coloured block after <body> recoloured (or, without one, a block laid over the top
    left corner). Layout does not move, as when an agent gets one colour wrong."""
    body = _BODY.search(html)
    start = body.end() if body else 0
    found = _BG.search(html, start)
    if found:
        colour = "pink" if found.group(1) != "pink" else "teal"
        return f"{html[: found.start()]}bg-{colour}-{found.group(2)}{html[found.end() :]}"
    block = '<div style="position:absolute;top:0;left:0;width:320px;height:160px;background:#c026d3"></div>'
    return html[:start] + block + html[start:]


@pytest.fixture(scope="module")
def sample_tasks() -> list[Task]:
    if not SHARED_FRONTEND.exists():
        pytest.skip(
            f"the ColBench frontend sample is not present at {SHARED_FRONTEND} (../shared is only on development machines)"
        )
    return load_jsonl(SHARED_FRONTEND)


@pytest.fixture(scope="module")
def browser_scorer() -> Iterator[FrontendScorer]:
    with renderer_or_skip(CONFIG, cache_size=16) as renderer, FrontendScorer(renderer, "test", concurrency=4) as scorer:
        yield scorer


@pytest.mark.browser
def test_real_pages_rank_identical_over_similar_over_unrelated(
    browser_scorer: FrontendScorer, sample_tasks: list[Task]
) -> None:
    tasks = [sample_tasks[i] for i in (0, 3, 8, 16)]  # body colour, header colour, no colour class, navigation bar
    pairs = []
    for i, task in enumerate(tasks):
        unrelated = tasks[(i + 1) % len(tasks)].ground_truth
        pairs += [
            (task, answer(task.ground_truth)),
            (task, answer(perturb(task.ground_truth))),
            (task, answer(unrelated)),
        ]
    results = browser_scorer.score_many(pairs)
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.status != "ok"]
    for i, task in enumerate(tasks):
        same, similar, unrelated = (r.similarity for r in results[3 * i : 3 * i + 3])
        assert same == pytest.approx(1.0, abs=1e-6), task.task_id
        assert same > similar > unrelated, (task.task_id, same, similar, unrelated)


@pytest.mark.browser
def test_real_pages_without_answer_or_that_never_load_get_the_floor(
    browser_scorer: FrontendScorer, sample_tasks: list[Task]
) -> None:
    task = sample_tasks[0]
    loop_forever = "<html><body><h1>Hi</h1><script>while (true) {}</script></body></html>"
    none, hangs = browser_scorer.score_many([(task, "What colour should the header be?"), (task, answer(loop_forever))])
    assert (none.status, none.similarity) == ("no_answer", 0.0)
    assert (hangs.status, hangs.similarity, hangs.answer_render_status) == ("render_failed", 0.0, "timeout")
    assert hangs.result_row(task.task_id) == {
        "task_id": task.task_id,
        "similarity": 0.0,
        "status": "render_failed",
        "error": hangs.error,
        "env_id": "ColBench-Frontend-v0",
    }
