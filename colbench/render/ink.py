"""Confirm what the browser laid out (``page_reader``) against the screenshot's pixels, and group it into blocks.

The DOM says where text is; only the pixels say a person can see it. Every line box the reader kept is looked at in
the screenshot: its **background** is the box's dominant colour (the most common colour, 5 bits per channel, with a
2 px margin around the box; in a large box, of about 4,096 pixels on a regular grid), and the text counts only if

- its colour (the fill colour with the chain's alpha, composited over that background) differs from the background
  by at least ``MIN_CONTRAST`` in some channel: text of the page's own colour, or nearly, is invisible however it
  got there;
- enough of the box's pixels are that text's **ink**: at least ``MIN_INK_SHARE`` of the box and ``MIN_INK_PIXELS``
  pixels lie on the line from the background to the text colour, at least half way to the text colour and within
  ``INK_TOLERANCE`` of that line (anti-aliased glyph edges are blends of the two). A trick that keeps the glyphs from
  being painted (a filter, a clip, an overlay, a transform, a font of size 0) leaves no such pixels; text hidden on
  top of other visible text of another colour finds the wrong ink. Text that shows a background through
  ``background-clip: text``, and text made mostly of emoji (painted in their own colours), count any pixel at least
  ``INK_TOLERANCE`` away from the background as ink.

A block's ``color`` is measured too: the per-channel median of the fifth of its ink pixels that lie farthest towards
the text colour, the glyphs' cores (what no CSS trick can fake); its ``background`` is the dominant colour of all its
line boxes.

**Grouping** (Design2Code's text block: a visually contiguous run of text). Text nodes follow in document order; the
confirmed ones that share their nearest ancestor that is not ``display: inline`` (a paragraph with its links and
bold words, a heading, a button, a table cell, a list item), one after another, form one block: their text joined
(whitespace collapsed), their line boxes united into one bounding box.

**Non-text blocks** (as Design2Code): an ``image`` is an ``<img>``, ``<svg>``, ``<canvas>``, ``<video>``, image input
or an element with a background image; a ``box`` is an element painting a background colour whose edge (the
dominant colour of a 3 px band just inside it, which its children rarely cover) differs by at least
``MIN_BOX_CONTRAST`` from what lies around it (the same just outside). Both must be at least
4 px on each side; a box covering ``PAGE_SHARE`` of the screenshot or more is the page's background, not a block.
Their ``color`` and ``background`` are their dominant colour (a box's: its edge's).

**Caps.** The ``MAX_BLOCKS`` largest blocks by area are kept (ties: document order), then listed in reading order
(top to bottom, left to right); the note says what was cut.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from itertools import groupby

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from colbench.render.blocks import RGB, PageBlock
from colbench.render.page_reader import MAX_NODES, PageReading, Rect, TextRun

MAX_BLOCKS = 300
"""Blocks kept per page at most (the largest by area), so matching two pages stays fast."""
MIN_CONTRAST = 24
"""Text whose colour differs from its background by less than this in every channel (0-255) is invisible."""
MIN_INK_SHARE = 0.02
"""A line box's share of pixels that must be its text's ink."""
MIN_INK_PIXELS = 3
INK_TOLERANCE = 48.0
"""How far (RGB distance) an ink pixel may lie from the line between background and text colour."""
MIN_BOX_CONTRAST = 12
"""A box must differ from what surrounds it by at least this in some channel."""
PAGE_SHARE = 0.9
_MARGIN = 2
_SAMPLE = 4096
"""Pixels looked at, at most about, to find a large area's dominant colour (on a regular grid)."""
_RING = 3

Pixels = NDArray[np.uint8]


@dataclass(frozen=True)
class Confirmed:
    """The blocks a page shows, and what the bounds cut (None: nothing)."""

    blocks: tuple[PageBlock, ...]
    note: str | None


