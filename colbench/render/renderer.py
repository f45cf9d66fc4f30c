"""Render an HTML page to a PNG screenshot with Playwright driving headless Chromium, offline and bounded.

Policy (fixed per ``RenderConfig``; the defaults are what scores are computed with):

- **Browser.** One long-lived headless Chromium (the system's ``/usr/bin/chromium`` via ``executable_path``, since
  Playwright's own browser download is not possible everywhere), relaunched when it has died or had to be killed.
  At most ``concurrency`` pages render at once (default 2, one per core of a small machine), each in its own
  browser context; further renders wait their turn.
- **Two kinds of page.** A page is *static* when nothing in its HTML can run script (``is_static``: no ``<script>``,
  ``<noscript>``, event-handler attribute, ``javascript:`` URL, meta refresh, ``scripting`` media query or frame
  with a document of its own (``srcdoc``, ``data:``), also after character references are decoded). All 150 pages
  of the ColBench frontend sample are static.

  - A static page renders with JavaScript switched off in a reusable context: ``concurrency`` such contexts at most,
    each replaced after ``renders_per_context`` pages and whenever a render does not end ``ok``. Without script a
    page can keep no state and start nothing: it cannot write cookies or storage, register a service worker, set a
    timer, open a popup or navigate (a meta refresh makes a page non-static), and every render is a navigation to a
    new document, so the next page finds the context as the previous one did: the same origin, empty storage, the
    visited-link set holding only ``PAGE_URL`` (as in a fresh context), no scroll offset (tests render pages after
    an autofocus-scrolled one, in any order, concurrency and context, and compare bytes with a fresh context; and
    show that a script cannot run there). Only class names written in the HTML can then match a Tailwind rule, so
    the stylesheet served to a static page is trimmed to the rules its class names can match
    (``colbench.render.stylesheet``; the screenshot is byte-identical to one with the whole 2.9 MB sheet, which a
    test checks on the ColBench sample). With scripting off Chromium loads ``loading=lazy`` images at once, so they
    show in a full-page screenshot instead of depending on when the page scrolled.
  - Any other page renders with JavaScript on, in a fresh browser context of its own that is closed afterwards
    (nothing a script leaves behind outlives its page), with the whole stylesheet.
- **Viewport.** 1280x720 CSS px at device scale 1, light colour scheme, ``prefers-reduced-motion: reduce``, locale
  en-US, time zone UTC.
- **Screenshot.** The full page, 1280 px wide, as tall as the document but at least the viewport (720 px) and at most
  ``max_height`` (2560 px): a tall page is cut at the bottom, so memory and embedding cost stay bounded. The
  original ColBench took a full-page screenshot with Selenium's headless Firefox and no window size (Firefox's default
  window, unbounded height); widths, fonts and the engine therefore differ, which shifts absolute CLIP similarities a
  little but treats the agent's and the reference page identically. The page's animation clock is stopped from the
  start (also for the browser's own animations inside form and media controls, such as a video's loading spinner),
  and for the screenshot CSS animations and transitions are disabled (as Playwright's ``animations="disabled"``:
  finite ones jump to their end state, infinite ones are cancelled), the caret is hidden and web fonts are waited
  for. Static pages are captured with Chromium's fast PNG encoder (``optimizeForSpeed``: larger files, the same
  pixels); the same HTML always gives the same bytes.
- **Network.** Every request is routed. The page itself is served once at ``PAGE_URL``; the Tailwind 2.2.19 CDN
  stylesheets are answered from the local copy (``Cache-Control: no-store``: a trimmed sheet is never reused for
  another page); placeholder-image hosts get a deterministic PNG of the requested size (see
  ``colbench.render.placeholder``); every other request (other hosts, 127.0.0.1, ``file://``) is aborted.
  Navigations a page starts itself (``location``, links, form submissions) are cancelled inside the page before they
  leave it (the Navigation API's ``navigate`` event, from a script that runs before the page's own), so a script in
  ``<head>`` that navigates before the first paint no longer stops the parser; any navigation that still reaches
  the router (meta refresh, a reload) is answered ``204 No Content``, so the page stays where it is (an abort would
  replace it with an error page). As a second wall Chromium runs with a proxy on a dead local port that loopback
  does not bypass, and host names resolve to nothing, so a request that escaped routing (WebSocket, prefetch) still
  cannot connect anywhere. Service workers are blocked.
- **Dialogs and popups.** ``alert``/``confirm``/``prompt``/``print``/``window.open`` are replaced by no-ops before
  any page script runs; a dialog that still appears is dismissed; a popup page is closed at once.
- **Time.** Every render is bounded by the load timeout (10 s) and the screenshot timeout (10 s), a scripted page's
  JavaScript included; opening the page and closing its context are bounded by ``close_timeout_s`` (5 s). After a
  timeout or error the page's context is closed; if that does not finish in time, the browser process is killed and
  relaunched for the next page. A runaway script therefore costs at most one timeout and never hangs the harness. A
  reused context that fails with an error (the browser was killed between two renders) is replaced and the page
  rendered once more in a fresh one.

Results: ``RenderResult.status`` is ``ok`` (png set), ``timeout`` (load or screenshot ran out of time), ``error``
(the page crashed or Chromium refused it; message set) or ``empty`` (no HTML given: nothing is rendered). A failure
to start the browser at all is an ``InfraError`` (never a page's fault); a missing Playwright or Chromium is a
``ConfigError`` saying how to install it. ``duration_s`` counts from when the render got its turn.

Cost (2-core machine, ColBench sample): a static page takes about 0.14 CPU-s in all (Chromium's navigation, layout
and capture; Playwright and Python about 0.02 s), against about 1.3 CPU-s with a fresh context and the whole sheet,
which a scripted page still costs.

**Blocks.** ``render(html, blocks=True)`` (or ``RenderConfig(blocks=True)``) also reads the page's visible blocks
(``RenderResult.blocks``: text runs, images, coloured boxes, as ``colbench.render.blocks.PageBlock``) in the same
render, after the screenshot, from the same document: ``colbench.render.page_reader`` reads the DOM in a CDP isolated
world that the page's scripts cannot reach, and ``colbench.render.ink`` keeps only what the screenshot's pixels show
(docs/frontend.md, "Visual blocks"). A scripted page's scripts are stopped once it has loaded
(``Emulation.setScriptExecutionDisabled``), before the screenshot, so the screenshot and the reading show one page
(without ``blocks`` they keep running, as before). Reading is bounded (nodes walked, line boxes, characters, hit-test
time, blocks kept: ``RenderResult.blocks_note`` says what a bound cut) and counts against the screenshot timeout.
It costs about 0.05 CPU-s per page of the ColBench sample (0.02 s in Chromium, 0.03 s of pixel checks in Python, run on
a worker thread after the page has given its turn back), measured by ``bench/render_blocks.py``; without ``blocks``
nothing of it runs.

Renders of reference pages can be cached: ``render(html, cache=True)`` looks up and stores successful results in an
LRU keyed by the SHA-256 of the HTML and whether blocks were read (a result without blocks never answers a caller
who asks for them; ``cache_size`` entries per renderer; 0 disables it).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import html as html_lib
import os
import re
import shutil
import signal
import struct
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from cachetools import LRUCache

from colbench._util.storage import sha256_text
from colbench.errors import ConfigError, InfraError
from colbench.render.blocks import PageBlock
from colbench.render.ink import confirm
from colbench.render.page_reader import SETTLE_ANIMATIONS_JS, PageReading, ReadError, read_page
from colbench.render.placeholder import TAILWIND_URL_RE, load_tailwind_css, placeholder_png, placeholder_size
from colbench.render.stylesheet import StylesheetIndex

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, CDPSession, Dialog, Page, Playwright, Request, Route

RenderStatus = Literal["ok", "timeout", "error", "empty"]

PAGE_URL = "https://page.colbench.invalid/"
"""Where the rendered HTML is served from (never resolved: the router answers it)."""

INSTALL_HINT = "install it with `apt-get install chromium` and `pip install 'colbench[frontend]'`"

# Runs before any page script in every frame of a scripted page's context.
_NEUTRALISE_JS = """(() => {
  const noop = () => undefined;
  window.alert = noop;
  window.print = noop;
  window.confirm = () => false;
  window.prompt = () => null;
  window.open = () => null;
  if (window === window.top && window.navigation) {
    window.navigation.addEventListener("navigate", (event) => { if (event.cancelable) event.preventDefault(); });
  }
})();"""

# What Playwright's screenshot(animations="disabled", caret="hide") does before capturing (finite animations jump to
# their end, infinite ones are cancelled, carets become transparent), then the wait for web fonts and the full-page
# size Playwright measures; evaluated in the page of a static render (no page script ever ran there).
_PREPARE_JS = (
    """(async () => {
  const roots = [];
  const collect = (root) => {
    roots.push(root);
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    do {
      const node = walker.currentNode;
      if (node instanceof Element && node.shadowRoot) collect(node.shadowRoot);
    } while (walker.nextNode());
  };
  collect(document);
  """
    + SETTLE_ANIMATIONS_JS
    + """
  for (const root of roots) {
    root.querySelectorAll("input,textarea,[contenteditable]").forEach((element) => {
      element.style.setProperty("caret-color", "transparent", "important");
    });
    settle(root);
    root.addEventListener("transitionrun", () => settle(root));
    root.addEventListener("animationstart", () => settle(root));
  }
  await document.fonts.ready;
  const body = document.body, root = document.documentElement;
  if (!body || !root) return null;
  const width = [body.scrollWidth, root.scrollWidth, body.offsetWidth, root.offsetWidth, body.clientWidth,
    root.clientWidth];
  const height = [body.scrollHeight, root.scrollHeight, body.offsetHeight, root.offsetHeight, body.clientHeight,
    root.clientHeight];
  return [Math.max(...width), Math.max(...height)];
})()"""
)

# Anything that lets a page run script, or behave differently when scripting is off (see ``is_static``).
_SCRIPTED_RE = re.compile(
    r"<(?:script|noscript|applet)\b"
    r"|javascript:|\bon[a-z]+\s*="
    r"|http-equiv\s*=\s*[\"']?\s*refresh"
    r"|\(\s*scripting\b"
)
# A frame whose document comes from the page itself (srcdoc, a data: URL) rather than through the router.
_FRAME_RE = re.compile(r"<(?:iframe|frame|object|embed|portal|fencedframe)\b")
_INLINE_DOCUMENT_RE = re.compile(r"\bsrcdoc\b|data:")


def is_static(html: str) -> bool:
    """True when nothing in ``html`` can run script, so it renders with scripting off and a trimmed stylesheet.

    Conservative: the HTML is lower-cased and searched as written and with character references decoded, for script
    and noscript elements, event-handler attributes (``on...=`` anywhere), ``javascript:`` URLs, meta refresh, the
    ``scripting`` media feature, and frames (iframe, object, embed ...) when the page also has a ``srcdoc`` or a
    ``data:`` URL (a frame loaded from elsewhere only ever gets 204 or a placeholder from the router). A false alarm
    only costs speed (the page renders as a scripted one).
    """
    lowered = html.lower()
    for text in (lowered, html_lib.unescape(lowered).lower()) if "&" in lowered else (lowered,):
        if _SCRIPTED_RE.search(text) or (_FRAME_RE.search(text) and _INLINE_DOCUMENT_RE.search(text)):
            return False
    return True


@dataclass(frozen=True)
class RenderConfig:
    """Everything that changes a screenshot or bounds a render; the defaults are the scoring policy.

    ``concurrency``: pages rendered at once (each in its own browser context); ``renders_per_context``: static
    pages rendered in one reused context before it is replaced (1 = a fresh context for every page). ``blocks``:
    whether a render reads the page's visible blocks when its caller does not say (``render(..., blocks=...)``).
    """

    width: int = 1280
    height: int = 720
    max_height: int = 2560
    load_timeout_s: float = 10.0
    screenshot_timeout_s: float = 10.0
    close_timeout_s: float = 5.0
    executable_path: str | None = None
    concurrency: int = 2
    renders_per_context: int = 200
    blocks: bool = False

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1 or self.max_height < self.height:
            raise ConfigError(
                f"render size must be positive with max_height >= height, got {self.width}x{self.height} "
                f"(max_height {self.max_height})"
            )
        if min(self.load_timeout_s, self.screenshot_timeout_s, self.close_timeout_s) <= 0:
            raise ConfigError("render timeouts must be positive")
        if self.concurrency < 1 or self.renders_per_context < 1:
            raise ConfigError(
                f"concurrency and renders_per_context must be >= 1, got {self.concurrency} and "
                f"{self.renders_per_context}"
            )


@dataclass
class _Document:
    """What one render serves: the HTML at ``PAGE_URL``, exactly once (later navigations get 204), and its CSS."""

    body: bytes
    css: bytes
    served: bool = False


@dataclass
class _Slot:
    """A reusable scripting-off context with its one page, for static renders (see the module docstring)."""

    browser: Browser
    context: BrowserContext
    page: Page
    cdp: CDPSession
    document: _Document | None = None
    renders: int = 0


@dataclass(frozen=True)
class RenderResult:
    """One render: the PNG (``status == "ok"`` only), why there is none otherwise, and how long it took."""

    png: bytes | None
    status: RenderStatus
    error: str | None = None
    duration_s: float = 0.0
    cached: bool = False
    blocks: tuple[PageBlock, ...] | None = None
    """The page's visible blocks (``colbench.render.blocks``), read in the same render as ``png``; None when not
    read (no PNG, or not asked for)."""
    blocks_note: str | None = None
    """What the bounds of block reading cut (nodes walked, blocks kept; ``colbench.render.ink``), or None."""

    @property
    def size(self) -> tuple[int, int] | None:
        """(width, height) of the PNG in pixels, read from its header; None without a PNG."""
        return None if self.png is None else _png_size(self.png)


def find_chromium(executable_path: str | None = None) -> str:
    """The Chromium binary to drive: the given path, ``$COLBENCH_CHROMIUM``, or chromium on ``PATH``."""
    candidate = executable_path or os.environ.get("COLBENCH_CHROMIUM")
    if candidate:
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            raise ConfigError(f"Chromium executable {candidate!r} does not exist or is not executable")
        return candidate
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError(f"no Chromium found on PATH (or $COLBENCH_CHROMIUM); {INSTALL_HINT}")


def _require_playwright() -> None:
    try:
        import PIL  # noqa: F401 (placeholder images)
        import playwright.async_api  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the frontend renderer needs Playwright and Pillow: {INSTALL_HINT}") from exc


def _kill_marked_processes(marker: str) -> int:
    """SIGKILL every process whose command line contains ``marker`` (our own browser); returns how many."""
    killed = 0
    proc = Path("/proc")
    if not proc.is_dir():
        return 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


@functools.lru_cache(maxsize=4)
def _stylesheet_index(css: bytes) -> StylesheetIndex:
    """One index per stylesheet and process (building it takes a fraction of a second)."""
    return StylesheetIndex(css)


class Renderer:
    """HTML -> PNG with one long-lived headless Chromium; thread-safe, usable from sync and async code.

    The browser lives on a private event-loop thread. ``render`` blocks the caller; ``arender`` awaits from any
    event loop; up to ``config.concurrency`` renders run at once, the others wait. Close with ``close()`` or ``with``.
    """

    def __init__(
        self, config: RenderConfig | None = None, *, cache_size: int = 256, tailwind_css: Path | None = None
    ) -> None:
        _require_playwright()
        self.config = config or RenderConfig()
        self._executable = find_chromium(self.config.executable_path)
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, got {cache_size}")
        self._cache_size = cache_size
        self._cache: LRUCache[str, RenderResult] = LRUCache(maxsize=max(cache_size, 1))
        self._css = load_tailwind_css(tailwind_css)
        self._marker = f"--colbench-renderer={uuid.uuid4().hex}"
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._launch_lock: asyncio.Lock | None = None
        self._turns: asyncio.Semaphore | None = None
        self._idle: list[_Slot] = []
        self._tasks: set[asyncio.Future[None]] = set()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="colbench-renderer", daemon=True)
        self._thread.start()
        # Indexing the stylesheet takes a fraction of a second: started now, in a worker thread, used when ready.
        self._index = asyncio.run_coroutine_threadsafe(self._build_index(), self._loop)

    # -- public API -----------------------------------------------------------------------------------------------

    def render(self, html: str, *, cache: bool = False, blocks: bool | None = None) -> RenderResult:
        """Render ``html``; ``cache=True`` (reference pages) looks the result up in / stores it into the LRU.

        ``blocks=True`` also reads the page's visible blocks into ``RenderResult.blocks`` (None: ``config.blocks``).
        """
        return self._submit(html, cache, self.config.blocks if blocks is None else blocks).result()

    async def arender(self, html: str, *, cache: bool = False, blocks: bool | None = None) -> RenderResult:
        """``render`` for async callers: awaits without blocking the caller's event loop."""
        return await asyncio.wrap_future(self._submit(html, cache, self.config.blocks if blocks is None else blocks))

    def kill_browser(self) -> int:
        """Kill the browser process outright (what a stuck render escalates to); the next render relaunches it."""
        return _kill_marked_processes(self._marker)

    def close(self) -> None:
        """Stop the browser and the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            shutdown = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            shutdown.result(timeout=2 * self.config.close_timeout_s + 5)
        self.kill_browser()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals (all on the loop thread) -------------------------------------------------------------------------

    def _submit(self, html: str, cache: bool, blocks: bool) -> concurrent.futures.Future[RenderResult]:
        if self._closed:
            raise ConfigError("this Renderer is closed")
        return asyncio.run_coroutine_threadsafe(self._render(html, cache, blocks), self._loop)

    async def _build_index(self) -> StylesheetIndex | None:
        try:
            return await asyncio.to_thread(_stylesheet_index, self._css)
        except Exception:  # never expected; the whole stylesheet is then served to every page
            return None

    async def _render(self, html: str, cache: bool, blocks: bool) -> RenderResult:
        if not html.strip():
            return RenderResult(None, "empty", "no HTML to render", 0.0)
        key = f"{sha256_text(html)}/{'blocks' if blocks else 'png'}"  # a render without blocks serves no one who asks
        hit = self._cache.get(key) if cache else None
        if hit is not None:
            return replace(hit, cached=True)
        if self._turns is None:
            self._turns = asyncio.Semaphore(self.config.concurrency)
        static = is_static(html)
        index = await asyncio.wrap_future(self._index) if static else None
        css = index.trim(html) if index is not None else self._css
        document = html.encode("utf-8", "surrogatepass")
        async with self._turns:
            started = time.monotonic()
            if static:
                result, reading = await self._render_static(document, css, started, blocks)
            else:
                result, reading = await self._render_in_context(_Document(document, css), started, blocks)
        if reading is not None and result.png is not None:
            # The pixel checks run on a worker thread, after the page has given its turn back.
            try:
                confirmed = await asyncio.to_thread(confirm, result.png, reading)
            except Exception as exc:  # whatever a page made of its reading fails that page, never the harness
                first = str(exc).splitlines()[0] if str(exc) else ""
                message = f"checking the page's blocks failed: {type(exc).__name__}: {first}"
                return RenderResult(None, "error", message, time.monotonic() - started)
            result = replace(
                result,
                blocks=confirmed.blocks,
                blocks_note=confirmed.note,
                duration_s=time.monotonic() - started,
            )
        if cache and result.status == "ok" and self._cache_size > 0:
            self._cache[key] = result
        return result

    # -- the browser ------------------------------------------------------------------------------------------------

    async def _ensure_browser(self) -> Browser:
        if self._launch_lock is None:
            self._launch_lock = asyncio.Lock()
        async with self._launch_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._drop_browser()
            from playwright.async_api import Error, async_playwright

            try:
                if self._playwright is None:
                    self._playwright = await async_playwright().start()
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self._executable,
                    headless=True,
                    args=[
                        self._marker,
                        "--proxy-server=http://127.0.0.1:1",
                        "--proxy-bypass-list=<-loopback>",
                        "--host-resolver-rules=MAP * ~NOTFOUND",
                        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
                        "--disable-background-networking",
                        "--no-pings",
                        "--disable-dev-shm-usage",
                        # Chromium keeps a spare renderer process warm for the context that navigated last; with
                        # several contexts taking turns it threw that process away and forked a new one per render.
                        "--disable-features=SpareRendererForSitePerProcess",
                    ],
                    timeout=30_000,
                )
            except Error as exc:
                await self._stop_playwright()
                first_line = exc.message.splitlines()[0] if exc.message else str(exc)
                raise InfraError(f"could not start Chromium ({self._executable}): {first_line}") from exc
            return self._browser

    async def _new_context(self, *, javascript: bool) -> tuple[Browser, BrowserContext]:
        """A fresh context; a browser that died since the last render (not this page's fault) is relaunched once."""
        from playwright.async_api import Error

        for attempt in (1, 2):
            browser = await self._ensure_browser()
            try:
                return browser, await asyncio.wait_for(
                    self._open_context(browser, javascript), self.config.close_timeout_s
                )
            except (Error, TimeoutError) as exc:
                await self._drop_browser()
                if attempt == 2:
                    message = exc.message if isinstance(exc, Error) else "timed out"
                    raise InfraError(f"Chromium could not open a browser context: {message}") from exc
        raise AssertionError("unreachable")

    async def _open_context(self, browser: Browser, javascript: bool) -> BrowserContext:
        cfg = self.config
        return await browser.new_context(
            viewport={"width": cfg.width, "height": cfg.height},
            device_scale_factor=1,
            reduced_motion="reduce",
            color_scheme="light",
            locale="en-US",
            timezone_id="UTC",
            service_workers="block",
            accept_downloads=False,
            java_script_enabled=javascript,
        )

    # -- static pages: scripting off, reused contexts ---------------------------------------------------------------

    async def _render_static(
        self, body: bytes, css: bytes, started: float, blocks: bool
    ) -> tuple[RenderResult, PageReading | None]:
        """Render in a reused context; an error there (the browser was killed meanwhile) earns one fresh retry."""
        from playwright.async_api import Error
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        cfg = self.config
        retried = False
        while True:
            slot: _Slot | None = None
            reused = False
            attempt = _Attempt("opening the page", cfg.close_timeout_s)
            try:
                slot = await self._take_slot(fresh=retried)
                reused = slot.renders > 0
                slot.document = _Document(body, css)
                limit = attempt.at("loading the page", cfg.load_timeout_s)
                await asyncio.wait_for(slot.page.goto(PAGE_URL, wait_until="load", timeout=limit * 1000), limit)
                limit = attempt.at("taking the screenshot", cfg.screenshot_timeout_s)
                await attempt.shot(slot.cdp, await asyncio.wait_for(self._capture(slot.cdp), limit), blocks)
            except (PlaywrightTimeout, TimeoutError, Error, ReadError) as exc:
                attempt.failed(exc)
            finally:
                if slot is not None:
                    slot.document = None
                    slot.renders += 1
                    if attempt.status == "ok" and slot.renders < cfg.renders_per_context:
                        self._idle.append(slot)
                    else:
                        await self._discard(slot)
            if attempt.status == "error" and reused and not retried:
                retried = True  # the context had worked before: retry once, in a fresh one
                continue
            return attempt.result(started)

    async def _take_slot(self, *, fresh: bool = False) -> _Slot:
        """An idle context of this browser, or a new one (bounded by ``close_timeout_s``)."""
        while self._idle and not fresh:
            slot = self._idle.pop()
            if slot.browser is self._browser and slot.browser.is_connected() and not slot.page.is_closed():
                return slot
            await self._discard(slot)
        browser, context = await self._new_context(javascript=False)
        try:
            return await asyncio.wait_for(self._open_slot(browser, context), self.config.close_timeout_s)
        except BaseException:
            if not await self._close_context(context):
                await self._kill_and_drop()
            raise

    async def _open_slot(self, browser: Browser, context: BrowserContext) -> _Slot:
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        await self._freeze_animations(cdp)
        slot = _Slot(browser, context, page, cdp)

        async def route(route: Route, request: Request) -> None:
            await self._answer(route, request, slot.document)

        await context.route("**/*", route)
        context.on("page", self._close_popup)
        return slot

    async def _discard(self, slot: _Slot) -> None:
        slot.document = None
        if slot.browser is not self._browser or not slot.browser.is_connected():
            return  # gone with its browser
        if not await self._close_context(slot.context):
            await self._kill_and_drop()

    @staticmethod
    async def _freeze_animations(cdp: CDPSession) -> None:
        """Stop the page's animation clock for good (it holds across navigations while ``cdp`` stays attached).

        Every animation then stays at its start until the screenshot settles it, including the browser's own ones
        that a page's script cannot reach (a video's loading spinner, an indeterminate progress bar), which would
        otherwise be captured at whatever moment the screenshot happened to be taken.
        """
        await cdp.send("Animation.enable")
        await cdp.send("Animation.setPlaybackRate", {"playbackRate": 0})

    async def _capture(self, cdp: CDPSession) -> bytes:
        """What Playwright's full-page screenshot does (see ``_PREPARE_JS``), in two calls, with fast PNG encoding."""
        cfg = self.config
        measured = await cdp.send(
            "Runtime.evaluate", {"expression": _PREPARE_JS, "awaitPromise": True, "returnByValue": True}
        )
        size = measured.get("result", {}).get("value")
        full_width, full_height = size if isinstance(size, list) else (cfg.width, cfg.height)
        width, height = min(int(full_width), cfg.width), min(int(full_height), cfg.max_height)
        fits = full_width <= cfg.width and full_height <= cfg.height
        shot = await cdp.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                "captureBeyondViewport": not fits,
                "optimizeForSpeed": True,
            },
        )
        return base64.b64decode(shot["data"])

    # -- scripted pages: a fresh context each ----------------------------------------------------------------------

    async def _render_in_context(
        self, document: _Document, started: float, blocks: bool
    ) -> tuple[RenderResult, PageReading | None]:
        from playwright.async_api import Error
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        cfg = self.config
        context: BrowserContext | None = None
        attempt = _Attempt("opening the page", cfg.close_timeout_s)
        try:
            _, context = await self._new_context(javascript=True)
            page, cdp = await asyncio.wait_for(self._open_page(context, document), attempt.limit)
            limit = attempt.at("loading the page", cfg.load_timeout_s)
            await asyncio.wait_for(self._load(page), limit)
            limit = attempt.at("taking the screenshot", cfg.screenshot_timeout_s)
            if blocks:
                # The page's scripts stop here, so the screenshot and the DOM read afterwards show one page.
                await asyncio.wait_for(cdp.send("Emulation.setScriptExecutionDisabled", {"value": True}), limit)
            await attempt.shot(cdp, await asyncio.wait_for(self._shoot(page), limit), blocks)
        except (PlaywrightTimeout, TimeoutError, Error, ReadError) as exc:
            attempt.failed(exc)
        finally:
            if context is not None and not await self._close_context(context):
                await self._kill_and_drop()
        return attempt.result(started)

    async def _open_page(self, context: BrowserContext, document: _Document) -> tuple[Page, CDPSession]:
        async def route(route: Route, request: Request) -> None:
            await self._answer(route, request, document)

        def on_dialog(dialog: Dialog) -> None:
            # A beforeunload prompt is accepted (dismissing it would keep a navigation from leaving the page).
            self._background(dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())

        await context.add_init_script(_NEUTRALISE_JS)
        await context.route("**/*", route)
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        await self._freeze_animations(cdp)
        context.on("page", self._close_popup)  # registered after the main page exists: every later page is a popup
        page.on("dialog", on_dialog)
        return page, cdp

    async def _load(self, page: Page) -> None:
        """Navigate and wait until the document's readyState is "complete" (stylesheets and images in).

        Polled in the page rather than waiting for Playwright's load event, which a script-started navigation
        (answered 204, so never completed) hides. Bounded by the caller (``load_timeout_s``).
        """
        timeout_ms = self.config.load_timeout_s * 1000
        await page.goto(PAGE_URL, wait_until="commit", timeout=timeout_ms)
        await page.wait_for_function("document.readyState === 'complete'", polling=50, timeout=timeout_ms)

    async def _shoot(self, page: Page) -> bytes:
        cfg = self.config
        return await page.screenshot(
            type="png",
            full_page=True,
            clip={"x": 0, "y": 0, "width": cfg.width, "height": cfg.max_height},
            animations="disabled",
            caret="hide",
            timeout=cfg.screenshot_timeout_s * 1000,
        )

    # -- shared -----------------------------------------------------------------------------------------------------

    async def _answer(self, route: Route, request: Request, document: _Document | None) -> None:
        url = request.url
        try:
            if request.is_navigation_request():
                if document is not None and url == PAGE_URL and not document.served:  # the page is served once
                    document.served = True
                    await route.fulfill(
                        status=200,
                        body=document.body,
                        content_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-store"},
                    )
                else:
                    # 204 No Content: Chromium stays on the current document (an abort would commit an error page).
                    await route.fulfill(status=204, body=b"")
                return
            if document is not None and TAILWIND_URL_RE.match(url):
                await route.fulfill(
                    status=200,
                    body=document.css,
                    content_type="text/css",
                    headers={"access-control-allow-origin": "*", "cache-control": "no-store"},
                )
                return
            if (size := placeholder_size(url)) is not None:
                await route.fulfill(
                    status=200,
                    body=placeholder_png(*size),
                    content_type="image/png",
                    headers={"access-control-allow-origin": "*"},
                )
                return
            await route.abort("blockedbyclient")
        except Exception:  # the page may be gone already; a lost answer is a blocked request
            return

    def _close_popup(self, popup: Page) -> None:
        self._background(popup.close())

    def _background(self, awaitable: Coroutine[Any, Any, Any]) -> None:
        """Run a fire-and-forget cleanup (dismiss a dialog, close a popup); its failure is of no consequence."""

        async def quietly() -> None:
            with contextlib.suppress(Exception):
                await awaitable

        task = asyncio.ensure_future(quietly())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_context(self, context: BrowserContext) -> bool:
        try:
            await asyncio.wait_for(context.close(), timeout=self.config.close_timeout_s)
        except Exception:  # any failure to close means the browser is in a bad state
            return False
        return True

    async def _kill_and_drop(self) -> None:
        self.kill_browser()
        await self._drop_browser()

    async def _drop_browser(self) -> None:
        browser, self._browser = self._browser, None
        self._idle.clear()  # their contexts go with the browser
        if browser is not None:
            try:
                await asyncio.wait_for(browser.close(), timeout=self.config.close_timeout_s)
            except Exception:  # a browser that will not close is killed
                self.kill_browser()

    async def _stop_playwright(self) -> None:
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(playwright.stop(), timeout=self.config.close_timeout_s)

    async def _shutdown(self) -> None:
        await self._drop_browser()
        await self._stop_playwright()


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


