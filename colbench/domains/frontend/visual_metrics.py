"""Design2Code's fine-grained comparison of two rendered pages, from their visible blocks (``colbench.render``).

CLIP alone barely notices a page's words and ranks a layout slip like a text slip (Si et al., "Design2Code",
NAACL 2025). These metrics look at what a person reads: which blocks of the reference the answer has, with what
words, where, in which colour. Formulas (docs/frontend.md, "ColBench-Frontend-v1"):

**Matching.** Text blocks are matched to text blocks, images to images, boxes to boxes, one to one, by
``scipy.optimize.linear_sum_assignment`` on the cost ``(1 - s) + POSITION_COST * d`` where ``s`` is the pair's
similarity (text: the normalised Indel similarity of the two texts, case-folded with whitespace collapsed, which is
difflib's ratio computed by rapidfuzz; images and boxes: how alike their shapes are, ``sqrt(min(w)/max(w) *
min(h)/max(h))``) and ``d`` the distance of their centres, ``max(|dx| / W, |dy| / H)`` with ``W``, ``H`` the larger
page's width and height. A pair is a match only if ``s >= MIN_SIMILARITY`` (images and boxes also need ``d <=
MAX_SHAPE_DISTANCE``: shapes alone say little about which block is which).

**Metrics**, each in [0, 1]; a pair's weight ``w`` is the sum of its two blocks' areas:

- ``block_match``: the matched text blocks' area over all text blocks' area on both pages, so missing and extra
  text both cost (Design2Code's block-match; pages with no text at all: the same over images and boxes; two pages
  with no blocks at all: 1).
- ``text``: the ``w``-weighted mean text similarity of the matched text pairs.
- ``position``: the ``w``-weighted mean of ``1 - d`` over every matched pair.
- ``color``: the ``w``-weighted mean of ``1 - min(ΔE00, 100) / 100`` over matched text pairs (their text colours)
  and box pairs (their fill colours), ΔE00 the CIEDE2000 difference (coloraide).
- ``clip``: the cosine of the two screenshots' embeddings with their text painted over, clipped to [0, 1]
  (computed by the scorer).

``text``, ``position`` and ``color`` judge what was matched; with nothing to judge they are 0 (the reference has
such blocks, the answer matched none of them) or 1 (neither page has any). The reward is their plain mean, as
Design2Code averages its five: ``reward = (block_match + text + position + color + clip) / 5``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from coloraide import Color
from rapidfuzz import process
from rapidfuzz.distance import Indel
from scipy.optimize import linear_sum_assignment

from colbench.render.blocks import RGB, PageBlock

SUBSCORES = ("block_match", "text", "position", "color", "clip")
"""The reward's parts, in the order reports show them (``score["subscores"]``)."""
MIN_SIMILARITY = 0.5
"""A pair less alike than this is no match (Design2Code's threshold on text similarity)."""
MAX_SHAPE_DISTANCE = 0.25
"""Images and boxes further apart than this (a quarter of the page) are no match, however alike their shapes."""
POSITION_COST = 0.5
"""How much a centre's distance weighs against dissimilarity when matching (ties between equal texts go to the
nearer block)."""

CONTENT = ("text",)
"""The blocks block-match counts (Design2Code's: text; images and boxes only on pages with no text): what a page
says. Images and boxes are matched by their shape alone, which unrelated pages share (a full-width header bar, a
300x200 placeholder image), so they are left to position, colour and CLIP."""

_SPACES = re.compile(r"\s+")
_NO_MATCH = 1e6


@dataclass(frozen=True)
class BlockMatch:
    """One matched pair: indexes into the reference's and the answer's blocks, and how alike they are."""

    reference: int
    answer: int
    similarity: float

    def as_record(self) -> list[Any]:
        return [self.reference, self.answer, round(self.similarity, 4)]


@dataclass(frozen=True)
class BlockComparison:
    """The four block metrics of an answer page against its reference page, and the matches behind them."""

    block_match: float
    text: float
    position: float
    color: float
    matches: tuple[BlockMatch, ...]
    note: str | None = None

    def subscores(self, clip: float) -> dict[str, float]:
        """The five parts of the reward, ``clip`` being the painted-over CLIP term."""
        parts = (self.block_match, self.text, self.position, self.color, min(1.0, max(0.0, clip)))
        return {name: round(float(value), 6) for name, value in zip(SUBSCORES, parts, strict=True)}


def visual_reward(subscores: Mapping[str, float]) -> float:
    """The reward of ColBench-Frontend-v1: the mean of the five parts."""
    return round(sum(float(subscores[name]) for name in SUBSCORES) / len(SUBSCORES), 6)


