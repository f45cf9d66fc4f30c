"""The frontend renderer: placeholder images, Tailwind offline, real ColBench pages, and hostile pages.

Browser tests drive the real headless Chromium (``@pytest.mark.browser``) and share one Renderer per module; they skip,
saying why, where Playwright or Chromium is missing.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from chromium import renderer_or_skip
from paths import SHARED
from PIL import Image

from colbench.errors import ConfigError, InfraError
from colbench.render import (
    MAX_SIDE,
    RenderConfig,
    Renderer,
    RenderResult,
    find_chromium,
    load_tailwind_css,
    placeholder_png,
    placeholder_size,
)
from colbench.render.renderer import is_static
from colbench.render.stylesheet import StylesheetIndex, required_classes

_T = TypeVar("_T")

SHARED_FRONTEND = SHARED / "data" / "colbench" / "frontend_test_sample.jsonl"
TAILWIND = "https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css"
RED_500 = (239, 68, 68)
GREEN = (0, 255, 0)
# Short timeouts keep the hostile tests fast; real pages render in well under a second.
CONFIG = RenderConfig(load_timeout_s=4.0, screenshot_timeout_s=3.0, close_timeout_s=3.0)
BOUND_S = CONFIG.load_timeout_s + CONFIG.screenshot_timeout_s + 2 * CONFIG.close_timeout_s + 5


def png_array(data: bytes) -> np.ndarray:
    """The PNG's pixels as a (height, width, 3) uint8 array."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def pixel(result: RenderResult, x: int, y: int) -> tuple[int, int, int]:
    assert result.png is not None, result
    r, g, b = png_array(result.png)[y, x]
    return int(r), int(g), int(b)


def on_loop(renderer: Renderer, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run one of the renderer's internal coroutines on its loop thread (white-box tests)."""
    return asyncio.run_coroutine_threadsafe(coro, renderer._loop).result(timeout=60)


def page(body: str, head: str = "") -> str:
    return f'<html><head><link href="{TAILWIND}" rel="stylesheet">{head}</head><body class="m-0">{body}</body></html>'


RED_BOX = '<div class="bg-red-500" style="width:200px;height:200px"></div>'


# -- no browser needed -------------------------------------------------------------------------------------------------


def test_placeholder_png_has_the_requested_size_and_fixed_bytes() -> None:
    png = placeholder_png(300, 200)
    pixels = png_array(png)
    assert pixels.shape == (200, 300, 3)
    assert tuple(pixels[0, 0]) != tuple(pixels[-1, 0])  # a gradient, not a flat colour
    assert (pixels == pixels[:, :1]).all()  # each row one colour
    assert placeholder_png(300, 200) == png
    assert png_array(placeholder_png(1, 1)).shape == (1, 1, 3)
    with pytest.raises(ValueError):
        placeholder_png(0, 10)


@pytest.mark.parametrize(
    ("url", "size"),
    [
        ("https://picsum.photos/id/48/1600/900", (1600, 900)),
        ("https://picsum.photos/id/48/300/200?grayscale", (300, 200)),
        ("https://picsum.photos/640/480.jpg", (640, 480)),
        ("https://picsum.photos/200", (200, 200)),
        ("https://placehold.co/600x400/png", (600, 400)),
        ("https://via.placeholder.com/150", (150, 150)),
        ("https://picsum.photos/id/48/99999/5", (MAX_SIDE, 5)),
        ("https://picsum.photos/id/48/1600/400-estate", None),  # the real host rejects this path too
        ("https://example.com/id/48/300/200", None),
        ("http://127.0.0.1/picsum.photos/300/200", None),
    ],
)
def test_placeholder_urls(url: str, size: tuple[int, int] | None) -> None:
    assert placeholder_size(url) == size


def test_tailwind_stylesheet_ships_with_the_package() -> None:
    css = load_tailwind_css()
    assert b"tailwindcss v2.2.19" in css[:500]
    assert b".bg-red-500" in css


def test_config_and_missing_chromium_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_height"):
        RenderConfig(height=800, max_height=600)
    with pytest.raises(ConfigError, match="timeouts"):
        RenderConfig(load_timeout_s=0)
    with pytest.raises(ConfigError, match="not executable"):
        find_chromium(str(tmp_path / "no-chromium"))
    with pytest.raises(ConfigError, match="concurrency"):
        RenderConfig(concurrency=0)
    with pytest.raises(ConfigError, match="renders_per_context"):
        RenderConfig(renders_per_context=0)


def test_missing_playwright_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "playwright.async_api", None)
    with pytest.raises(ConfigError, match=r"pip install 'colbench\[frontend\]'"):
        Renderer()