def decode(png: bytes) -> Pixels:
    """The screenshot's pixels as a (height, width, 3) array (a view without alpha: Chromium's PNGs are opaque)."""
    with Image.open(io.BytesIO(png)) as image:
        pixels = np.asarray(image if image.mode in ("RGB", "RGBA") else image.convert("RGB"))
    return pixels[..., :3]


def confirm(png: bytes, reading: PageReading) -> Confirmed:
    """The blocks of ``reading`` that the screenshot ``png`` shows (see the module docstring)."""
    pixels = decode(png)
    height, width = pixels.shape[:2]
    found: list[PageBlock] = []
    confirmed: list[tuple[TextRun, list[_Seen]]] = []
    apart = False  # a run left out between two others keeps their words apart
    for run in reading.texts:
        seen = _seen_rects(pixels, run)
        if seen:
            confirmed.append((replace(run, text=" " + run.text) if apart else run, seen))
        apart = not seen
    for _, group in groupby(confirmed, key=lambda item: item[0].container):
        block = _text_block(pixels, list(group))
        if block is not None:
            found.append(block)
    for element in reading.elements:
        block = _element_block(pixels, element.kind, element.rect, width * height)
        if block is not None:
            found.append(block)
    notes = []
    if reading.cuts:
        bounds = ", ".join(reading.cuts)
        notes.append(f"the page was read up to its bounds ({bounds}; {reading.walked} of at most {MAX_NODES} nodes)")
    if len(found) > MAX_BLOCKS:
        notes.append(f"kept the {MAX_BLOCKS} largest of {len(found)} blocks")
        ranked = sorted(range(len(found)), key=lambda i: (-found[i].area, i))[:MAX_BLOCKS]
        found = [found[i] for i in sorted(ranked)]
    found.sort(key=lambda b: (round(b.y, 1), round(b.x, 1)))
    return Confirmed(tuple(found), "; ".join(notes) or None)


def _crop(pixels: Pixels, rect: Rect, margin: int = 0, sample: int = 0) -> Pixels:
    """The pixels of ``rect`` (grown by ``margin``) as rows; with ``sample``, about that many on a regular grid."""
    x, y, w, h = rect
    height, width = pixels.shape[:2]
    x0, y0 = max(int(np.floor(x)) - margin, 0), max(int(np.floor(y)) - margin, 0)
    x1, y1 = min(int(np.ceil(x + w)) + margin, width), min(int(np.ceil(y + h)) + margin, height)
    step = max(int(np.sqrt((x1 - x0) * (y1 - y0) / sample)), 1) if sample else 1
    return pixels[y0 : max(y1, y0) : step, x0 : max(x1, x0) : step].reshape(-1, 3)


def dominant(flat: Pixels) -> RGB:
    """The most common colour of ``flat`` pixels (binned at 5 bits per channel, then the bin's mean)."""
    if len(flat) == 0:
        return (255, 255, 255)
    wide = flat.astype(np.int32)
    codes = (wide[:, 0] >> 3) << 10 | (wide[:, 1] >> 3) << 5 | wide[:, 2] >> 3
    top = int(np.bincount(codes, minlength=1 << 15).argmax())
    mean = wide[codes == top].mean(axis=0)
    return round(float(mean[0])), round(float(mean[1])), round(float(mean[2]))


def _pictographic(text: str) -> bool:
    """Mostly emoji and symbols, which fonts paint in their own colours."""
    chars = [c for c in text if not c.isspace()]
    emoji = sum(1 for c in chars if ord(c) >= 0x1F000 or 0x2600 <= ord(c) <= 0x27BF or c in "\ufe0f\u200d")
    return bool(chars) and emoji * 2 >= len(chars)