@dataclass
class _Attempt:
    """One try at a render, as both render paths keep it: the phase it is in and that phase's time limit (so a
    failure says where it stopped), then how it ended (``status``, ``error``) and what it read."""

    phase: str
    limit: float
    status: RenderStatus = "error"
    error: str | None = None
    png: bytes | None = None
    reading: PageReading | None = None

    def at(self, phase: str, limit: float) -> float:
        """The next phase begins, with its own time limit (returned)."""
        self.phase, self.limit = phase, limit
        return limit

    async def shot(self, cdp: CDPSession, png: bytes, blocks: bool) -> None:
        """The screenshot is taken: the page's blocks read where asked (in the screenshot's time limit); done."""
        self.png = png
        if blocks:
            self.phase = "reading the page's blocks"
            self.reading = await asyncio.wait_for(read_page(cdp, *_png_size(png), self.limit), self.limit)
        self.status = "ok"

    def failed(self, exc: BaseException) -> None:
        """The status and one-line error for what stopped it in its phase (a timeout, or Chromium's error)."""
        from playwright.async_api import TimeoutError as PlaywrightTimeout  # loaded already: the render imported it

        if isinstance(exc, PlaywrightTimeout | TimeoutError):
            self.status, self.error = "timeout", f"{self.phase} did not finish within {self.limit:g} s"
        else:
            message = getattr(exc, "message", "") or ""
            self.status, self.error = "error", f"render failed: {message.splitlines()[0] if message else exc}"

    def result(self, started: float) -> tuple[RenderResult, PageReading | None]:
        """The render (its PNG and reading only when ok), timed from ``started``."""
        ok = self.status == "ok"
        elapsed = time.monotonic() - started
        return RenderResult(self.png if ok else None, self.status, self.error, elapsed), self.reading if ok else None