@pytest.fixture(scope="module")
def tailwind_index() -> StylesheetIndex:
    return StylesheetIndex(load_tailwind_css())


def test_the_stylesheet_index_rebuilds_the_sheet_exactly(tailwind_index: StylesheetIndex) -> None:
    css = load_tailwind_css()
    assert tailwind_index.usable
    assert tailwind_index.trim(" ".join(sorted(tailwind_index.classes))) == css  # every class: the whole sheet
    trimmed = tailwind_index.trim(page(RED_BOX))
    assert len(trimmed) < 10_000 < len(css)
    text = trimmed.decode()
    assert text.startswith("/*! tailwindcss v2.2.19 | MIT License")  # the licence comment stays
    assert ".bg-red-500{" in text and ".m-0{" in text and ".bg-red-600{" not in text
    assert "*,::after,::before{box-sizing:border-box}" in text  # rules without a class are always kept
    assert "@keyframes spin{" in text  # so are at-rules other than @media
    assert "@media" not in text  # no responsive class used: no empty media blocks


@pytest.mark.parametrize(
    ("html", "present", "absent"),
    [
        ('<div class="md:w-1/2 w-1.5 -mt-2 2xl:container">', ["@media (min-width:768px){.md\\:w-1\\/2{"], []),
        ('<div class="w-1.5 -mt-2">', [".w-1\\.5{", ".-mt-2{"], [".w-1{", ".mt-2{"]),
        ('<div class="2xl:container">', [".\\32xl\\:container{"], [".container{"]),
        ('<div class="group"><p class="group-hover:text-red-500">', [".group:hover .group-hover\\:text-red-500{"], []),
        ('<p class="group-hover:text-red-500">', [], [".group-hover\\:text-red-500{"]),  # needs .group too
        ('<ul class="space-x-4 divide-y">', [".space-x-4>:not([hidden])~:not([hidden]){", ".divide-y>"], []),
        ('<p class="BG-Red-500">', [".bg-red-500{"], []),  # quirks mode ignores case: kept
        ('<p class="bg&#x2d;red&#45;500">', [".bg-red-500{"], []),  # character references decoded
        ("<p class=bg-red-500>", [".bg-red-500{"], []),  # unquoted attribute
    ],
)
def test_trimming_keeps_every_rule_the_page_can_use(
    tailwind_index: StylesheetIndex, html: str, present: list[str], absent: list[str]
) -> None:
    text = tailwind_index.trim(html).decode()
    for rule in present:
        assert rule in text, rule
    for rule in absent:
        assert rule not in text, rule


@pytest.mark.parametrize(
    ("selector", "classes"),
    [
        (".a", {"a"}),
        (".md\\:w-1\\/2", {"md:w-1/2"}),
        (".\\32xl\\:p-4", {"2xl:p-4"}),
        (".a:not(.b) .c", {"a", "c"}),  # a class under :not() is never required
        ("abbr[title]", set()),
        ('[data-x=".y"] .z', {"z"}),
        ("/* .x */ .y", {"y"}),
        (".A", {"a"}),
    ],
)
def test_required_classes(selector: str, classes: set[str]) -> None:
    assert required_classes(selector) == classes


