"""A rendered page's visible blocks: what they hold, what a page cannot hide or fake, bounds, caching, painting over.

Every page of the module is rendered once, all together through one Renderer (``rendered``), and the tests look
their results up: the attack pages each hide the words ``SECRET`` in one way (no block may hold them) and come with
a control page that shows them by the nearest honest means (a block must hold them).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from chromium import renderer_or_skip
from paths import REPO
from PIL import Image

from colbench.errors import DataError
from colbench.render import MAX_BLOCKS, PageBlock, RenderConfig, Renderer, RenderResult, page_reader, paint_over_text
from colbench.render import renderer as renderer_module
from colbench.render.ink import MIN_CONTRAST, confirm
from colbench.render.page_reader import MAX_NODES, ElementBox, PageReading, TextRun

SAMPLE = REPO / "tasks" / "samples" / "frontend-sample.jsonl"
CONFIG = RenderConfig(load_timeout_s=8.0, screenshot_timeout_s=8.0, close_timeout_s=3.0)
SECRET = "SECRET reference words"
STYLE = "<style>body{margin:0;font:20px/30px sans-serif;color:#111}p{margin:0 0 10px 0}</style>"


def page(body: str, head: str = "") -> str:
    return f"<!doctype html><html><head>{STYLE}{head}</head><body><p>Control line</p>{body}</body></html>"


def secret(style: str = "", tag: str = "p") -> str:
    return f'<{tag} style="{style}">{SECRET}</{tag}>'


# (name, the page hiding the secret, the control page showing it)
ATTACKS: list[tuple[str, str, str]] = [
    ("display none", secret("display:none"), secret()),
    ("hidden attribute", f"<p hidden>{SECRET}</p>", secret()),
    (
        "visibility hidden through display: contents",
        f'<div style="display:contents;visibility:hidden">{SECRET}</div>',
        f'<div style="display:contents">{SECRET}</div>',
    ),
    ("visibility hidden", f'<div style="visibility:hidden">{secret()}</div>', f"<div>{secret()}</div>"),
    (
        "opacity 0 up the chain",
        f'<div style="opacity:0"><div>{secret()}</div></div>',
        f"<div><div>{secret()}</div></div>",
    ),
    ("opacity 0.05", secret("opacity:0.05"), secret("opacity:0.9")),
    (
        "filter opacity(0)",
        f'<div style="filter:opacity(0)">{secret()}</div>',
        f'<div style="filter:opacity(1)">{secret()}</div>',
    ),
    ("zero size", secret("width:0;height:0;overflow:hidden"), secret("overflow:hidden")),
    ("font-size 0", secret("font-size:0"), secret("font-size:20px")),
    (
        "off screen left",
        secret("position:absolute;left:-5000px;top:100px"),
        secret("position:absolute;left:10px;top:100px"),
    ),
    (
        "off screen right",
        secret("position:absolute;left:3000px;top:100px"),
        secret("position:absolute;left:600px;top:100px"),
    ),
    (
        "under its parent's background (negative z-index)",
        f'<div style="background:#fafafa;height:60px">{secret("position:relative;z-index:-1")}</div>',
        f'<div style="background:#fafafa;height:60px">{secret("position:relative;z-index:1")}</div>',
    ),
    ("negative top", secret("position:absolute;top:-300px"), secret("position:absolute;top:300px")),
    ("text-indent -9999px", secret("text-indent:-9999px;overflow:hidden"), secret("text-indent:20px;overflow:hidden")),
    ("below the max_height cut", secret("margin-top:3000px"), secret("margin-top:2000px")),
    ("colour transparent", secret("color:transparent"), secret("color:#111")),
    ("rgba alpha 0", secret("color:rgba(0,0,0,0)"), secret("color:rgba(0,0,0,1)")),
    ("text-fill transparent", secret("-webkit-text-fill-color:transparent"), secret("-webkit-text-fill-color:#111")),
    ("same colour as background", secret("color:#fff"), secret("color:#777")),
    ("nearly the background", secret("background:#336699;color:#33669f"), secret("background:#336699;color:#fff")),
    (
        "clipped by a zero-size parent",
        f'<div style="width:0;height:0;overflow:hidden">{secret()}</div>',
        f'<div style="width:600px;height:40px;overflow:hidden">{secret()}</div>',
    ),
    (
        "clip rect",
        secret("position:absolute;top:200px;clip:rect(0 0 0 0)"),
        secret("position:absolute;top:200px;clip:auto"),
    ),
    ("clip-path", secret("clip-path:inset(50%)"), secret("clip-path:inset(0)")),
    ("transform scale(0)", secret("transform:scale(0)"), secret("transform:scale(1)")),
    (
        "covered by an opaque overlay",
        f'<div style="position:relative">{secret()}<div style="position:absolute;inset:0;background:#fff"></div></div>',
        f'<div style="position:relative">{secret()}<div style="position:absolute;inset:0"></div></div>',
    ),
    (
        "covered by an overlay with text of its own",
        f'<div style="position:relative">{secret()}'
        '<div style="position:absolute;inset:0;background:#fff;color:#111">Decoy words drawn on top</div></div>',
        f'<div style="position:relative">{secret()}</div><div>Decoy words drawn on top</div>',
    ),
    (
        "under a higher z-index",
        f'<div style="position:relative">{secret("position:relative;z-index:1")}'
        '<div style="position:absolute;inset:0;background:#eee;z-index:2"></div></div>',
        f'<div style="position:relative">{secret("position:relative;z-index:3")}'
        '<div style="position:absolute;inset:0;background:#eee;z-index:2"></div></div>',
    ),
    (
        "covered by an overlay the hit test cannot see",
        f'<div style="position:relative">{secret()}'
        '<div style="position:absolute;inset:0;background:#fff;pointer-events:none"></div></div>',
        f'<div style="position:relative">{secret()}<div style="position:absolute;inset:0;pointer-events:none"></div></div>',
    ),
    (
        "covered by text that keeps the hit test off with !important",
        f'<div style="position:relative">{secret()}<div style="position:absolute;inset:0;background:#fff;color:#111;'
        'pointer-events:none !important">DECOYS reference words</div></div>',
        f'<div style="position:relative">{secret()}<div style="position:absolute;inset:0;'
        'pointer-events:none !important"></div></div>',
    ),
    (
        "covered by generated text",
        f'<div style="position:relative">{secret()}<div class="cover" style="position:absolute;inset:0"></div></div>'
        '<style>.cover::before{content:"DECOYS reference words";position:absolute;inset:0;background:#fff;color:#111}'
        "</style>",
        f'<div style="position:relative">{secret()}<div class="cover" style="position:absolute;inset:0"></div></div>',
    ),
    (
        "covered by inert text",
        f'<div style="position:relative">{secret()}<div inert style="position:absolute;inset:0;background:#fff;'
        'color:#111">DECOYS reference words</div></div>',
        f'<div style="position:relative">{secret()}<div inert style="position:absolute;inset:0"></div></div>',
    ),
    (
        "under an image",
        f'<div style="position:relative">{secret()}<img src="https://via.placeholder.com/600x40" '
        'style="position:absolute;left:0;top:0;width:600px;height:40px"></div>',
        f'<div style="position:relative">{secret()}</div>',
    ),
    (
        "white text over other visible text",
        '<div style="position:relative"><p>Other words of the same length!</p>'
        f"{secret('position:absolute;top:0;left:0;color:#fff')}</div>",
        f'<div style="position:relative"><p>Other words of the same length!</p>{secret()}</div>',
    ),
    (
        "covered far down the page",
        f'<div style="position:relative;margin-top:1500px">{secret()}'
        '<div style="position:absolute;inset:0;background:#fff"></div></div>',
        f'<div style="position:relative;margin-top:1500px">{secret()}<div style="position:absolute;inset:0"></div></div>',
    ),
    ("drawn as discs", secret("-webkit-text-security:disc"), secret("-webkit-text-security:none")),
    ("characters reversed", secret("direction:rtl;unicode-bidi:bidi-override"), secret("direction:rtl")),
    (
        "reversed by an ancestor",
        f'<div style="direction:rtl;unicode-bidi:bidi-override"><span>{SECRET}</span></div>',
        f'<div style="direction:rtl"><span>{SECRET}</span></div>',
    ),
    ("squeezed by letter-spacing", secret("letter-spacing:-12px"), secret("letter-spacing:2px")),
    ("squeezed by scaleX", secret("transform:scaleX(0.04);transform-origin:0 0"), secret("transform:scaleX(0.8)")),
    ("a font 4 px high", secret("font-size:4px"), secret("font-size:9px")),
    (
        "closed details",
        f"<details><summary>Summary</summary>{secret()}</details>",
        f"<details open><summary>Summary</summary>{secret()}</details>",
    ),
    ("content-visibility hidden", secret("content-visibility:hidden"), secret("content-visibility:visible")),
    ("inside a select", f"<select><option>{SECRET}</option></select>", secret()),
    ("inside a template", f"<template>{secret()}</template>", secret()),
    ("inside a textarea", f"<textarea>{SECRET}</textarea>", secret()),
    ("in an SVG", f'<svg width="600" height="40"><text x="0" y="30">{SECRET}</text></svg>', secret()),
    (
        "gradient clip with nothing to show",
        secret("-webkit-background-clip:text;background-clip:text;color:transparent"),
        secret(
            "background:linear-gradient(90deg,#c00,#00c);-webkit-background-clip:text;background-clip:text;"
            "color:transparent;display:inline-block"
        ),
    ),
]


FONT_FILES = sorted(Path("/usr/share/fonts").rglob("*.ttf")) if Path("/usr/share/fonts").is_dir() else []


def font_page(family: str) -> str:
    """A page whose secret is set in a font it brings itself (a data: URL) if ``family`` names it first."""
    data = base64.b64encode(FONT_FILES[0].read_bytes()).decode()
    face = f"<style>@font-face{{font-family:PageFont;src:url(data:font/ttf;base64,{data})}}</style>"
    return page(secret(f"font-family:{family}"), face)


# Everything a page's own script could bend in its world, then the secret hidden by opacity and a control shown;
# a second script swaps the control's words once the page has loaded (the render stops scripts from then on).
TAMPER = """<script>
const fake = {x: 0, y: 0, left: 0, top: 0, right: 500, bottom: 40, width: 500, height: 40};
Element.prototype.getBoundingClientRect = () => fake;
Element.prototype.getClientRects = () => [fake];
Range.prototype.getClientRects = function () { return [fake]; };
Range.prototype.getBoundingClientRect = () => fake;
Element.prototype.checkVisibility = () => true;
window.getComputedStyle = () => new Proxy({}, {get: () => "1"});
Document.prototype.elementsFromPoint = function () { return [document.getElementById("s")]; };
Document.prototype.createTreeWalker = () => ({currentNode: null, nextNode: () => null});
CanvasRenderingContext2D.prototype.getImageData = () => ({data: [0, 0, 0, 255]});
Object.defineProperty(Node.prototype, "parentElement", {get() { return document.body; }});
</script>"""
TAMPERED = page(
    f'<p id="s" style="opacity:0">{SECRET}</p><p id="c" style="color:#c00">Shown words</p>',
    TAMPER,
)
UNTAMPERED = page(f'<p id="s" style="opacity:0">{SECRET}</p><p id="c" style="color:#c00">Shown words</p>')

PLACED = (
    "<!doctype html><html><head><style>body{margin:0;background:#eef}</style></head><body>"
    '<p style="position:absolute;left:100px;top:200px;margin:0;font:20px/30px sans-serif;color:#d00">'
    "Hello <b>bold</b> world</p>"
    '<div style="position:absolute;left:600px;top:50px;width:300px;height:120px;background:#0a0"></div>'
    '<img style="position:absolute;left:100px;top:400px" width="200" height="100" src="https://via.placeholder.com/200x100">'
    "</body></html>"
)
SCRIPTS = page(
    '<p dir="rtl" style="text-align:right">שלום עולם, זה טקסט</p><p>مرحبا بالعالم</p><p>你好，世界。这是文字</p>'
    "<p>日本語のテキスト</p><p>😀 🎉 🚀</p><p>Ünïcödé àccents — ﬁne</p>"
)
# Each line's colour in one CSS form; all but the last three are red.
COLOURS = [
    "red",
    "#f00",
    "#f00f",
    "#ff0000",
    "#ff0000ff",
    "rgb(255 0 0)",
    "rgba(255, 0, 0, 1)",
    "hsl(0 100% 50%)",
    "hwb(0 0% 0%)",
    "lab(54.29 80.8 69.89)",
    "lch(54.29 106.84 40.85)",
    "oklab(0.628 0.2249 0.1258)",
    "oklch(0.628 0.2577 29.23)",
    "color(srgb 1 0 0)",
    "color-mix(in srgb, red 100%, blue 0%)",
    "currentColor",
    "CanvasText",
    "transparent",
    "Canvas",
]
COLOUR_PAGE = page(
    '<div style="color:red">'
    + "".join(f'<p style="color:{c}">Colour form {i}</p>' for i, c in enumerate(COLOURS))
    + "</div>"
)
MANY_BOXES = page(
    "".join(
        f'<div style="display:inline-block;margin:2px;background:#{i % 7}{i % 5}a;'
        f'width:{30 if i < 100 else 12}px;height:{30 if i < 100 else 12}px"></div>'
        for i in range(400)
    )
)
HUGE = "<!doctype html><html><body><p>" + "".join(f"w{i}<i></i> " for i in range(100_000)) + "</p></body></html>"
NO_TEXT = page("").replace("<p>Control line</p>", '<div style="width:300px;height:80px;background:#248"></div>')
# A fixed header covers the top of the viewport; scrolled down for the hit test, it must not hide text below.
FIXED_HEADER = page(
    '<div style="position:fixed;top:0;left:0;right:0;height:120px;background:#333"></div>'
    '<p style="margin-top:1500px">Far down the page</p><p style="margin-top:600px">Further down</p>'
)
# Text a script writes while the page loads, with a lone surrogate (the HTML parser would have replaced it).
SURROGATE = page('<p id="t">x</p><script>document.getElementById("t").textContent = "Odd \\ud800 text";</script>')
JOINS = page(
    '<p>Hel<b>lo</b> wor<i>ld</i></p><p>one<br>two</p><div><a href="#">Facebook</a>\n<a href="#">Twitter</a></div>'
    '<p>left <span style="opacity:0">hidden</span>right</p>'
)
# An infinite animation whose first frame hides the text: the screenshot cancels it, so the text shows (and counts).
FADING = "<style>@keyframes fade{from{opacity:0}to{opacity:1}}</style>"
SCRIPTED_FADE = page(f'<script>1</script><p style="animation:fade 1s infinite">{SECRET}</p>', FADING)
SCRIPTED_SAME = page("<script>1</script><h1>Same heading</h1><p>Same paragraph of text.</p>")
STATIC_SAME = page("<h1>Same heading</h1><p>Same paragraph of text.</p>")


def all_pages() -> dict[str, str]:
    pages = {f"hidden: {name}": page(hidden) for name, hidden, _ in ATTACKS}
    pages |= {f"shown: {name}": page(shown) for name, _, shown in ATTACKS}
    pages |= {
        "tampered": TAMPERED,
        "untampered": UNTAMPERED,
        "placed": PLACED,
        "scripts": SCRIPTS,
        "colours": COLOUR_PAGE,
        "many boxes": MANY_BOXES,
        "no text": NO_TEXT,
        "fixed header": FIXED_HEADER,
        "scripted fade": SCRIPTED_FADE,
        "joins": JOINS,
        "surrogate": SURROGATE,
        "scripted same": SCRIPTED_SAME,
        "static same": STATIC_SAME,
    }
    if FONT_FILES:
        pages["hidden: a font the page brought"] = font_page("PageFont, sans-serif")
        pages["shown: a font the page brought"] = font_page("sans-serif")
    return pages


@pytest.fixture(scope="module")
def renderer() -> Iterator[Renderer]:
    with renderer_or_skip(CONFIG, cache_size=8) as instance:
        yield instance


@pytest.fixture(scope="module")
def rendered(renderer: Renderer) -> dict[str, RenderResult]:
    pages = all_pages()

    async def render_all() -> list[RenderResult]:
        return list(await asyncio.gather(*(renderer.arender(html, blocks=True) for html in pages.values())))

    results = dict(zip(pages, asyncio.run(render_all()), strict=True))
    failed = {name: r.error for name, r in results.items() if r.status != "ok" or r.blocks is None}
    assert failed == {}
    return results


def texts(result: RenderResult) -> list[str]:
    assert result.blocks is not None
    return [b.text for b in result.blocks if b.kind == "text"]


def text_block(result: RenderResult, words: str) -> PageBlock:
    assert result.blocks is not None
    found = [b for b in result.blocks if b.kind == "text" and b.text == words]
    assert len(found) == 1, texts(result)
    return found[0]


def close(a: tuple[int, int, int], b: tuple[int, int, int], tolerance: int) -> bool:
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) <= tolerance


# -- what a block holds ------------------------------------------------------------------------------------------------


@pytest.mark.browser
def test_a_block_has_its_text_place_and_colours(rendered: dict[str, RenderResult]) -> None:
    result = rendered["placed"]
    block = text_block(result, "Hello bold world")  # the bold word merged into its paragraph's block
    assert abs(block.x - 100) <= 1 and block.y >= 200 and block.y + block.height <= 230  # within its line
    assert block.height >= 18  # the glyphs' height (the font's ascent and descent), not the line's
    assert 120 < block.width < 260
    assert close(block.color, (0xDD, 0, 0), 40) and close(block.background, (0xEE, 0xEE, 0xFF), 2)
    assert result.blocks is not None
    [box] = [b for b in result.blocks if b.kind == "box"]
    assert (box.x, box.y, box.width, box.height) == (600, 50, 300, 120) and close(box.color, (0, 0xAA, 0), 2)
    [image] = [b for b in result.blocks if b.kind == "image"]
    assert (image.x, image.y, image.width, image.height) == (100, 400, 200, 100)
    assert [b.kind for b in result.blocks] == ["box", "text", "image"]  # reading order


@pytest.mark.browser
def test_a_block_joins_its_runs_as_they_read(rendered: dict[str, RenderResult]) -> None:
    assert texts(rendered["joins"]) == ["Control line", "Hello world", "one two", "Facebook Twitter", "left right"]


@pytest.mark.browser
def test_text_in_any_script_or_direction_gives_a_block(rendered: dict[str, RenderResult]) -> None:
    result = rendered["scripts"]
    expected = ["שלום עולם, זה טקסט", "مرحبا بالعالم", "你好，世界。这是文字", "日本語のテキスト", "😀 🎉 🚀"]
    for words in [*expected, "Ünïcödé àccents — ﬁne"]:
        block = text_block(result, words)
        assert block.area > 100 and block.x >= 0 and block.x + block.width <= 1280
    assert text_block(result, expected[0]).x > 900  # right-aligned, right to left
    assert text_block(result, expected[1]).x < 300


@pytest.mark.browser
def test_every_css_colour_form_gives_a_defined_block(rendered: dict[str, RenderResult]) -> None:
    result = rendered["colours"]
    for i, form in enumerate(COLOURS):
        words = f"Colour form {i}"
        if form in ("transparent", "Canvas"):  # nothing to see (Canvas is the page's own white)
            assert words not in texts(result), form
            continue
        block = text_block(result, words)
        expected = (0, 0, 0) if form == "CanvasText" else (255, 0, 0)
        assert close(block.color, expected, 48), (form, block.color)


@pytest.mark.browser
def test_a_page_without_text_has_no_text_blocks(rendered: dict[str, RenderResult]) -> None:
    result = rendered["no text"]
    assert texts(result) == [] and result.blocks_note is None
    assert result.blocks is not None and [b.kind for b in result.blocks] == ["box"]


# -- what a page cannot hide or fake -----------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("name", [name for name, _, _ in ATTACKS] + ["a font the page brought"])
def test_hidden_text_gives_no_block_and_shown_text_does(name: str, rendered: dict[str, RenderResult]) -> None:
    if f"hidden: {name}" not in rendered:
        pytest.skip("no TrueType font under /usr/share/fonts to serve as the page's own font")
    hidden, shown = rendered[f"hidden: {name}"], rendered[f"shown: {name}"]
    assert "Control line" in texts(hidden) and "Control line" in texts(shown)
    assert not any("SECRET" in words for words in texts(hidden)), texts(hidden)
    if name.startswith("inside a") or name == "in an SVG":
        return  # these hold text colbench never reads; the control is a plain paragraph
    assert SECRET in texts(shown), texts(shown)


@pytest.mark.browser
def test_a_page_script_cannot_bend_the_reading(rendered: dict[str, RenderResult]) -> None:
    tampered, honest = rendered["tampered"], rendered["untampered"]
    assert not any("SECRET" in words for words in texts(tampered))
    assert tampered.blocks == honest.blocks  # the scripted page reads exactly as its static twin
    assert texts(tampered) == ["Control line", "Shown words"]


@pytest.mark.browser
def test_animations_are_read_as_the_screenshot_shows_them(rendered: dict[str, RenderResult]) -> None:
    assert SECRET in texts(rendered["scripted fade"])


@pytest.mark.browser
def test_a_scripted_page_reads_as_its_static_twin(rendered: dict[str, RenderResult]) -> None:
    assert rendered["scripted same"].blocks == rendered["static same"].blocks
    assert texts(rendered["static same"]) == ["Control line", "Same heading", "Same paragraph of text."]


@pytest.mark.browser
def test_text_far_down_a_long_page_counts_under_a_fixed_header(rendered: dict[str, RenderResult]) -> None:
    result = rendered["fixed header"]
    assert texts(result) == ["Far down the page", "Further down"]  # the header covers the control line
    assert text_block(result, "Further down").y > 2000


@pytest.mark.browser
def test_text_with_a_lone_surrogate_is_kept_well_formed(rendered: dict[str, RenderResult]) -> None:
    block = text_block(rendered["surrogate"], "Odd \ufffd text")
    assert json.dumps(block.as_record(), ensure_ascii=False).encode("utf-8")


# -- bounds, determinism, caching --------------------------------------------------------------------------------------


@pytest.mark.browser
def test_blocks_are_capped_at_the_largest(rendered: dict[str, RenderResult]) -> None:
    result = rendered["many boxes"]
    assert result.blocks is not None and len(result.blocks) == MAX_BLOCKS
    boxes = [b for b in result.blocks if b.kind == "box"]
    assert sum(1 for b in boxes if b.width == 30) == 100  # every large box kept, small ones fill the rest
    assert result.blocks_note is not None and f"kept the {MAX_BLOCKS} largest of 401 blocks" in result.blocks_note


@pytest.mark.browser
def test_a_page_of_100000_text_nodes_is_read_within_bounds(renderer: Renderer) -> None:
    result = renderer.render(HUGE, blocks=True)
    assert result.status == "ok", result.error
    assert result.blocks is not None and 0 < len(result.blocks) <= MAX_BLOCKS
    assert result.blocks_note is not None and f"of at most {MAX_NODES} nodes" in result.blocks_note
    assert result.duration_s < CONFIG.load_timeout_s + CONFIG.screenshot_timeout_s
    [block] = [b for b in result.blocks if b.kind == "text"]
    assert block.text.startswith("w0 w1 w2") and block.y + block.height <= 2560


@pytest.mark.browser
def test_blocks_are_the_same_on_every_render(renderer: Renderer, rendered: dict[str, RenderResult]) -> None:
    sample = [json.loads(line)["ground_truth"] for line in SAMPLE.read_text().splitlines()[:3]]
    for html in sample:
        first, second = renderer.render(html, blocks=True), renderer.render(html, blocks=True)
        assert first.blocks and first.blocks == second.blocks and not second.cached
        assert any(b.kind == "text" for b in first.blocks)
    again = renderer.render(PLACED, blocks=True)
    assert again.blocks == rendered["placed"].blocks


@pytest.mark.browser
def test_the_cache_keys_on_blocks(renderer: Renderer) -> None:
    html = page("<p>Cached page</p>")
    plain = renderer.render(html, cache=True)
    assert plain.status == "ok" and plain.blocks is None
    with_blocks = renderer.render(html, cache=True, blocks=True)
    assert not with_blocks.cached and with_blocks.blocks is not None and "Cached page" in texts(with_blocks)
    assert renderer.render(html, cache=True, blocks=True).cached
    again = renderer.render(html, cache=True)
    assert again.cached and again.blocks is None


@pytest.mark.browser
def test_the_config_says_whether_a_render_reads_blocks_unless_the_call_does(
    renderer: Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    html = page("<p>Default page</p>")
    monkeypatch.setattr(renderer, "config", replace(renderer.config, blocks=True))
    assert "Default page" in texts(renderer.render(html))
    assert renderer.render(html, blocks=False).blocks is None


@pytest.mark.browser
def test_a_reading_that_fails_fails_the_render_and_the_next_one_works(
    renderer: Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    html = page("<p>Read me</p>")
    monkeypatch.setattr(page_reader, "_READ_JS", "(() => { throw new Error('the reader broke'); })")
    failed = renderer.render(html, blocks=True)
    assert failed.status == "error" and failed.png is None and failed.blocks is None
    assert failed.error is not None and "reading the page's blocks failed" in failed.error and "broke" in failed.error
    assert renderer.render(html).blocks is None  # a render without blocks never reads
    monkeypatch.undo()
    assert "Read me" in texts(renderer.render(html, blocks=True))

    def broken(png: bytes, reading: PageReading) -> None:
        raise ValueError("pixels went wrong")

    monkeypatch.setattr(renderer_module, "confirm", broken)
    failed = renderer.render(html, blocks=True)
    assert failed.status == "error" and failed.png is None and failed.blocks is None
    assert failed.error == "checking the page's blocks failed: ValueError: pixels went wrong"


# -- painting text over ------------------------------------------------------------------------------------------------


def pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"))


@pytest.mark.browser
def test_painting_over_text_leaves_no_ink_and_nothing_else_changed(rendered: dict[str, RenderResult]) -> None:
    result = rendered["placed"]
    assert result.png is not None and result.blocks is not None
    painted = paint_over_text(result.png, result.blocks)
    assert painted == paint_over_text(result.png, result.blocks)  # deterministic
    before, after = pixels(result.png), pixels(painted)
    block = text_block(result, "Hello bold world")
    x0, y0 = int(block.x), int(block.y)
    x1, y1 = int(np.ceil(block.x + block.width)), int(np.ceil(block.y + block.height))
    area = after[y0:y1, x0:x1].reshape(-1, 3).astype(int)
    assert np.abs(area - np.array(block.background)).max() < MIN_CONTRAST
    assert np.abs(before[y0:y1, x0:x1].astype(int) - np.array(block.background)).max() > 100  # there was ink
    outside = np.ones(before.shape[:2], dtype=bool)
    outside[y0:y1, x0:x1] = False
    assert (before[outside] == after[outside]).all()  # boxes and images untouched


def test_paint_over_text_fills_text_boxes_with_their_background() -> None:
    image = Image.new("RGB", (40, 20), (10, 20, 30))
    out = io.BytesIO()
    image.save(out, format="PNG")
    blocks = [
        PageBlock("text", 2.5, 3.2, 10.1, 5.0, "a", (0, 0, 0), (200, 100, 50)),
        PageBlock("box", 20, 0, 10, 10, "", (1, 2, 3), (1, 2, 3)),
        PageBlock("text", 30, 10, 0, 5, "empty box", (0, 0, 0), (255, 255, 255)),
    ]
    painted = pixels(paint_over_text(out.getvalue(), blocks))
    assert (painted[3:9, 2:13] == (200, 100, 50)).all()  # grown to whole pixels: x 2..12, y 3..8
    assert (painted[:, 13:] == (10, 20, 30)).all() and (painted[:3] == (10, 20, 30)).all()
    assert paint_over_text(out.getvalue(), blocks[1:2]) == out.getvalue()  # no text to paint: the same bytes
    with pytest.raises(DataError, match="not a readable image"):
        paint_over_text(b"not a png", blocks)
    with pytest.raises(DataError, match="not a readable image"):
        paint_over_text(out.getvalue()[:60], [])  # cut short


# -- the pixel checks alone (no browser) -------------------------------------------------------------------------------


def screenshot(draw_text: tuple[int, int, int] | None, background: tuple[int, int, int] = (250, 250, 250)) -> bytes:
    """A 400x100 screenshot, with a run of glyph-like bars in ``draw_text``'s colour at (10, 10, 200 x 20)."""
    image = Image.new("RGB", (400, 100), background)
    if draw_text is not None:
        for x in range(12, 205, 8):
            image.paste(draw_text, (x, 13, x + 3, 28))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def reading(*runs: TextRun, elements: tuple[ElementBox, ...] = ()) -> PageReading:
    return PageReading(tuple(runs), elements, 10, ())


