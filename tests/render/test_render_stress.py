"""The same pages rendered many times while the CPU is busy: every render gives the same pixels and the same blocks.

A reference once scored 0.84 against itself in a long scoring run on two busy cores: its blocks were read under a
wall-clock bound on the hit tests, which a loaded machine reached on one render and not on the next. Every bound of
the reading is a count now (``page_reader.HIT_TEST_WORK``); this test holds renders to it under load, on pages of
the kinds that vary most: a fixed full-page background image, background images, a page whose hit tests are many.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from chromium import renderer_or_skip
from paths import REPO

from colbench.render import RenderConfig

SAMPLE = REPO / "tasks" / "samples" / "frontend-sample.jsonl"
TAILWIND = '<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">'
SECTIONS = "".join(
    f'<section class="p-8 m-4 bg-white bg-opacity-75 rounded"><h2 class="text-3xl">Section {i}</h2>'
    f'<p class="text-lg text-gray-700">Text of section {i}.</p><img src="https://picsum.photos/id/48/400/200"></section>'
    for i in range(8)
)
FIXED_BACKGROUND = (
    f"<html><head>{TAILWIND}</head><body class='bg-fixed bg-cover bg-center' "
    f"style=\"background-image: url('https://picsum.photos/id/48/1920/1080')\">{SECTIONS}</body></html>"
)
FIXED_LAYER = (
    f"<html><head>{TAILWIND}</head><body><div class='fixed inset-0 bg-cover' "
    f"style='background-image: url(https://picsum.photos/id/48/1280/720)'></div><div class='relative'>{SECTIONS}</div>"
    "<script>document.title = 'scripted';</script></body></html>"
)
# Many small boxes of text: some thousands of hit tests, which took a loaded machine past the old one-second bound.
MANY_TESTS = (
    f"<html><head>{TAILWIND}</head><body><div class='grid grid-cols-12 gap-1'>"
    + "".join(
        f"<div class='bg-blue-{100 * (1 + i % 5)} p-1 text-xs'>cell {i}<br>row {i // 12}</div>" for i in range(1200)
    )
    + "</div></body></html>"
)


def _burn(stop: multiprocessing.synchronize.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1


@pytest.fixture(scope="module")
def busy() -> Iterator[None]:
    """Two processes spinning on the two cores for as long as the test renders."""
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True) for _ in range(2)]
    for burner in burners:
        burner.start()
    yield
    stop.set()
    for burner in burners:
        burner.join(timeout=5)


@pytest.mark.slow
@pytest.mark.browser
def test_renders_under_load_give_identical_pixels_and_blocks(busy: None) -> None:
    sample = [json.loads(line)["ground_truth"] for line in SAMPLE.read_text().splitlines()]
    with_images = [html for html in sample if "background-image" in html or "<img" in html][:2]
    pages = {"fixed background": FIXED_BACKGROUND, "fixed layer, scripted": FIXED_LAYER, "many hit tests": MANY_TESTS}
    pages.update({f"sample {i}": html for i, html in enumerate(with_images)})
    renderer = renderer_or_skip(RenderConfig(load_timeout_s=30.0, screenshot_timeout_s=30.0, close_timeout_s=10.0))
    jobs = [name for _ in range(6) for name in pages]
    with renderer, ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda name: renderer.render(pages[name], blocks=True), jobs))
    seen: dict[str, set[tuple[str, str]]] = {}
    for name, result in zip(jobs, results, strict=True):
        assert result.status == "ok", f"{name}: {result.status} {result.error}"
        assert result.png is not None and result.blocks
        pixels = hashlib.sha256(result.png).hexdigest()
        seen.setdefault(name, set()).add((pixels, repr((result.blocks, result.blocks_note))))
    assert {name: len(kinds) for name, kinds in seen.items()} == dict.fromkeys(pages, 1)