def test_a_stylesheet_the_trimmer_does_not_understand_is_served_whole() -> None:
    for css in (b".a{color:red}}", b".a{color:red", b".a{color:red} stray", b"\xff\xfe"):
        index = StylesheetIndex(css)
        assert not index.usable and index.trim('<p class="b">') == css
    css = b"@import url(x.css);.one{color:red}.two{color:blue}@media print{.three{x:y}.four{x:z}}/* end */"
    index = StylesheetIndex(css)
    assert index.usable and index.trim("one two three four") == css
    # A statement at-rule glued to the next rule keeps it; the media block is re-opened around what it keeps.
    assert index.trim('<p class="four">') == b"@import url(x.css);.one{color:red}@media print{.four{x:z}}/* end */"


@pytest.mark.parametrize(
    ("html", "static"),
    [
        (page(RED_BOX), True),
        ('<html><body class="bg-gray-100"><img src="https://picsum.photos/id/48/300/200"></body></html>', True),
        (page("<p>status: online=yes</p>"), False),  # a false alarm only costs speed
        (page(RED_BOX, "<script>x()</script>"), False),
        (page(RED_BOX, "<SCRIPT SRC=x.js></SCRIPT>"), False),
        (page(RED_BOX + "<noscript>enable JS</noscript>"), False),
        (page('<img src=x onerror="alert(1)">'), False),
        (page("<svg><animate onbegin=alert(1) /></svg>"), False),
        (page("<img src=x/onerror=alert(1)>"), False),
        (page('<a href="javascript:alert(1)">x</a>'), False),
        (page('<a href="JavaScript&colon;alert(1)">x</a>'), False),
        (page('<iframe srcdoc="&lt;p&gt;x"></iframe>'), False),
        (page('<object data="data:text/html,&lt;p&gt;x"></object>'), False),
        (page('<iframe src="https://www.youtube.com/embed/x"></iframe><object data="x.svg"></object>'), True),
        (page('<img src="data:image/png;base64,AAAA">'), True),
        (page("", '<meta http-equiv="refresh" content="5">'), False),
        (page("", '<meta http-equiv=&#x22;Refresh&#x22; content="5">'), False),
        (page("", "<style>@media (scripting: none) { p { color: red } }</style>"), False),
    ],
)
def test_static_pages_are_the_ones_that_cannot_run_script(html: str, static: bool) -> None:
    assert is_static(html) is static


@pytest.mark.browser
def test_a_browser_that_cannot_start_is_an_infra_error() -> None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        pytest.skip("Playwright is not installed")
    with Renderer(RenderConfig(executable_path="/bin/false")) as broken, pytest.raises(InfraError, match="/bin/false"):
        broken.render("<p>x</p>")


# -- real headless Chromium ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_frontend_sample() -> list[str]:
    """The reference pages of the ColBench frontend sample (150), or a skip saying why they are absent."""
    if not SHARED_FRONTEND.exists():
        pytest.skip(
            f"the ColBench frontend sample is not present at {SHARED_FRONTEND} (../shared is only on development machines)"
        )
    return [json.loads(line)["ground_truth"] for line in SHARED_FRONTEND.read_text().splitlines() if line.strip()]


def make_renderer(config: RenderConfig = CONFIG) -> Renderer:
    return renderer_or_skip(config, cache_size=0)


@pytest.fixture(scope="module")
def renderer() -> Iterator[Renderer]:
    with renderer_or_skip(CONFIG, cache_size=4) as instance:
        yield instance


