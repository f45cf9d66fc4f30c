"""The frontend renderer: placeholder images, Tailwind offline, real ColBench pages, and hostile pages.

Browser tests drive the real headless Chromium (``@pytest.mark.browser``) and share one Renderer per module; they skip,
saying why, where Playwright or Chromium is missing.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

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
from colbench.render.stylesheet import StylesheetIndex, required_classes

SHARED_FRONTEND = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "frontend_test_sample.jsonl"
TAILWIND = "https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css"
RED_500 = (239, 68, 68)
GREEN = (0, 255, 0)
# Short timeouts keep the hostile tests fast; real pages render in well under a second.
CONFIG = RenderConfig(load_timeout_s=4.0, screenshot_timeout_s=3.0, close_timeout_s=3.0)
BOUND_S = CONFIG.load_timeout_s + CONFIG.screenshot_timeout_s + 2 * CONFIG.close_timeout_s + 5


def decode_png(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced): width, height, unfiltered rows, bytes per pixel."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def pixel(result: RenderResult, x: int, y: int) -> tuple[int, int, int]:
    assert result.png is not None, result
    _, _, rows, bpp = decode_png(result.png)
    r, g, b = rows[y][x * bpp : x * bpp + 3]
    return r, g, b


def page(body: str, head: str = "") -> str:
    return f'<html><head><link href="{TAILWIND}" rel="stylesheet">{head}</head><body class="m-0">{body}</body></html>'


RED_BOX = '<div class="bg-red-500" style="width:200px;height:200px"></div>'


# -- no browser needed -------------------------------------------------------------------------------------------------


def test_placeholder_png_has_the_requested_size_and_fixed_bytes() -> None:
    png = placeholder_png(300, 200)
    width, height, rows, _ = decode_png(png)
    assert (width, height) == (300, 200)
    assert rows[0][:3] != rows[-1][:3]  # a gradient, not a flat colour
    assert placeholder_png(300, 200) == png
    assert decode_png(placeholder_png(1, 1))[:2] == (1, 1)
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
def renderer() -> Iterator[Renderer]:
    try:
        instance = Renderer(CONFIG, cache_size=4)
    except ConfigError as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")
    yield instance
    instance.close()


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
    expected = decode_png(placeholder_png(300, 200))[2]
    assert pixel(first, 150, 100) == tuple(expected[100][450:453])
    assert pixel(first, 299, 199) == tuple(expected[199][897:900])
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
def test_real_colbench_pages_render_offline(renderer: Renderer, tmp_path: Path) -> None:
    if not SHARED_FRONTEND.exists():
        pytest.skip(f"the ColBench frontend sample is not present at {SHARED_FRONTEND}")
    rows = [json.loads(line) for line in SHARED_FRONTEND.read_text().splitlines()[:10]]
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
    # A navigation started before the first paint (a script in <head>) leaves Chromium's rendering deferred once
    # the navigation is refused: a bounded timeout, documented in the renderer.
    started = time.monotonic()
    early = renderer.render(page(RED_BOX, f'<script>location.replace("{base}/early");</script>'))
    assert time.monotonic() - started < BOUND_S
    assert early.status in ("ok", "timeout")
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

    try:
        instance = Renderer(CONFIG, cache_size=0)
    except ConfigError as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")

    async def both() -> list[RenderResult]:
        return list(await asyncio.gather(*(instance.render_async(page(RED_BOX)) for _ in range(3))))

    try:
        results = asyncio.run(both())
    finally:
        instance.close()
    assert [r.status for r in results] == ["ok"] * 3
    assert len({r.png for r in results}) == 1
    with pytest.raises(ConfigError, match="closed"):
        instance.render("<p>x</p>")