def normalize_text(text: str) -> str:
    """What text similarity compares: NFKC, case-folded, whitespace collapsed (any script, any direction)."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def compare_blocks(
    reference: Sequence[PageBlock],
    answer: Sequence[PageBlock],
    reference_size: tuple[int, int],
    answer_size: tuple[int, int],
) -> BlockComparison:
    """Match ``answer``'s blocks to ``reference``'s and compute the block metrics (the module docstring)."""
    width = float(max(reference_size[0], answer_size[0], 1))
    height = float(max(reference_size[1], answer_size[1], 1))
    matches: list[BlockMatch] = []
    for kind in ("text", "image", "box"):
        ref_ids = [i for i, b in enumerate(reference) if b.kind == kind]
        ans_ids = [j for j, b in enumerate(answer) if b.kind == kind]
        if ref_ids and ans_ids:
            matches += _match(
                [reference[i] for i in ref_ids], [answer[j] for j in ans_ids], width, height, ref_ids, ans_ids
            )
    matches.sort(key=lambda m: (m.reference, m.answer))
    return _metrics(reference, answer, matches, width, height)


def _match(
    ref: Sequence[PageBlock],
    ans: Sequence[PageBlock],
    width: float,
    height: float,
    ref_ids: Sequence[int],
    ans_ids: Sequence[int],
) -> list[BlockMatch]:
    similarity = _similarities(ref, ans)
    distance = _distances(ref, ans, width, height)
    allowed = similarity >= MIN_SIMILARITY
    if ref[0].kind != "text":
        allowed &= distance <= MAX_SHAPE_DISTANCE
    cost = np.where(allowed, (1.0 - similarity) + POSITION_COST * distance, _NO_MATCH)
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if allowed[r, c]]
    return [BlockMatch(ref_ids[r], ans_ids[c], float(similarity[r, c])) for r, c in pairs]


def _similarities(ref: Sequence[PageBlock], ans: Sequence[PageBlock]) -> npt.NDArray[np.float64]:
    if ref[0].kind == "text":
        texts = process.cdist(
            [normalize_text(b.text) for b in ref],
            [normalize_text(b.text) for b in ans],
            scorer=Indel.normalized_similarity,
            dtype=np.float32,
            workers=1,
        )
        return np.asarray(texts, np.float64)
    ref_w, ref_h = _sides(ref)
    ans_w, ans_h = _sides(ans)
    widths = np.minimum.outer(ref_w, ans_w) / np.maximum(np.maximum.outer(ref_w, ans_w), 1e-9)
    heights = np.minimum.outer(ref_h, ans_h) / np.maximum(np.maximum.outer(ref_h, ans_h), 1e-9)
    return np.sqrt(widths * heights)


def _sides(blocks: Sequence[PageBlock]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    return (
        np.array([max(b.width, 0.0) for b in blocks], np.float64),
        np.array([max(b.height, 0.0) for b in blocks], np.float64),
    )


def _distances(
    ref: Sequence[PageBlock], ans: Sequence[PageBlock], width: float, height: float
) -> npt.NDArray[np.float64]:
    ref_c = np.array([b.center for b in ref], np.float64)
    ans_c = np.array([b.center for b in ans], np.float64)
    dx = np.abs(np.subtract.outer(ref_c[:, 0], ans_c[:, 0])) / width
    dy = np.abs(np.subtract.outer(ref_c[:, 1], ans_c[:, 1])) / height
    return np.asarray(np.minimum(np.maximum(dx, dy), 1.0), np.float64)


def _metrics(
    reference: Sequence[PageBlock], answer: Sequence[PageBlock], matches: list[BlockMatch], width: float, height: float
) -> BlockComparison:
    counted = CONTENT if any(b.kind in CONTENT for b in (*reference, *answer)) else ("image", "box")
    total = sum(b.area for b in (*reference, *answer) if b.kind in counted)
    pairs = [(reference[m.reference], answer[m.answer], m.similarity) for m in matches]
    matched = sum(ref.area + ans.area for ref, ans, _ in pairs if ref.kind in counted)
    block_match = 1.0 if total <= 0 else matched / total

    def weight(ref: PageBlock, ans: PageBlock) -> float:
        return max(ref.area + ans.area, 1e-9)

    text = _mean([(sim, weight(r, a)) for r, a, sim in pairs if r.kind == "text"], _empty(reference, answer, ("text",)))
    position = _mean(
        [(1.0 - _distance(r, a, width, height), weight(r, a)) for r, a, _ in pairs],
        _empty(reference, answer, ("text", "image", "box")),
    )
    color = _mean(
        [(_color_similarity(r, a), weight(r, a)) for r, a, _ in pairs if r.kind != "image"],
        _empty(reference, answer, ("text", "box")),
    )
    return BlockComparison(
        _unit(block_match), _unit(text), _unit(position), _unit(color), tuple(matches), _note(reference, answer)
    )


def _distance(a: PageBlock, b: PageBlock, width: float, height: float) -> float:
    (ax, ay), (bx, by) = a.center, b.center
    return min(max(abs(ax - bx) / width, abs(ay - by) / height), 1.0)


def _mean(values: list[tuple[float, float]], empty: float) -> float:
    total = sum(w for _, w in values)
    return empty if total <= 0 else sum(v * w for v, w in values) / total


def _empty(reference: Sequence[PageBlock], answer: Sequence[PageBlock], kinds: tuple[str, ...]) -> float:
    """A metric with no matched pair: 1 when neither page has such blocks (nothing to get wrong), else 0."""
    return 0.0 if any(b.kind in kinds for b in (*reference, *answer)) else 1.0


def _color_similarity(reference: PageBlock, answer: PageBlock) -> float:
    """A text pair: the mean over its text colour and the colour under it (text reads as ink on a ground); a box
    pair: its fill."""
    ink = 1.0 - min(_delta_e(reference.color, answer.color), 100.0) / 100.0
    if reference.kind != "text":
        return ink
    ground = 1.0 - min(_delta_e(reference.background, answer.background), 100.0) / 100.0
    return (ink + ground) / 2


def _delta_e(a: RGB, b: RGB) -> float:
    if a == b:
        return 0.0
    first = Color("srgb", [c / 255 for c in a])
    return float(first.delta_e(Color("srgb", [c / 255 for c in b]), method="2000"))


def _unit(value: float) -> float:
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, float(value)))


def _note(reference: Sequence[PageBlock], answer: Sequence[PageBlock]) -> str | None:
    if not any(b.kind == "text" for b in reference):
        return "the reference page shows no text: block-match is over its images and boxes"
    if not answer:
        return "the answer's page shows no blocks"
    if not any(b.kind == "text" for b in answer):
        return "the answer's page shows no text"
    return None