RUN = TextRun(0, "Words", (20, 20, 200, 1.0), ((10.0, 10.0, 200.0, 20.0),))


@pytest.mark.parametrize(
    ("drawn", "declared", "kept"),
    [
        ((20, 20, 200), (20, 20, 200, 1.0), True),  # the declared colour is what is painted
        ((20, 20, 200), (20, 20, 200, 0.5), True),  # half transparent: a lighter blue is painted
        (None, (20, 20, 200, 1.0), False),  # nothing painted there
        ((200, 20, 20), (20, 20, 200, 1.0), False),  # other ink: another text's, not this one's
        ((245, 245, 245), (245, 245, 245, 1.0), False),  # too close to the background to see
        ((120, 120, 120), None, True),  # background-clip: text: any clear ink
        ((248, 248, 248), None, False),
    ],
)
def test_a_line_counts_only_with_its_own_ink(
    drawn: tuple[int, int, int] | None, declared: tuple[int, int, int, float] | None, kept: bool
) -> None:
    painted = drawn
    if drawn is not None and declared is not None and declared[3] < 1:  # what the browser paints: blended
        r, g, b = (round(c * declared[3] + 250 * (1 - declared[3])) for c in drawn)
        painted = (r, g, b)
    run = TextRun(0, "Words", declared, RUN.rects)
    result = confirm(screenshot(painted), reading(run))
    assert [block.text for block in result.blocks] == (["Words"] if kept else [])
    if kept:
        [block] = result.blocks
        assert block.background == (250, 250, 250) and painted is not None and close(block.color, painted, 8)


def test_runs_group_by_container_in_document_order() -> None:
    rect = RUN.rects
    runs = [
        TextRun(0, "One ", RUN.colour, rect),
        TextRun(0, "two", RUN.colour, rect),
        TextRun(1, "Three", RUN.colour, rect),
    ]
    runs += [TextRun(0, "four", RUN.colour, rect)]
    result = confirm(screenshot((20, 20, 200)), reading(*runs))
    assert [b.text for b in result.blocks] == ["One two", "Three", "four"]


def test_blocks_beyond_the_cap_are_the_smallest_and_the_note_says_so() -> None:
    boxes = tuple(
        ElementBox("image", (float(i % 40) * 10, float(i // 40) * 10, 9.0, 9.0 - (i % 2))) for i in range(320)
    )
    result = confirm(screenshot(None), reading(elements=boxes))
    assert len(result.blocks) == MAX_BLOCKS and sum(1 for b in result.blocks if b.height == 9.0) == 160
    assert result.note == f"kept the {MAX_BLOCKS} largest of 320 blocks"
    cut = PageReading((), boxes[:1], MAX_NODES, ("nodes walked",))
    assert "nodes walked" in (confirm(screenshot(None), cut).note or "")
