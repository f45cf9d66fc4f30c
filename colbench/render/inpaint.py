"""Paint a screenshot's text over with its background, as Design2Code does before CLIP compares two pages.

CLIP then judges the look of a page (layout, colours, images) and leaves the words to a text metric; without this,
two pages with the same layout and different words look alike to CLIP, and a page can gain CLIP similarity from text
alone.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable

from PIL import Image, ImageDraw

from colbench.errors import DataError
from colbench.render.blocks import PageBlock


def paint_over_text(png: bytes, blocks: Iterable[PageBlock]) -> bytes:
    """``png`` with each text block's box (grown to whole pixels) filled with the block's background colour.

    Blocks are painted in the order given (``RenderResult.blocks`` lists them in reading order); other kinds are left
    alone, and a PNG with no text block to paint comes back as it is. The same input always gives the same bytes
    (PNG at a fixed compression level). Input that is not a readable image is a DataError.
    """
    try:
        image: Image.Image = Image.open(io.BytesIO(png))
        image.load()
    except Exception as exc:  # Pillow raises several kinds for undecodable input
        raise DataError(f"paint_over_text: the screenshot is not a readable image ({exc})") from None
    text = [block for block in blocks if block.kind == "text" and block.width > 0 and block.height > 0]
    if not text and image.format == "PNG":
        return png
    if image.mode != "RGB":  # Chromium's screenshots are RGB already
        image = image.convert("RGB")
    draw = ImageDraw.Draw(image)
    for block in text:
        left, top = math.floor(block.x), math.floor(block.y)
        right, bottom = math.ceil(block.x + block.width), math.ceil(block.y + block.height)
        draw.rectangle((left, top, right - 1, bottom - 1), fill=block.background)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()
