"""ColBench-Frontend-v1's metrics: each moves when, and only when, what it measures changes; on blocks made by hand
(the formulas) and on real pages rendered by headless Chromium (the whole reward, hiding attacks included)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from colbench.domains.frontend import DOMAIN, VISUAL_SUCCESS_THRESHOLD
from colbench.domains.frontend.scorer import FrontendScore, FrontendScorer
from colbench.domains.frontend.visual_metrics import (
    SUBSCORES,
    compare_blocks,
    normalize_text,
    visual_reward,
)
from colbench.render import PageBlock
from colbench.types.task import Task

SIZE = (1280, 900)
PAGE = (
    PageBlock("text", 40, 30, 400, 48, "Fresh Bakery", (29, 78, 216), (255, 255, 255)),
    PageBlock("text", 40, 110, 700, 20, "We bake bread every morning with local flour.", (55, 65, 81), (255, 255, 255)),
    PageBlock("box", 40, 160, 300, 140, "", (253, 230, 138), (253, 230, 138)),
    PageBlock("text", 56, 180, 220, 40, "Open from 7am to 3pm", (0, 0, 0), (253, 230, 138)),
    PageBlock("image", 400, 160, 300, 200, "", (163, 180, 188), (163, 180, 188)),
    PageBlock(
        "text", 40, 800, 500, 20, "Call us at 555-0100 or visit us on Main Street", (75, 85, 99), (243, 244, 246)
    ),
)


def parts(answer: tuple[PageBlock, ...] | list[PageBlock], reference: tuple[PageBlock, ...] = PAGE) -> dict[str, float]:
    return compare_blocks(reference, answer, SIZE, SIZE).subscores(clip=1.0)


def changed(a: dict[str, float], b: dict[str, float]) -> set[str]:
    return {name for name in SUBSCORES if abs(a[name] - b[name]) > 1e-9}


def test_the_reference_against_itself_is_one_and_nothing_is_zero() -> None:
    assert parts(PAGE) == dict.fromkeys(SUBSCORES, 1.0)
    empty = parts([])
    assert empty == {**dict.fromkeys(SUBSCORES, 0.0), "clip": 1.0}  # clip is the scorer's term, given here
    assert visual_reward(parts(PAGE)) == 1.0


def test_each_metric_moves_alone() -> None:
    same = parts(PAGE)
    words = parts([replace(PAGE[1], text="We fry donuts every evening with local flour."), *PAGE[:1], *PAGE[2:]])
    assert changed(same, words) == {"text"} and words["text"] < 1.0
    moved = parts([replace(b, x=b.x + 200) if b.kind == "text" and b.y > 700 else b for b in PAGE])
    assert changed(same, moved) == {"position"} and moved["position"] < 1.0
    recoloured = parts([replace(PAGE[0], color=(220, 38, 38)), *PAGE[1:]])
    assert changed(same, recoloured) == {"color"} and recoloured["color"] < 1.0
    removed = parts([b for b in PAGE if b.text != PAGE[5].text])
    assert "block_match" in changed(same, removed) and removed["block_match"] < 1.0
    assert removed["text"] == removed["position"] == removed["color"] == 1.0  # what is there is right


def test_metrics_fall_with_more_damage() -> None:
    previous = parts(PAGE)
    for n in range(1, 4):
        kept = [b for i, b in enumerate(PAGE) if not (b.kind == "text" and i < 2 * n)]
        now = parts(kept)
        assert now["block_match"] <= previous["block_match"]
        previous = now
    shifts = [parts([replace(b, y=b.y + dy) for b in PAGE])["position"] for dy in (0, 50, 200, 600)]
    assert shifts == sorted(shifts, reverse=True) and shifts[-1] < shifts[1]

    def towards_the_opposite(block: PageBlock, t: float) -> PageBlock:
        return replace(block, color=tuple(round(c + t * ((255 - c) - c)) for c in block.color))  # type: ignore[arg-type]

    colours = [parts([towards_the_opposite(b, t) for b in PAGE])["color"] for t in (0.0, 0.3, 0.6, 1.0)]
    assert colours == sorted(colours, reverse=True) and colours[-1] < colours[0]


def test_extra_blocks_cost_block_match_and_matching_is_one_to_one() -> None:
    doubled = parts([*PAGE, *(replace(b, y=b.y + 5) for b in PAGE if b.kind == "text")])
    assert doubled["block_match"] < 0.7  # the copies match nothing: their area counts against the answer
    matches = compare_blocks(PAGE, [*PAGE, *PAGE], SIZE, SIZE).matches
    assert len({m.reference for m in matches}) == len(matches) == len({m.answer for m in matches})


def test_equal_texts_go_to_the_nearer_block_and_kinds_never_mix() -> None:
    twins = (
        PageBlock("text", 0, 0, 100, 20, "Menu", (0, 0, 0), (255, 255, 255)),
        PageBlock("text", 0, 600, 100, 20, "Menu", (0, 0, 0), (255, 255, 255)),
    )
    comparison = compare_blocks(twins, tuple(reversed(twins)), SIZE, SIZE)
    assert sorted((m.reference, m.answer) for m in comparison.matches) == [(0, 1), (1, 0)]
    image = PageBlock("image", 0, 0, 300, 200)
    box = PageBlock("box", 0, 0, 300, 200, "", (10, 10, 10), (10, 10, 10))
    assert compare_blocks((image,), (box,), SIZE, SIZE).matches == ()


@pytest.mark.parametrize(
    "text",
    ["مرحبا بكم في مخبزنا", "ברוכים הבאים", "欢迎来到我们的面包店", "🍞 Fresh  Bread 🥐", "ÉCOLE\u00a0normale", ""],
)
def test_text_in_any_script_compares_with_itself(text: str) -> None:
    block = PageBlock("text", 10, 10, 200, 30, text, (0, 0, 0), (255, 255, 255))
    assert parts([block], reference=(block,))["text"] == 1.0
    assert normalize_text(text) == normalize_text(text.upper().replace(" ", "   "))


def test_pages_without_text_are_judged_by_their_other_blocks() -> None:
    shapes = (PageBlock("box", 0, 0, 1280, 80, "", (31, 41, 55), (31, 41, 55)), PageBlock("image", 100, 200, 400, 300))
    assert parts(shapes, reference=shapes) == dict.fromkeys(SUBSCORES, 1.0)
    assert parts(shapes[:1], reference=shapes)["block_match"] < 1.0
    assert compare_blocks(shapes, shapes, SIZE, SIZE).note is not None  # says why


def test_many_blocks_are_matched() -> None:
    many = [PageBlock("text", (i % 8) * 150, (i // 8) * 30, 140, 20, f"item number {i}") for i in range(300)]
    assert parts(many, reference=tuple(many)) == dict.fromkeys(SUBSCORES, 1.0)
    shuffled = list(reversed(many))
    assert len(compare_blocks(tuple(many), shuffled, SIZE, SIZE).matches) == 300


def test_the_threshold_is_one_number() -> None:
    assert DOMAIN.metrics_for("ColBench-Frontend-v1").success_threshold == VISUAL_SUCCESS_THRESHOLD
    assert DOMAIN.metrics_for("ColBench-Frontend-v1").subscores == SUBSCORES
    assert DOMAIN.metrics_for("ColBench-Frontend-v0") == DOMAIN.metrics


# -- real pages ---------------------------------------------------------------------------------------------------------

HEAD = '<html><head><link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet"></head>'
REFERENCE = f"""{HEAD}<body class="p-8 bg-white">
<h1 class="text-4xl font-bold text-blue-700">Fresh Bakery</h1>
<p id="story" class="mt-4 text-gray-700">We bake bread every morning with local flour and a lot of patience.</p>
<div class="mt-8 bg-yellow-200 p-4 w-64">Opening hours: 7am to 3pm, every day but Monday</div>
<footer class="mt-16 text-gray-600">Call us at 555-0100 or visit us on Main Street</footer>
</body></html>"""
STORY = "We bake bread every morning with local flour and a lot of patience."
WITHOUT_STORY = REFERENCE.replace(f'<p id="story" class="mt-4 text-gray-700">{STORY}</p>', "")
# The story kept in the page but hidden: each must score no higher than the page without it.
HIDDEN = {
    "display-none": '<p style="display:none">{}</p>',
    "white-on-white": '<p style="color:#fff;position:absolute;top:60px;left:40px">{}</p>',
    "transparent": '<p style="color:transparent;position:absolute;top:60px">{}</p>',
    "off-screen": '<p style="position:absolute;left:-9999px">{}</p>',
    "zero-size": '<p style="font-size:0">{}</p>',
    "covered": '<div style="position:relative;height:0"><p style="position:absolute;top:0">{}</p>'
    '<div style="position:absolute;top:-4px;width:900px;height:40px;background:#fff"></div></div>',
    "opacity": '<p style="opacity:0;position:absolute;top:60px">{}</p>',
}


@pytest.fixture(scope="module")
def scores() -> Iterator[dict[str, FrontendScore]]:
    """Every real page of this file, scored in one batch through the process's shared browser."""
    pages = {
        "same": REFERENCE,
        "words": REFERENCE.replace("bread every morning", "donuts every evening"),
        "moved": REFERENCE.replace('<footer class="mt-16', '<footer class="mt-16 ml-64'),
        "colour": REFERENCE.replace("text-blue-700", "text-red-600"),
        "removed": WITHOUT_STORY,
        "empty": "<html><body></body></html>",
        "unrelated": f'{HEAD}<body class="bg-gray-900 text-white p-4"><nav class="flex">Shop Cart Login</nav>'
        '<div class="grid grid-cols-3 gap-4 mt-8"><div class="bg-pink-500 h-40"></div><div class="bg-green-500 h-40">'
        "</div></div></body></html>",
        **{
            f"hidden:{name}": WITHOUT_STORY.replace("</body>", template.format(STORY) + "</body>")
            for name, template in HIDDEN.items()
        },
    }
    task = Task("v1", "frontend", "A bakery page.", REFERENCE, REFERENCE)
    with FrontendScorer(DOMAIN.shared_renderer(), "test", reward="visual") as scorer:
        scored = scorer.score_many([(task, f"I WANT TO ANSWER:\n{page}") for page in pages.values()])
    yield dict(zip(pages, scored, strict=True))


