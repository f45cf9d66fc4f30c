"""Frontend scoring: render the agent's page and the reference page, embed both, take the cosine similarity.

Semantics (docs/frontend.md has the reasons):

* The page an answer delivers is ``extract_html(answer_text)`` (``colbench.domains.frontend.extract``).
* ``similarity`` is the cosine of the two pages' embeddings (``colbench.domains.frontend.embed``; CLIP ViT-B-32 by
  default), rounded to [-1, 1].
* Floor: an answer with no page (``no_answer``) or whose page does not render (``render_failed``: timeout, crash,
  empty) scores 0.0. The original release rendered a black 224x224 image instead, and CLIP rates a black square as
  fairly similar to many pages, so an agent got a reward for answering nothing. 0.0 is below what any two rendered
  pages get from CLIP in practice.
* ``reward="visual"`` (ColBench-Frontend-v1): both pages are rendered with their visible blocks
  (``Renderer.arender(blocks=True)``, the same render as the screenshot) and the reward is Design2Code's five metrics
  (``visual_metrics``): block-match, text, position, colour, and CLIP on the screenshots with their text painted
  over. ``similarity`` stays the plain CLIP cosine (HAL's success rule is ``similarity >= 0.8``); an answer without
  a renderable page scores 0 on every part.
* ``infra_error`` (no similarity at all, never a score for the agent): the reference page does not render, Chromium
  does not start, or the embedder fails. It takes priority over the other statuses: a task whose reference cannot
  be rendered cannot be judged, whatever the answer.

Throughput: renders run concurrently (``Renderer.arender``, ``concurrency`` at a time) and each finished
screenshot joins the next embedding batch, computed in a worker thread while further pages render. Reference
screenshots are cached by the renderer (``cache=True``) and reference embeddings here, per page content.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from cachetools import LRUCache

from colbench._util.storage import sha256_text
from colbench.domains.frontend import VISUAL_SUCCESS_THRESHOLD
from colbench.domains.frontend.embed import Embedder, make_embedder
from colbench.domains.frontend.extract import extract_html
from colbench.domains.frontend.visual_metrics import SUBSCORES, compare_blocks, visual_reward
from colbench.env.versions import env_id_for
from colbench.errors import ConfigError, DataError
from colbench.render import PageBlock, Renderer, RenderResult, RenderStatus
from colbench.render.inpaint import paint_over_text
from colbench.types.task import Task

FrontendStatus = Literal["ok", "no_answer", "render_failed", "infra_error"]
RewardMode = Literal["clip", "visual"]
REWARD_MODES: tuple[RewardMode, ...] = ("clip", "visual")
"""``clip``: the cosine of the two screenshots (ColBench-Frontend-v0); ``visual``: Design2Code's five metrics
(``visual_metrics``; ColBench-Frontend-v1)."""
FLOOR = 0.0
"""The similarity of an answer without a renderable page."""

_T = TypeVar("_T")


def cosine(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cosine similarity of two vectors, clipped to [-1, 1]; 0.0 when either is all zeros."""
    x = np.asarray(a, np.float64).ravel()
    y = np.asarray(b, np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"cosine of vectors of different sizes: {x.size} and {y.size}")
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    if norms == 0.0:
        return 0.0
    return float(min(1.0, max(-1.0, float(x @ y) / norms)))


