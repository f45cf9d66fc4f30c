"""Render an HTML page to a PNG screenshot with Playwright driving headless Chromium, offline and bounded.

Policy (fixed per ``RenderConfig``; the defaults are what scores are computed with):

- **Browser.** One long-lived headless Chromium (the system's ``/usr/bin/chromium`` via ``executable_path``, since
  Playwright's own browser download is not possible everywhere), a fresh browser context per page, relaunched when it
  has died or had to be killed.
- **Viewport.** 1280x720 CSS px at device scale 1, light colour scheme, ``prefers-reduced-motion: reduce``, locale
  en-US, time zone UTC.
- **Screenshot.** The full page, 1280 px wide, as tall as the document but at least the viewport (720 px) and at most
  ``max_height`` (2560 px): a tall page is cut at the bottom, so memory and embedding cost stay bounded. The
  original ColBench took a full-page screenshot with Selenium's headless Firefox and no window size (Firefox's default
  window, unbounded height); widths, fonts and the engine therefore differ, which shifts absolute CLIP similarities a
  little but treats the agent's and the reference page identically. CSS animations and transitions are disabled for
  the screenshot (Playwright's ``animations="disabled"``: finite ones jump to their end state, infinite ones are
  cancelled) and the caret is hidden.
- **Network.** Every request is routed. The page itself is served once at ``PAGE_URL``; the Tailwind 2.2.19 CDN
  stylesheets are answered from the local copy; placeholder-image hosts get a deterministic PNG of the requested size
  (see ``colbench.render.placeholder``); every other request (other hosts, 127.0.0.1, ``file://``) is aborted.
  Navigations away from the page (meta refresh, ``location``, links, reloads) are answered ``204 No Content``, so the
  page stays where it is (an abort would replace it with an error page). Known limit: when a script in ``<head>``
  starts a navigation before the first paint, Chromium keeps rendering deferred after it is refused, so such a page
  ends as ``timeout``, bounded like any other. As a second wall Chromium runs with a proxy on a dead local port that
  loopback does not bypass, and host names resolve to nothing, so a request that escaped routing (WebSocket, prefetch)
  still cannot connect anywhere. Service workers are blocked.
- **Dialogs and popups.** ``alert``/``confirm``/``prompt``/``print``/``window.open`` are replaced by no-ops before
  any page script runs; a dialog that still appears is dismissed; a popup page is closed at once.
- **Time.** JavaScript runs, bounded by the load timeout (10 s) and the screenshot timeout (10 s); opening the page
  and closing its context are bounded by ``close_timeout_s`` (5 s). After a timeout or error the page's context is
  closed; if that does not finish in time, the browser process is killed and relaunched for the next page. A runaway
  script therefore costs at most one timeout and never hangs the harness.

Results: ``RenderResult.status`` is ``ok`` (png set), ``timeout`` (load or screenshot ran out of time), ``error``
(the page crashed or Chromium refused it; message set) or ``empty`` (no HTML given: nothing is rendered). A failure
to start the browser at all is an ``InfraError`` (never a page's fault); a missing Playwright or Chromium is a
``ConfigError`` saying how to install it.

Renders of reference pages can be cached: ``render(html, cache=True)`` looks up and stores successful results in an
LRU keyed by the SHA-256 of the HTML (``cache_size`` entries per renderer; 0 disables it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import shutil
import signal
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from colbench.errors import ConfigError, InfraError
from colbench.render.placeholder import TAILWIND_URL_RE, load_tailwind_css, placeholder_png, placeholder_size

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Dialog, Page, Playwright, Request, Route

RenderStatus = Literal["ok", "timeout", "error", "empty"]

PAGE_URL = "https://page.colbench.invalid/"
"""Where the rendered HTML is served from (never resolved: the router answers it)."""

INSTALL_HINT = "install it with `apt-get install chromium` and `pip install 'colbench[frontend]'`"

_NEUTRALISE_JS = """(() => {
  const noop = () => undefined;
  window.alert = noop;
  window.print = noop;
  window.confirm = () => false;
  window.prompt = () => null;
  window.open = () => null;
})();"""


@dataclass(frozen=True)
class RenderConfig:
    """Everything that changes a screenshot or bounds a render; the defaults are the scoring policy."""

    width: int = 1280
    height: int = 720
    max_height: int = 2560
    load_timeout_s: float = 10.0
    screenshot_timeout_s: float = 10.0
    close_timeout_s: float = 5.0
    executable_path: str | None = None

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1 or self.max_height < self.height:
            raise ConfigError(
                f"render size must be positive with max_height >= height, got {self.width}x{self.height} "
                f"(max_height {self.max_height})"
            )
        if min(self.load_timeout_s, self.screenshot_timeout_s, self.close_timeout_s) <= 0:
            raise ConfigError("render timeouts must be positive")


@dataclass
class _Document:
    """The HTML one render serves at ``PAGE_URL``, exactly once (reloads and navigations get 204 No Content)."""

    body: bytes
    served: bool = False


@dataclass(frozen=True)
class RenderResult:
    """One render: the PNG (``status == "ok"`` only), why there is none otherwise, and how long it took."""

    png: bytes | None
    status: RenderStatus
    error: str | None = None
    duration_s: float = 0.0
    cached: bool = False

    @property
    def size(self) -> tuple[int, int] | None:
        """(width, height) of the PNG in pixels, read from its header; None without a PNG."""
        if self.png is None:
            return None
        width, height = struct.unpack(">II", self.png[16:24])
        return int(width), int(height)


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
        import playwright.async_api  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the frontend renderer needs Playwright: {INSTALL_HINT}") from exc


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


class Renderer:
    """HTML -> PNG with one long-lived headless Chromium; thread-safe, usable from sync and async code.

    The browser lives on a private event-loop thread. ``render`` blocks the caller; ``render_async`` awaits from any
    event loop; several renders may run at once (one browser context each). Close with ``close()`` or ``with``.
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
        self._cache: OrderedDict[str, RenderResult] = OrderedDict()
        self._css = load_tailwind_css(tailwind_css)
        self._marker = f"--colbench-renderer={uuid.uuid4().hex}"
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._launch_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="colbench-renderer", daemon=True)
        self._thread.start()

    # -- public API -----------------------------------------------------------------------------------------------

    def render(self, html: str, *, cache: bool = False) -> RenderResult:
        """Render ``html``; ``cache=True`` (reference pages) looks the result up in / stores it into the LRU."""
        return self._submit(html, cache).result()

    async def render_async(self, html: str, *, cache: bool = False) -> RenderResult:
        """``render`` for async callers: awaits without blocking the caller's event loop."""
        return await asyncio.wrap_future(self._submit(html, cache))

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

    def _submit(self, html: str, cache: bool) -> concurrent.futures.Future[RenderResult]:
        if self._closed:
            raise ConfigError("this Renderer is closed")
        return asyncio.run_coroutine_threadsafe(self._render(html, cache), self._loop)

    async def _render(self, html: str, cache: bool) -> RenderResult:
        started = time.monotonic()
        if not html.strip():
            return RenderResult(None, "empty", "no HTML to render", time.monotonic() - started)
        key = hashlib.sha256(html.encode("utf-8", "surrogatepass")).hexdigest()
        if cache and key in self._cache:
            self._cache.move_to_end(key)
            return replace(self._cache[key], cached=True)
        result = await self._render_in_context(html, started)
        if cache and result.status == "ok" and self._cache_size > 0:
            self._cache[key] = result
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result

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
                    ],
                    timeout=30_000,
                )
            except Error as exc:
                await self._stop_playwright()
                first_line = exc.message.splitlines()[0] if exc.message else str(exc)
                raise InfraError(f"could not start Chromium ({self._executable}): {first_line}") from exc
            return self._browser

    async def _new_context(self) -> BrowserContext:
        """A fresh context; a browser that died since the last render (not this page's fault) is relaunched once."""
        from playwright.async_api import Error

        try:
            return await self._open_context(await self._ensure_browser())
        except Error:
            await self._drop_browser()
        try:
            return await self._open_context(await self._ensure_browser())
        except Error as exc:
            await self._drop_browser()
            raise InfraError(f"Chromium could not open a browser context: {exc.message}") from exc

    async def _open_context(self, browser: Browser) -> BrowserContext:
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
        )

    async def _render_in_context(self, html: str, started: float) -> RenderResult:
        from playwright.async_api import Error
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        cfg = self.config
        context: BrowserContext | None = None
        status: RenderStatus = "error"
        png: bytes | None = None
        error: str | None = None
        phase, limit = "opening the page", cfg.close_timeout_s
        try:
            context = await self._new_context()
            page = await asyncio.wait_for(self._open_page(context, html), limit)
            phase, limit = "loading the page", cfg.load_timeout_s
            await asyncio.wait_for(self._load(page), limit)
            phase, limit = "taking the screenshot", cfg.screenshot_timeout_s
            png = await asyncio.wait_for(self._shoot(page), limit)
            status = "ok"
        except (PlaywrightTimeout, TimeoutError):
            status, error = "timeout", f"{phase} did not finish within {limit:g} s"
        except Error as exc:
            status, error = "error", f"render failed: {exc.message.splitlines()[0] if exc.message else exc}"
        finally:
            if context is not None and not await self._close_context(context):
                await self._kill_and_drop()
        return RenderResult(png, status, error, time.monotonic() - started)

    async def _open_page(self, context: BrowserContext, html: str) -> Page:
        document = _Document(html.encode("utf-8", "surrogatepass"))

        async def route(route: Route, request: Request) -> None:
            await self._answer(route, request, document)

        def on_popup(popup: Page) -> None:  # registered after the main page exists: every later page is a popup
            self._background(popup.close())

        def on_dialog(dialog: Dialog) -> None:
            self._background(dialog.dismiss())

        await context.add_init_script(_NEUTRALISE_JS)
        await context.route("**/*", route)
        page = await context.new_page()
        context.on("page", on_popup)
        page.on("dialog", on_dialog)
        return page

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

    async def _answer(self, route: Route, request: Request, document: _Document) -> None:
        url = request.url
        try:
            if request.is_navigation_request():
                if url == PAGE_URL and not document.served:  # the page is served once: the first navigation
                    document.served = True
                    await route.fulfill(status=200, body=document.body, content_type="text/html; charset=utf-8")
                else:
                    # 204 No Content: Chromium stays on the current document (an abort would commit an error page).
                    await route.fulfill(status=204, body=b"")
                return
            if TAILWIND_URL_RE.match(url):
                await route.fulfill(
                    status=200, body=self._css, content_type="text/css", headers={"access-control-allow-origin": "*"}
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
