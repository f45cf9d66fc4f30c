"""The visual blocks of a rendered page: what a person sees where, read from the DOM in the render that makes the
screenshot (Design2Code's unit of comparison; ``colbench.domains.frontend`` matches them between two pages).

A block is stored compactly in result rows and run directories (``as_record`` / ``from_record``), so a viewer can
draw matched and unmatched blocks over the screenshots without rendering anything again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from colbench.errors import DataError

BlockKind = Literal["text", "image", "box"]
BLOCK_KINDS: tuple[BlockKind, ...] = ("text", "image", "box")

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class PageBlock:
    """One block, in CSS pixels of the screenshot (device scale 1: one CSS px is one screenshot px).

    ``kind``: ``text`` (a run of visible text laid out together), ``image`` (an ``<img>``, ``<svg>``, ``<video>``,
    ``<canvas>`` or an element with a background image) or ``box`` (an element painting a background colour of its
    own, unlike what lies under it). ``text``: the visible text (``""`` for other kinds). ``color``: the text's
    colour, composited over ``background``; ``background``: the opaque colour under the block (for ``box``, its own).
    """

    kind: BlockKind
    x: float
    y: float
    width: float
    height: float
    text: str = ""
    color: RGB = (0, 0, 0)
    background: RGB = (255, 255, 255)

    @property
    def area(self) -> float:
        return max(self.width, 0.0) * max(self.height, 0.0)

    @property
    def center(self) -> tuple[float, float]:
        return self.x + self.width / 2, self.y + self.height / 2

    def as_record(self) -> list[Any]:
        """``[kind, x, y, width, height, text, "#rrggbb", "#rrggbb"]``, coordinates rounded to 0.1 px."""
        return [
            self.kind,
            round(self.x, 1),
            round(self.y, 1),
            round(self.width, 1),
            round(self.height, 1),
            self.text,
            _hex(self.color),
            _hex(self.background),
        ]

    @classmethod
    def from_record(cls, record: Sequence[Any], where: str = "block") -> PageBlock:
        """Read what ``as_record`` wrote; anything else is a one-line DataError naming ``where``."""
        if not isinstance(record, Sequence) or isinstance(record, str) or len(record) != 8:
            expected = "[kind, x, y, width, height, text, color, background]"
            raise DataError(f"{where}: expected {expected}, got {record!r:.80}")
        kind, x, y, width, height, text, color, background = record
        if kind not in BLOCK_KINDS:
            raise DataError(f"{where}: block kind {kind!r} is not one of {', '.join(BLOCK_KINDS)}")
        numbers = (x, y, width, height)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            raise DataError(f"{where}: block coordinates must be numbers, got {numbers!r:.80}")
        if not isinstance(text, str):
            raise DataError(f"{where}: block text must be a string, got {type(text).__name__}")
        box = float(x), float(y), float(width), float(height)
        return cls(kind, *box, text, _rgb(color, where), _rgb(background, where))


def _hex(color: RGB) -> str:
    return "#{:02x}{:02x}{:02x}".format(*color)


def _rgb(text: Any, where: str) -> RGB:
    if not (isinstance(text, str) and len(text) == 7 and text[0] == "#"):
        raise DataError(f"{where}: block colour {text!r:.40} is not #rrggbb")
    try:
        return int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)
    except ValueError:
        raise DataError(f"{where}: block colour {text!r} is not #rrggbb") from None