@dataclass(frozen=True)
class FrontendScore:
    """The scoring record of one answer.

    ``similarity`` is NaN for ``infra_error`` (no score at all: NaN poisons any mean it slips into, where a 0 would
    quietly count as the agent's) and is written as ``null`` in result rows. ``env_id``: the env id whose scoring
    produced it (None from a scorer outside colbench's versions).
    """

    similarity: float
    status: FrontendStatus
    error: str | None = None
    answer_render_status: RenderStatus | None = None
    embedder: str = ""
    env_id: str | None = None
    visual: VisualScore | None = None
    """ColBench-Frontend-v1's reward and its parts (None for v0, whose reward is ``similarity``)."""

    @property
    def judged(self) -> bool:
        """Whether this is a score for the agent (every status but ``infra_error``)."""
        return self.status != "infra_error"

    @property
    def reward(self) -> float:
        return self.visual.reward if self.visual is not None else self.similarity

    @property
    def success(self) -> bool | None:
        """v1: the reward reaches ``VISUAL_SUCCESS_THRESHOLD``; v0: pages are not right or wrong, only more or less
        similar, so None."""
        if self.visual is None:
            return None
        return self.judged and self.visual.reward >= VISUAL_SUCCESS_THRESHOLD

    def result_row(self, task_id: str) -> dict[str, Any]:
        """The CLI's result row: ``{"task_id", "similarity", "status", "error", "env_id"}`` (similarity null when not
        judged); a v1 score adds ``reward``, ``success``, ``embedder`` and its five parts as columns of their own."""
        similarity = self.similarity if self.judged else None
        row: dict[str, Any] = {
            "task_id": task_id,
            "similarity": similarity,
            "status": self.status,
            "error": self.error,
            "env_id": self.env_id,
        }
        if self.visual is not None:
            judged = self.judged
            row["reward"] = self.visual.reward if judged else None
            row["success"] = self.success if judged else None
            row["embedder"] = self.embedder
            row.update({name: (value if judged else None) for name, value in self.visual.subscores.items()})
        return row

    def details(self) -> dict[str, Any]:
        """The result row without ``task_id``, plus the agent page's render status and the embedder; a v1 score
        also holds ``subscores`` and ``blocks`` (both pages' blocks and the matches: what a viewer draws)."""
        row = self.result_row("")
        del row["task_id"]
        details = {**row, "answer_render_status": self.answer_render_status, "embedder": self.embedder}
        if self.visual is not None:
            for name in self.visual.subscores:
                del details[name]
            details["subscores"] = dict(self.visual.subscores) if self.judged else None
            details["blocks"] = self.visual.blocks
            if self.visual.note:
                details["note"] = self.visual.note
        return details


@dataclass(frozen=True)
class VisualScore:
    """What ColBench-Frontend-v1 adds to a score: the reward, its five parts (``visual_metrics.SUBSCORES``), and the
    blocks it compared, as records (``{"reference": [...], "answer": [...], "matches": [[ref, answer, similarity]]}``,
    ``PageBlock.as_record``), so a viewer can draw matched and unmatched blocks without rendering again."""

    reward: float
    subscores: Mapping[str, float]
    blocks: Mapping[str, Any] | None = None
    note: str | None = None

    @classmethod
    def floor(cls, note: str) -> VisualScore:
        """An answer without a page, or whose page did not render: every part 0."""
        return cls(0.0, dict.fromkeys(SUBSCORES, 0.0), None, note)


# -- the scorer --------------------------------------------------------------------------------------------------------


Embedding = npt.NDArray[np.float32]


