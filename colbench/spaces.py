"""A text space for chat turns.

Gymnasium's ``Text`` space has a bounded length and an alphanumeric default charset, so real messages (code,
punctuation, other scripts) fall outside it and ``check_env`` fails. ``UnicodeText`` holds any ``str``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from gymnasium.spaces import Space

# Samples mix ASCII, punctuation, accented Latin, CJK and an emoji: enough variety to shake out encoding bugs.
_SAMPLE_ALPHABET = [*list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,:;?!()[]{}'\"\n\tàéîõüßñ漢字テスト"), "🙂"]


class UnicodeText(Space[str]):
    """Any Python string, optionally up to ``max_length`` characters."""

    def __init__(self, max_length: int | None = None, seed: int | np.random.Generator | None = None) -> None:
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> str:
        upper = min(self.max_length or 64, 64)
        length = int(self.np_random.integers(1, upper + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in picks)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and (self.max_length is None or len(x) <= self.max_length)

    def to_jsonable(self, sample_n: Iterable[str]) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("UnicodeText", self.max_length))