def _ink(flat: Pixels, background: RGB, colour: tuple[int, int, int, float] | None) -> tuple[Pixels, Pixels] | None:
    """(ink pixels, core ink pixels) of a line box, or None when the text cannot be seen there."""
    pixels = flat.astype(np.float32)
    bg = np.asarray(background, dtype=np.float32)
    if colour is None:
        distance = np.abs(pixels - bg).max(axis=1)
        ink = distance >= INK_TOLERANCE
        if ink.sum() < max(MIN_INK_PIXELS, MIN_INK_SHARE * len(flat)):
            return None
        far = distance >= np.quantile(distance[ink], 0.8)
        return flat[ink], flat[ink & far]
    a = colour[3] if colour[3] < 1 else 1.0
    text = np.asarray(colour[:3], dtype=np.float32) * a + bg * (1 - a)
    along = text - bg
    if float(np.abs(along).max()) < MIN_CONTRAST:
        return None
    shifted = pixels - bg
    t = shifted @ along / float(along @ along)
    off = shifted - t[:, None] * along
    ink = (t >= 0.5) & (np.einsum("ij,ij->i", off, off) <= INK_TOLERANCE**2)
    if ink.sum() < max(MIN_INK_PIXELS, MIN_INK_SHARE * len(flat)):
        return None
    core = ink & (t >= np.quantile(t[ink], 0.8))
    return flat[ink], flat[core]


@dataclass(frozen=True)
class _Seen:
    rect: Rect
    core: Pixels
    around: Pixels


def _seen_rects(pixels: Pixels, run: TextRun) -> list[_Seen]:
    colour = None if _pictographic(run.text) else run.colour
    seen = []
    for rect in run.rects:
        around = _crop(pixels, rect, _MARGIN, _SAMPLE)
        background = dominant(around)
        ink = _ink(_crop(pixels, rect), background, colour)
        if ink is not None:
            seen.append(_Seen(rect, ink[1], around))
    return seen


def _text_block(pixels: Pixels, group: list[tuple[TextRun, list[_Seen]]]) -> PageBlock | None:
    text = " ".join("".join(run.text for run, _ in group).split())
    if not text:
        return None
    seen = [s for _, rects in group for s in rects]
    x0 = min(s.rect[0] for s in seen)
    y0 = min(s.rect[1] for s in seen)
    x1 = max(s.rect[0] + s.rect[2] for s in seen)
    y1 = max(s.rect[1] + s.rect[3] for s in seen)
    core = np.concatenate([s.core for s in seen])
    median = np.median(core, axis=0)
    colour = (round(float(median[0])), round(float(median[1])), round(float(median[2])))
    background = dominant(np.concatenate([s.around for s in seen]))
    return PageBlock("text", x0, y0, x1 - x0, y1 - y0, text, colour, background)


def _ring(pixels: Pixels, x0: int, y0: int, x1: int, y1: int) -> Pixels:
    """The pixels of a ``_RING`` px band just inside the rectangle (x0, y0)-(x1, y1), sampled."""
    band = min(_RING, (x1 - x0) // 2, (y1 - y0) // 2)
    strips = [
        (x0, y0, x1 - x0, band),
        (x0, y1 - band, x1 - x0, band),
        (x0, y0 + band, band, y1 - y0 - 2 * band),
        (x1 - band, y0 + band, band, y1 - y0 - 2 * band),
    ]
    return np.concatenate([_crop(pixels, strip, sample=_SAMPLE // 4) for strip in strips])


def _element_block(pixels: Pixels, kind: str, rect: Rect, page_area: int) -> PageBlock | None:
    x, y, w, h = rect
    if kind == "image":
        inside = dominant(_crop(pixels, rect, sample=_SAMPLE))
        return PageBlock("image", x, y, w, h, "", inside, inside)
    if w * h >= PAGE_SHARE * page_area:
        return None
    x0, y0 = int(np.floor(x)), int(np.floor(y))
    x1, y1 = int(np.ceil(x + w)), int(np.ceil(y + h))
    own = dominant(_ring(pixels, x0, y0, x1, y1))  # its children may cover its middle, never its edge
    around = dominant(_ring(pixels, x0 - _RING, y0 - _RING, x1 + _RING, y1 + _RING))
    if max(abs(a - b) for a, b in zip(own, around, strict=True)) < MIN_BOX_CONTRAST:
        return None
    return PageBlock("box", x, y, w, h, "", own, own)