class Listener:
    """A real TCP server on 127.0.0.1 that records every connection it receives (it must receive none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(0.5)
            try:
                self.connections.append(conn.recv(4096) or b"<connected>")
            except OSError:
                self.connections.append(b"<connected>")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def assert_still_works(renderer: Renderer) -> None:
    result = renderer.render(page(RED_BOX))
    assert result.status == "ok", result.error
    assert pixel(result, 100, 100) == RED_500


@pytest.mark.browser
def test_tailwind_is_applied_from_every_known_cdn(renderer: Renderer) -> None:
    for url in (
        TAILWIND,
        "https://unpkg.com/tailwindcss@2.2.19/dist/tailwind.min.css",
        "https://cdnjs.cloudflare.com/ajax/libs/tailwindcss/2.2.19/tailwind.min.css",
    ):
        html = f'<html><link href="{url}" rel="stylesheet"><body class="m-0">{RED_BOX}</body></html>'
        result = renderer.render(html)
        assert result.status == "ok", result.error
        assert result.size == (1280, 720)
        assert pixel(result, 100, 100) == RED_500, url
        assert pixel(result, 600, 100) == (255, 255, 255)


@pytest.mark.browser
def test_placeholder_images_have_the_requested_size_and_are_identical(renderer: Renderer) -> None:
    html = page('<img src="https://picsum.photos/id/48/300/200" style="display:block">')
    first, second = renderer.render(html), renderer.render(html)
    assert first.status == second.status == "ok"
    assert first.png == second.png
    expected = png_array(placeholder_png(300, 200))
    assert pixel(first, 150, 100) == tuple(int(v) for v in expected[100, 150])
    assert pixel(first, 299, 199) == tuple(int(v) for v in expected[199, 299])
    assert pixel(first, 301, 100) == (255, 255, 255)  # exactly 300 px wide
    assert pixel(first, 150, 201) == (255, 255, 255)  # and 200 px high


@pytest.mark.browser
def test_screenshot_is_full_page_up_to_the_maximum_height(renderer: Renderer) -> None:
    tall = renderer.render(page('<div style="height:1500px"></div>'))
    assert tall.size == (1280, 1500)
    huge = renderer.render(page('<div style="height:9000px"></div>'))
    assert huge.size == (1280, CONFIG.max_height)


@pytest.mark.browser
def test_empty_html_and_the_reference_cache(renderer: Renderer) -> None:
    assert renderer.render("  \n").status == "empty"
    html = page(RED_BOX + "<p>cached reference</p>")
    first = renderer.render(html, cache=True)
    again = renderer.render(html, cache=True)
    assert not first.cached and again.cached and again.png == first.png
    assert not renderer.render(html).cached  # only reference renders (cache=True) use the cache


@pytest.mark.browser
def test_real_colbench_pages_render_offline(
    renderer: Renderer, shared_frontend_sample: list[str], tmp_path: Path
) -> None:
    rows = [{"ground_truth": html} for html in shared_frontend_sample[:10]]
    for i, row in enumerate(rows):
        result = renderer.render(row["ground_truth"])
        assert result.status == "ok", (i, result.error)
        assert result.size is not None
        width, height = result.size
        assert width == 1280 and 720 <= height <= CONFIG.max_height
        assert result.duration_s < CONFIG.load_timeout_s
        (tmp_path / f"page{i}.png").write_bytes(result.png or b"")
    # The first sample page has a green-500 header (Tailwind applied, not the unstyled default).
    first = renderer.render(rows[0]["ground_truth"])
    assert pixel(first, 5, 5) == (16, 185, 129)


# -- hostile pages -------------------------------------------------------------------------------------------------------


@pytest.mark.browser
def test_infinite_loop_times_out_and_the_next_render_works(renderer: Renderer) -> None:
    for script in ("while (true) {}", "setTimeout(() => { for (;;) {} }, 0)"):
        started = time.monotonic()
        result = renderer.render(page(RED_BOX, f"<script>{script}</script>"))
        assert time.monotonic() - started < BOUND_S
        assert result.status == "timeout", result
        assert result.png is None and result.error == "loading the page did not finish within 4 s"
        assert_still_works(renderer)


@pytest.mark.browser
def test_dialog_storms_are_dismissed(renderer: Renderer) -> None:
    storm = """<script>
      for (let i = 0; i < 2000; i++) { alert(i); confirm(i); prompt(i); }
      const f = document.createElement('iframe'); document.head.appendChild(f);
      for (let i = 0; i < 50; i++) { f.contentWindow.alert(i); }
      window.onbeforeunload = () => 'stay';
    </script>"""
    started = time.monotonic()
    result = renderer.render(page(RED_BOX, storm))
    assert time.monotonic() - started < BOUND_S
    assert result.status == "ok", result.error
    assert pixel(result, 100, 100) == RED_500
    assert_still_works(renderer)


@pytest.mark.browser
def test_nothing_reaches_a_local_listener(renderer: Renderer, listener: Listener) -> None:
    base = f"http://127.0.0.1:{listener.port}"
    body = f"""{RED_BOX}
      <img src="{base}/img.png"><iframe src="{base}/frame"></iframe><iframe src="http://localhost:{listener.port}/"></iframe>
      <link rel="prefetch" href="{base}/prefetch"><video src="{base}/v.mp4" autoplay></video>
      <script>
        fetch("{base}/fetch").catch(() => {{}});
        fetch("http://localhost:{listener.port}/fetch2", {{mode: "no-cors"}}).catch(() => {{}});
        navigator.sendBeacon("{base}/beacon", "x");
        try {{ new WebSocket("ws://127.0.0.1:{listener.port}/ws"); }} catch (e) {{}}
        const x = new XMLHttpRequest(); x.open("GET", "{base}/xhr"); x.send();
      </script>"""
    result = renderer.render(page(body))
    assert result.status == "ok", result.error
    time.sleep(0.5)
    assert listener.connections == []
    assert_still_works(renderer)


@pytest.mark.browser
def test_navigation_and_popups_are_blocked(renderer: Renderer, listener: Listener) -> None:
    base = f"http://127.0.0.1:{listener.port}"
    pages = [
        page(RED_BOX, f'<meta http-equiv="refresh" content="0;url={base}/refresh">'),
        page(RED_BOX + f'<script>location.href = "{base}/location";</script>'),
        page(
            RED_BOX + f'<a id="a" href="{base}/blank" target="_blank">x</a>',
            f"""<script>
              for (let i = 0; i < 100; i++) window.open("{base}/popup" + i);
              addEventListener("load", () => document.getElementById("a").click());
            </script>""",
        ),
    ]
    for html in pages:
        started = time.monotonic()
        result = renderer.render(html)
        assert time.monotonic() - started < BOUND_S
        assert result.status == "ok", result.error
        assert pixel(result, 100, 100) == RED_500  # still the page itself, not an error page
    # A navigation started by a script in <head>, before the first paint, is cancelled inside the page: the parser
    # goes on and the page renders (refused by the router instead, it used to stop the parser and end as a timeout).
    for script in (f'location.replace("{base}/early")', f'location.href = "{base}/early"', "location.reload()"):
        started = time.monotonic()
        early = renderer.render(page(RED_BOX, f"<script>{script};</script>"))
        assert time.monotonic() - started < BOUND_S
        assert early.status == "ok", (script, early.error)
        assert pixel(early, 100, 100) == RED_500
    time.sleep(0.5)
    assert listener.connections == []
    assert_still_works(renderer)


@pytest.mark.browser
def test_file_urls_are_not_loaded(renderer: Renderer, tmp_path: Path) -> None:
    secret = tmp_path / "reference.html"
    secret.write_text('<html><body style="margin:0;background:rgb(0,255,0)">SECRET</body></html>')
    iframe = f'<iframe src="file://{secret}" style="border:0;width:400px;height:300px"></iframe>'
    result = renderer.render(page(iframe + f'<img src="file://{secret}">'))
    assert result.status == "ok", result.error
    assert pixel(result, 200, 150) != GREEN
    assert_still_works(renderer)


@pytest.mark.browser
def test_a_50mb_dom_is_bounded(renderer: Renderer) -> None:
    script = "<script>document.body.innerHTML = ('<div>' + 'x'.repeat(1000) + '</div>').repeat(50000);</script>"
    started = time.monotonic()
    result = renderer.render(page("", "") + script)
    assert time.monotonic() - started < BOUND_S
    assert result.status in ("ok", "timeout", "error")
    assert (result.png is not None) == (result.status == "ok")
    print(f"50 MB DOM: {result.status} in {result.duration_s:.1f} s ({result.error})")
    assert_still_works(renderer)


@pytest.mark.browser
def test_a_killed_browser_is_relaunched(renderer: Renderer) -> None:
    assert_still_works(renderer)  # the browser is up
    assert renderer.kill_browser() >= 1
    assert_still_works(renderer)


@pytest.mark.browser
def test_concurrent_async_renders() -> None:
    import asyncio

    instance = make_renderer()

    async def both() -> list[RenderResult]:
        return list(await asyncio.gather(*(instance.arender(page(RED_BOX)) for _ in range(3))))

    try:
        results = asyncio.run(both())
    finally:
        instance.close()
    assert [r.status for r in results] == ["ok"] * 3
    assert len({r.png for r in results}) == 1
    with pytest.raises(ConfigError, match="closed"):
        instance.render("<p>x</p>")


# -- reused contexts, the trimmed stylesheet, determinism ----------------------------------------------------------------

BLUE_500 = (59, 130, 246)
BLUE_BOX = '<div class="bg-blue-500" style="width:200px;height:200px"></div>'
PAINT_GREEN = "<script>document.documentElement.style.background = 'rgb(0, 255, 0)';</script>"


@pytest.mark.browser
def test_static_pages_share_a_context_with_scripting_off() -> None:
    instance = make_renderer(replace(CONFIG, concurrency=1))
    try:
        red = instance.render(page(RED_BOX))
        assert red.status == "ok" and pixel(red, 100, 100) == RED_500
        [slot] = instance._idle
        # The next static page reuses the context and gets its own trimmed stylesheet, not the previous page's.
        blue = instance.render(page(BLUE_BOX))
        assert blue.status == "ok" and pixel(blue, 100, 100) == BLUE_500
        assert instance._idle == [slot] and slot.renders == 2
        # Scripting is off in that context: a script does not run there even if the classifier had missed it.
        html = page(RED_BOX, PAINT_GREEN)
        forced = on_loop(instance, instance._render_static(html.encode(), instance._css, time.monotonic(), False))[0]
        assert forced.status == "ok" and pixel(forced, 600, 300) == (255, 255, 255)
        assert pixel(forced, 100, 100) == RED_500  # the whole stylesheet works there too
        # The same page as a scripted one runs in a fresh context of its own; the shared one is not touched.
        scripted = instance.render(html)
        assert scripted.status == "ok" and pixel(scripted, 600, 300) == GREEN
        assert instance._idle == [slot] and slot.renders == 3
    finally:
        instance.close()


@pytest.mark.browser
def test_a_context_is_replaced_after_renders_per_context_and_after_a_failure() -> None:
    instance = make_renderer(replace(CONFIG, concurrency=1, renders_per_context=2))
    try:
        assert instance.render(page(RED_BOX)).status == "ok"
        [first] = instance._idle
        assert instance.render(page(BLUE_BOX)).status == "ok"
        assert instance._idle == []  # its second page: closed
        assert instance.render(page(RED_BOX)).status == "ok"
        [second] = instance._idle
        assert second is not first
        huge = instance.render(page('<div style="height:100px"></div>' * 2000 + "<p>x</p>" * 400_000))
        assert huge.status in ("ok", "timeout", "error")
        if huge.status != "ok":
            assert instance._idle == []  # a context that failed is never reused
        assert_still_works(instance)
    finally:
        instance.close()


WRITER = page(
    RED_BOX,
    """<script>
      localStorage.setItem("k", "1"); sessionStorage.setItem("k", "1"); document.cookie = "k=1; max-age=3600";
      window.name = "k"; indexedDB.open("k"); caches.open("k").catch(() => {});
      navigator.serviceWorker.register("/sw.js").catch(() => {});
      setInterval(() => { localStorage.setItem("late", "1"); document.cookie = "late=1"; }, 5);
      addEventListener("pagehide", () => localStorage.setItem("hidden", "1"));
      window.open("/popup");
    </script>""",
)
READER = page(
    "",
    """<script>
      const leaked = [localStorage.length, sessionStorage.length, document.cookie.length, window.name.length]
        .some(Boolean);
      document.documentElement.style.background = leaked ? "rgb(255, 0, 0)" : "rgb(0, 255, 0)";
    </script>""",
)


@pytest.mark.browser
def test_no_state_passes_from_one_page_to_the_next(renderer: Renderer) -> None:
    assert renderer.render(WRITER).status == "ok"
    assert pixel(renderer.render(READER), 600, 300) == GREEN
    assert renderer.render(page(RED_BOX)).status == "ok"  # a static page in between (reused context)
    assert pixel(renderer.render(READER), 600, 300) == GREEN

    async def side_by_side() -> list[RenderResult]:
        return list(await asyncio.gather(*(renderer.arender(html) for html in (WRITER, READER, WRITER, READER))))

    for result in asyncio.run(side_by_side())[1::2]:
        assert pixel(result, 600, 300) == GREEN


DETERMINISM_PAGES = [
    page(RED_BOX),
    page(
        '<div class="fixed top-0 left-0 w-full h-16 bg-red-500"></div><div class="sticky top-0 h-8 bg-blue-500"></div>'
        '<div style="height:2000px"></div>'
    ),
    # Autofocus scrolls this page down: the next page in the same context must not start scrolled.
    page('<div class="fixed top-0 w-full h-16 bg-red-500"></div><div style="height:2000px"></div><input autofocus>'),
    page(
        '<div class="animate-spin bg-red-500 w-16 h-16"></div><div class="animate-ping bg-blue-500 w-8 h-8"></div>'
        '<progress></progress><video autoplay muted loop src="v.mp4" class="w-64 h-32 bg-black"></video>'
    ),
    page('<img src="https://picsum.photos/id/48/640/480" class="w-1/2"><img src="https://picsum.photos/200">'),
    "<!DOCTYPE html>" + page('<table><tr><td class="p-2"><img src="https://picsum.photos/20/20"></td></tr></table>'),
    page('<table><tr><td class="p-2"><img src="https://picsum.photos/20/20"></td></tr></table>'),  # quirks mode
    page(
        RED_BOX, "<script>document.body.insertAdjacentHTML('beforeend', '<p class=\"text-3xl\">scripted</p>')</script>"
    ),
]


@pytest.mark.browser
def test_the_same_page_gives_the_same_bytes_in_any_order_and_concurrency() -> None:
    pages = DETERMINISM_PAGES
    serial = make_renderer(replace(CONFIG, concurrency=1))
    parallel = make_renderer(replace(CONFIG, concurrency=3))
    fresh = make_renderer(replace(CONFIG, concurrency=1, renders_per_context=1))  # a new context for every page

    async def all_at_once(instance: Renderer, htmls: list[str]) -> list[RenderResult]:
        return list(await asyncio.gather(*(instance.arender(html) for html in htmls)))

    try:
        forward = [serial.render(html) for html in pages]
        backward = [serial.render(html) for html in reversed(pages)][::-1]
        together = asyncio.run(all_at_once(parallel, pages + pages[::-1]))
        alone = [fresh.render(html) for html in pages]
    finally:
        for instance in (serial, parallel, fresh):
            instance.close()
    for i, html in enumerate(pages):
        runs = [forward[i], backward[i], together[i], together[-1 - i], alone[i]]
        assert all(run.status == "ok" for run in runs), (i, [run.error for run in runs])
        assert len({run.png for run in runs}) == 1, (i, html)


@pytest.mark.browser
def test_concurrent_renders_each_get_a_context() -> None:
    instance = make_renderer(replace(CONFIG, concurrency=2))

    async def four() -> list[RenderResult]:
        return list(await asyncio.gather(*(instance.arender(page(f"{RED_BOX}<p>{i}</p>")) for i in range(4))))

    try:
        results = asyncio.run(four())
        assert [r.status for r in results] == ["ok"] * 4
        assert len(instance._idle) == 2  # two ran at once, in two contexts, reused for the other two
        renders = [slot.renders for slot in instance._idle]
        assert sum(renders) == 4 and min(renders) >= 1  # how the four split between them is the scheduler's
        # Killed while idle: the next renders notice, relaunch and still succeed.
        assert instance.kill_browser() >= 1
        results = asyncio.run(four())
        assert [r.status for r in results] == ["ok"] * 4
    finally:
        instance.close()


TRICKY = page(
    """<div class="container mx-auto md:w-1/2 2xl:px-8 w-1.5 -mt-2 sm:-mx-4 lg:hidden xl:block hidden md:flex">
      <div class="group p-4"><p class="group-hover:text-red-500 text-3xl font-bold truncate">Group</p></div>
      <ul class="flex space-x-4 divide-x divide-gray-300"><li>a</li><li>b</li><li>c</li></ul>
      <div class="grid grid-cols-3 gap-4"><div class="bg-gradient-to-r from-red-500 to-blue-500 h-8"></div>
      <div class="transform rotate-45 scale-75 bg-green-500 h-8 shadow-lg ring-2 ring-offset-2 rounded-xl"></div></div>
      <input class="placeholder-gray-500 border-2 focus:ring-4" placeholder="Type here">
      <p class="BG-Yellow-300 TEXT-Pink-600">quirks: case-insensitive classes</p>
      <p class="bg&#x2d;purple&#45;500 text-white">a class written with character references</p>
      <p class="sr-only">hidden</p><div class="animate-pulse bg-indigo-300 h-4 w-1/4"></div>
    </div>"""
)


@pytest.mark.browser
def test_the_trimmed_stylesheet_renders_like_the_whole_one(renderer: Renderer) -> None:
    assert is_static(TRICKY)
    trimmed = renderer.render(TRICKY)
    whole = on_loop(renderer, renderer._render_static(TRICKY.encode(), renderer._css, time.monotonic(), False))[0]
    assert trimmed.status == whole.status == "ok"
    assert trimmed.png == whole.png


def tailwind_colours() -> dict[str, tuple[int, int, int]]:
    """Tailwind's solid background colours by class name (bg-red-500 -> (239, 68, 68)), white left out."""
    pattern = r"\.(bg-[a-z]+-\d+|bg-black)\{--tw-bg-opacity:1;background-color:rgba\((\d+),(\d+),(\d+),"
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        for m in re.finditer(pattern, load_tailwind_css().decode())
    }


