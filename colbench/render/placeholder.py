"""Deterministic stand-ins for placeholder-image hosts, and the local Tailwind 2.2.19 stylesheet.

ColBench pages load their pictures from ``https://picsum.photos/id/48/W/H`` (a photo that the original harness
fetched over the network). The renderer never leaves the machine, so it answers such URLs with a generated PNG of the
requested size: a fixed vertical gradient, the same bytes for the agent's page and the reference page. Recognised:

- ``picsum.photos/id/N/W/H``, ``picsum.photos/W/H``, ``picsum.photos/W`` (square), optionally ``.jpg``/``.webp``
  and a query string (``?grayscale`` etc. are ignored);
- ``placehold.co/WxH``, ``placehold.co/W`` and the same on ``via.placeholder.com`` (any suffix after the size).

A path the real host would reject (e.g. ``/id/48/300/200-estate``, seen in the ColBench data) is not recognised, so
the image is blocked and shows as broken, as it would online. Each side is clamped to ``1..MAX_SIDE`` px so a page
cannot ask for a gigapixel image.

The Tailwind stylesheet ships as package data (``assets/tailwind-2.2.19.min.css``, MIT, see
``assets/tailwind-LICENSE``); ``TAILWIND_URL_RE`` lists the CDN addresses it is served for.
"""

from __future__ import annotations

import functools
import io
import re
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

MAX_SIDE = 4096

TAILWIND_URL_RE = re.compile(
    r"^https?://(?:cdn\.jsdelivr\.net/npm/tailwindcss@2\.2\.19/dist/"
    r"|unpkg\.com/tailwindcss@2\.2\.19/dist/"
    r"|cdnjs\.cloudflare\.com/ajax/libs/tailwindcss/2\.2\.19/)"
    r"tailwind(?:\.min)?\.css(?:[?#].*)?$"
)

_PICSUM_RE = re.compile(
    r"^https?://(?:i\.)?picsum\.photos/(?:id/\d+/)?(\d+)(?:/(\d+))?/?(?:\.(?:jpg|jpeg|webp))?(?:[?#].*)?$"
)
_PLACEHOLD_RE = re.compile(r"^https?://(?:placehold\.co|via\.placeholder\.com)/(\d+)(?:x(\d+))?(?:[/.?#].*)?$")

# Top and bottom colours of the gradient (a muted blue-grey, photo-like in a screenshot).
_TOP = (96, 125, 139)
_BOTTOM = (207, 216, 220)


def placeholder_size(url: str) -> tuple[int, int] | None:
    """The (width, height) a placeholder-image URL asks for, clamped to ``1..MAX_SIDE``; None if not one."""
    match = _PICSUM_RE.match(url) or _PLACEHOLD_RE.match(url)
    if match is None:
        return None
    width = int(match.group(1))
    height = int(match.group(2)) if match.group(2) is not None else width
    return min(max(width, 1), MAX_SIDE), min(max(height, 1), MAX_SIDE)


@functools.lru_cache(maxsize=64)
def placeholder_png(width: int, height: int) -> bytes:
    """An 8-bit RGB PNG of exactly ``width`` x ``height`` px: a vertical gradient, byte-identical on every call."""
    if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
        raise ValueError(f"placeholder size must be within 1..{MAX_SIDE} px per side, got {width}x{height}")
    t = np.linspace(0.0, 1.0, height) if height > 1 else np.zeros(1)
    top, bottom = np.array(_TOP, np.float64), np.array(_BOTTOM, np.float64)
    rows = np.rint(top + (bottom - top) * t[:, None]).astype(np.uint8)  # (height, 3): one colour per row
    pixels = np.ascontiguousarray(np.broadcast_to(rows[:, None, :], (height, width, 3)))
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", compress_level=6)
    return out.getvalue()


def load_tailwind_css(path: Path | None = None) -> bytes:
    """The Tailwind 2.2.19 stylesheet: from ``path`` when given, else the copy shipped inside the package."""
    if path is not None:
        return Path(path).read_bytes()
    return resources.files("colbench.render").joinpath("assets", "tailwind-2.2.19.min.css").read_bytes()