class _Batcher:
    """Collects screenshots from concurrent coroutines and embeds them in batches on one worker thread: whatever
    arrived while the previous batch ran forms the next one (up to ``batch_size``), so nobody waits for a full
    batch and embedding overlaps rendering."""

    def __init__(self, embedder: Embedder, executor: concurrent.futures.Executor, batch_size: int) -> None:
        self._embedder = embedder
        self._executor = executor
        self._batch_size = batch_size
        self._pending: list[tuple[bytes, asyncio.Future[Embedding]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def embed(self, png: bytes) -> Embedding:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Embedding] = loop.create_future()
        self._pending.append((png, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending[: self._batch_size], self._pending[self._batch_size :]
            images = [png for png, _ in batch]
            try:
                rows = await loop.run_in_executor(self._executor, self._embed_checked, images)
                results: list[Embedding | BaseException] = list(rows)
            except Exception as batch_error:
                if len(batch) == 1:
                    results = [batch_error]
                else:  # find the image at fault: embed one by one, so one bad image fails only its own task
                    results = []
                    for png in images:
                        try:
                            results.append((await loop.run_in_executor(self._executor, self._embed_checked, [png]))[0])
                        except Exception as error:
                            results.append(error)
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    def _embed_checked(self, images: list[bytes]) -> Embedding:
        rows = np.asarray(self._embedder.embed(images), np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(images):
            raise ValueError(f"embedder {self._embedder.name!r} returned shape {rows.shape} for {len(images)} images")
        return rows


@dataclass
class _LoopState:
    """What lives on one event loop: the batcher and the reference embeddings being computed right now."""

    batcher: _Batcher
    renders: asyncio.Semaphore
    references: dict[str, asyncio.Future[_Page]] = field(default_factory=dict)


class _ReferenceError(Exception):
    """The reference page could not be rendered or embedded: the task cannot be judged."""


def _run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from sync code, also when the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="colbench-score") as pool:
        return pool.submit(asyncio.run, coro).result()


class FrontendScorer:
    """Scores frontend answers against their task's reference page (see the module docstring).

    ``renderer``: a shared ``Renderer`` (None = one of its own, closed with the scorer). ``embedder``: an Embedder
    or a spec for ``make_embedder`` (``"clip"``, ``"clip-center-crop"``, ``"clip:PATH"``, ``"test"``).
    ``concurrency``: renders in flight at once; ``batch_size``: most screenshots per embedding call;
    ``reference_cache_size``: reference embeddings kept in memory. Thread-safe; usable from sync and async code.
    """

    def __init__(
        self,
        renderer: Renderer | None = None,
        embedder: Embedder | str = "clip",
        *,
        reward: RewardMode = "clip",
        concurrency: int = 4,
        batch_size: int = 32,
        reference_cache_size: int = 10_000,
    ) -> None:
        if reward not in REWARD_MODES:
            raise ConfigError(f"frontend reward {reward!r}: expected one of {', '.join(REWARD_MODES)}")
        if concurrency < 1 or batch_size < 1 or reference_cache_size < 0:
            raise ConfigError(
                f"concurrency and batch_size must be >= 1 and reference_cache_size >= 0, "
                f"got {concurrency}, {batch_size}, {reference_cache_size}"
            )
        self.embedder: Embedder = make_embedder(embedder) if isinstance(embedder, str) else embedder
        self._owns_renderer = renderer is None
        self.renderer = renderer if renderer is not None else Renderer()
        self.concurrency = concurrency
        self.batch_size = batch_size
        self._references: LRUCache[str, _Page] | None = (
            LRUCache(maxsize=reference_cache_size) if reference_cache_size > 0 else None
        )
        self._lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="colbench-embed")
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self.reward_mode: RewardMode = reward
        self.env_id = env_id_for("frontend", {"reward": reward})

    # -- public API -----------------------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """run.json's ``scoring``: the embedder's name (model, weights, preprocessing: it filled the CLIP term) and
        the env id of the scoring."""
        return {"embedder": str(self.embedder.name), "env_id": self.env_id}

    def score(self, task: Task, answer_text: str) -> FrontendScore:
        """Score one answer (the agent's final message)."""
        return self.score_many([(task, answer_text)])[0]

    def score_many(self, pairs: Iterable[tuple[Task, str]]) -> list[FrontendScore]:
        """Score ``(task, answer_text)`` pairs, in order, with rendering and embedding overlapped."""
        return _run_sync(self.ascore_many(pairs))

    async def ascore(self, task: Task, answer_text: str) -> FrontendScore:
        """``score`` for async callers; concurrent calls on one event loop share embedding batches."""
        return (await self.ascore_many([(task, answer_text)]))[0]

    async def ascore_many(self, pairs: Iterable[tuple[Task, str]]) -> list[FrontendScore]:
        """``score_many`` for async callers."""
        jobs = list(pairs)
        for task, answer in jobs:
            if task.domain != "frontend":
                raise DataError(f"task {task.task_id!r} is a {task.domain} task, not a frontend one")
            if not isinstance(answer, str):
                raise DataError(f"the answer to task {task.task_id!r} is {type(answer).__name__}, not text")
        state = self._state()
        return list(await asyncio.gather(*(self._score(state, task, extract_html(answer)) for task, answer in jobs)))

    def score_rendered(self, task: Task, page: RenderResult | None) -> FrontendScore:
        """Score a page rendered already (by this scorer's renderer or one with the same ``RenderConfig``);
        None (or an ``empty`` render) = the answer had no page."""
        return _run_sync(self.ascore_rendered(task, page))

    async def ascore_rendered(self, task: Task, page: RenderResult | None) -> FrontendScore:
        """``score_rendered`` for async callers."""
        if task.domain != "frontend":
            raise DataError(f"task {task.task_id!r} is a {task.domain} task, not a frontend one")
        return await self._score(self._state(), task, page)

    def close(self) -> None:
        """Stop the embedding thread and, when the scorer made it, the renderer; idempotent."""
        self._executor.shutdown(wait=True)
        if self._owns_renderer:
            self.renderer.close()

    def __enter__(self) -> FrontendScorer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.get(loop)
            if state is None:
                batcher = _Batcher(self.embedder, self._executor, self.batch_size)
                state = self._loops[loop] = _LoopState(batcher, asyncio.Semaphore(self.concurrency))
            return state

    async def _score(self, state: _LoopState, task: Task, page: str | RenderResult | None) -> FrontendScore:
        """Score one page: HTML still to render, a finished render, or None (the answer has no page)."""
        return replace(await self._judge(state, task, page), env_id=self.env_id)

    async def _judge(self, state: _LoopState, task: Task, page: str | RenderResult | None) -> FrontendScore:
        name = self.embedder.name
        reference = asyncio.shield(self._reference(state, task.ground_truth))  # shared with other answers to the task
        expected: _Page | BaseException
        answered: tuple[RenderStatus, str | None, _Page | None] | BaseException | None
        if isinstance(page, str) and page.strip() == task.ground_truth.strip():
            # The reference's own page is judged as the reference: one render, so an identical answer scores exactly
            # what the reference scores against itself, whatever the machine's load did to a second render.
            try:
                expected = await reference
            except Exception as exc:
                expected = exc
            answered = None if isinstance(expected, BaseException) else ("ok", None, expected)
        else:
            expected, answered = await asyncio.gather(reference, self._answer(state, page), return_exceptions=True)
        if isinstance(expected, BaseException):
            return FrontendScore(math.nan, "infra_error", _describe(expected), embedder=name)
        if isinstance(answered, BaseException):
            return FrontendScore(math.nan, "infra_error", _describe(answered), embedder=name)
        visual = self.reward_mode == "visual"
        if answered is None:
            why = "the answer contains no HTML page"
            return FrontendScore(
                FLOOR, "no_answer", why, embedder=name, visual=VisualScore.floor(why) if visual else None
            )
        render_status, render_error, got = answered
        if got is None:
            error = f"the answer's page did not render ({render_status}): {render_error}"
            floor = VisualScore.floor(error) if visual else None
            return FrontendScore(FLOOR, "render_failed", error, render_status, name, visual=floor)
        similarity = cosine(got.embedding, expected.embedding)
        return FrontendScore(
            similarity, "ok", None, render_status, name, visual=_visual(expected, got) if visual else None
        )

    async def _answer(
        self, state: _LoopState, page: str | RenderResult | None
    ) -> tuple[RenderStatus, str | None, _Page | None] | None:
        """Render (unless done) and embed the agent's page: (render status, render error, the embedded page or None);
        None when there is no page at all."""
        if page is None or (isinstance(page, str) and not page.strip()):
            return None
        visual = self.reward_mode == "visual"
        if isinstance(page, str):
            async with state.renders:
                page = await self.renderer.arender(page, **self._render_options)
        elif visual and page.status == "ok" and page.blocks is None:
            raise _EmbedderFailed("the answer's page was rendered without its blocks: render it with blocks=True")
        if page.status == "empty":
            return None
        if page.status != "ok" or page.png is None:
            return page.status, page.error, None
        try:
            return "ok", None, await self._embed_page(state, page)
        except Exception as exc:
            raise _EmbedderFailed(f"the embedder {self.embedder.name!r} failed: {_describe(exc)}") from exc

    @property
    def _render_options(self) -> dict[str, Any]:
        """The visual reward reads the pages' blocks in their render; CLIP alone asks for the screenshot only."""
        return {"blocks": True} if self.reward_mode == "visual" else {}

    async def _embed_page(self, state: _LoopState, page: RenderResult) -> _Page:
        """The page's embedding and, for the visual reward, its blocks and the embedding of its screenshot with the
        text painted over (both embeddings join the same batch)."""
        assert page.png is not None
        if self.reward_mode != "visual":
            return _Page(await state.batcher.embed(page.png))
        blocks = page.blocks or ()
        painted = await asyncio.to_thread(paint_over_text, page.png, blocks)
        plain, painted_embedding = await asyncio.gather(state.batcher.embed(page.png), state.batcher.embed(painted))
        return _Page(plain, painted_embedding, tuple(blocks), page.size or (0, 0), page.blocks_note)

    def _reference(self, state: _LoopState, html: str) -> asyncio.Future[_Page]:
        """The reference page embedded: from the cache, from a computation in flight, or a new one."""
        key = f"{sha256_text(html)}/{self.reward_mode}"
        with self._lock:
            cached = self._references.get(key) if self._references is not None else None
        loop = asyncio.get_running_loop()
        if cached is not None:
            done: asyncio.Future[_Page] = loop.create_future()
            done.set_result(cached)
            return done
        pending = state.references.get(key)
        if pending is None:
            pending = state.references[key] = asyncio.ensure_future(self._embed_reference(state, key, html))

            def forget(future: asyncio.Future[_Page]) -> None:
                state.references.pop(key, None)
                if not future.cancelled():
                    future.exception()  # retrieved: every waiter gets it; no "never retrieved" warning

            pending.add_done_callback(forget)
        return pending

    async def _embed_reference(self, state: _LoopState, key: str, html: str) -> _Page:
        try:
            async with state.renders:
                rendered = await self.renderer.arender(html, cache=True, **self._render_options)
        except Exception as exc:
            raise _ReferenceError(f"could not render the reference page: {_describe(exc)}") from exc
        if rendered.status != "ok" or rendered.png is None:
            raise _ReferenceError(f"the reference page did not render ({rendered.status}): {rendered.error}")
        try:
            embedded = await self._embed_page(state, rendered)
        except Exception as exc:
            raise _ReferenceError(f"the embedder {self.embedder.name!r} failed: {_describe(exc)}") from exc
        with self._lock:
            if self._references is not None:
                self._references[key] = embedded
        return embedded


@dataclass(frozen=True)
class _Page:
    """A rendered page as the scorer compares it: its screenshot's embedding and, for the visual reward, the
    embedding of the screenshot with its text painted over, its blocks, its size and what reading them cut."""

    embedding: Embedding
    painted: Embedding | None = None
    blocks: tuple[PageBlock, ...] = ()
    size: tuple[int, int] = (0, 0)
    note: str | None = None


def _visual(reference: _Page, answer: _Page) -> VisualScore:
    """ColBench-Frontend-v1's comparison of two embedded pages (``visual_metrics``)."""
    assert reference.painted is not None and answer.painted is not None
    comparison = compare_blocks(reference.blocks, answer.blocks, reference.size, answer.size)
    subscores = comparison.subscores(cosine(reference.painted, answer.painted))
    blocks = {
        "reference": [b.as_record() for b in reference.blocks],
        "answer": [b.as_record() for b in answer.blocks],
        "matches": [m.as_record() for m in comparison.matches],
    }
    notes = [n for n in (comparison.note, _cut("reference", reference.note), _cut("answer", answer.note)) if n]
    return VisualScore(visual_reward(subscores), subscores, blocks, "; ".join(notes) or None)


def _cut(which: str, note: str | None) -> str | None:
    return f"{which} page: {note}" if note else None


class _EmbedderFailed(Exception):
    """The embedder raised on the agent's screenshot (an infrastructure error, not the agent's)."""


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if isinstance(exc, _EmbedderFailed | _ReferenceError) else f"{type(exc).__name__}: {text}".rstrip(": ")