@pytest.mark.browser
@pytest.mark.slow
def test_every_sample_page_renders_offline_with_tailwind(renderer: Renderer, shared_frontend_sample: list[str]) -> None:
    """All 150 reference pages: ``ok``, 1280 px wide, Tailwind applied, and (every 10th) byte-identical to a render
    with the whole stylesheet. Applied: a solid Tailwind background colour the page uses covers >= 100 px of the
    screenshot, or else (no such class, or covered by a picture) the screenshot differs from the page rendered
    without Tailwind."""
    colours = tailwind_colours()
    unstyled = 0
    assert sum(map(is_static, shared_frontend_sample)) == len(shared_frontend_sample)
    for i, html in enumerate(shared_frontend_sample):
        result = renderer.render(html)
        assert result.status == "ok", (i, result.error)
        assert result.png is not None and result.size is not None
        assert result.size[0] == 1280 and 720 <= result.size[1] <= CONFIG.max_height
        pixels = png_array(result.png)
        used = {
            colours[name]
            for name in re.findall(r"(?<![\w:/-])(bg-[a-z]+-\d+|bg-black)(?![\w:/-])", html)
            if name in colours
        }
        if not any(int(np.count_nonzero(np.all(pixels == np.array(rgb, np.uint8), axis=2))) >= 100 for rgb in used):
            unstyled += 1  # no Tailwind background in sight (none used, or covered by a picture): compare instead
            bare = renderer.render(html.replace("tailwindcss@2.2.19", "no-tailwind"))
            assert bare.status == "ok" and bare.png != result.png, i
        if i % 10 == 0:
            whole = on_loop(renderer, renderer._render_static(html.encode(), renderer._css, time.monotonic(), False))[0]
            assert whole.png == result.png, i
    assert unstyled < len(shared_frontend_sample) // 5, unstyled