@pytest.mark.browser
def test_real_pages_move_the_right_metric(scores: dict[str, FrontendScore]) -> None:
    same = scores["same"]
    assert same.reward == 1.0 and same.success is True and same.visual is not None
    assert same.env_id == "ColBench-Frontend-v1" and same.embedder.startswith("test-")
    subs = {name: s.visual.subscores for name, s in scores.items() if s.visual is not None}
    kept = pytest.approx(1.0, abs=0.01)  # other words are other widths: a centre moves a few pixels
    assert subs["words"]["text"] < 0.99 and subs["words"]["position"] == kept and subs["words"]["color"] == 1.0
    assert subs["moved"]["position"] < 0.99 and subs["moved"]["text"] == subs["moved"]["block_match"] == 1.0
    assert subs["colour"]["color"] < 0.99 and subs["colour"]["text"] == subs["colour"]["block_match"] == 1.0
    assert subs["removed"]["block_match"] < 1.0
    assert scores["empty"].reward < 0.1 and scores["empty"].success is False
    unrelated = scores["unrelated"].reward
    assert all(unrelated < scores[name].reward < 1.0 for name in ("words", "moved", "colour", "removed"))
    assert scores["same"].details()["subscores"] == dict.fromkeys(SUBSCORES, 1.0)


@pytest.mark.browser
@pytest.mark.parametrize("trick", sorted(HIDDEN))
def test_hiding_the_reference_text_earns_nothing(scores: dict[str, FrontendScore], trick: str) -> None:
    hidden, honest = scores[f"hidden:{trick}"], scores["removed"]
    assert hidden.status == "ok"
    assert hidden.reward <= honest.reward + 1e-6, (trick, hidden.visual, honest.visual)
    assert hidden.visual is not None and hidden.visual.subscores["text"] <= 1.0
    blocks = hidden.details()["blocks"]["answer"]
    assert not any(STORY[:20] in block[5] for block in blocks), trick  # no block holds the hidden words
