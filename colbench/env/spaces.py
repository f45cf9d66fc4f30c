"""A text space for chat turns.

Gymnasium's ``Text`` space has a bounded length and an alphanumeric default charset, so real messages (code,
punctuation, other scripts) fall outside it and ``check_env`` fails. ``UnicodeText`` holds any ``str``.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any, overload

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import (
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from colbench.errors import ConfigError

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


# -- vector envs: Gymnasium batches a custom space as a tuple of its values; its async mode (subprocesses) also
# needs shared memory for observations, which Gymnasium provides for its own spaces only. Each sub-env gets a
# fixed slot of UTF-8 bytes (length first): ``max_length`` characters at 4 bytes each, else SHARED_TEXT_BYTES.

SHARED_TEXT_BYTES = 1 << 20  # 1 MiB per sub-env: a whole dialogue turn of code or HTML fits many times over
_LENGTH = np.dtype("<i8")


def _slot_bytes(space: UnicodeText) -> int:
    return _LENGTH.itemsize + (4 * space.max_length if space.max_length is not None else SHARED_TEXT_BYTES)


@create_shared_memory.register(UnicodeText)
def _create_text_memory(space: UnicodeText, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array("B", n * _slot_bytes(space))


class SharedTexts(Sequence[str]):
    """The sub-envs' observations, read from shared memory on access: Gymnasium's async vector env reads its
    buffer once and expects a live view of it (numpy arrays are); a copy (``deepcopy``, as the vector env returns
    with ``copy=True``) is a plain tuple of the texts at that moment."""

    def __init__(self, space: UnicodeText, shared_memory: Any, n: int) -> None:
        self._size = _slot_bytes(space)
        self._buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(self._n)[index])
        if not -self._n <= index < self._n:
            raise IndexError(index)
        slot = self._buffer[(index % self._n) * self._size : (index % self._n + 1) * self._size]
        length = int(slot[: _LENGTH.itemsize].view(_LENGTH)[0])
        return slot[_LENGTH.itemsize : _LENGTH.itemsize + length].tobytes().decode("utf-8")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
def _read_text_memory(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
def _write_text_memory(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    size = _slot_bytes(space)
    data = value.encode("utf-8")
    if len(data) > size - _LENGTH.itemsize:
        raise ConfigError(
            f"observation of {len(data)} UTF-8 bytes does not fit the shared-memory slot of "
            f"{size - _LENGTH.itemsize} bytes: give the env's space a larger max_length or use shared_memory=False"
        )
    buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
    slot = buffer[index * size : (index + 1) * size]
    slot[: _LENGTH.itemsize] = np.array([len(data)], dtype=_LENGTH).view(np.uint8)
    slot[_LENGTH.itemsize : _LENGTH.itemsize + len(data)] = np.frombuffer(data, dtype=np.uint8)


@create_empty_array.register(UnicodeText)
def _empty_texts(space: UnicodeText, n: int = 1, fn: Any = None) -> tuple[str, ...]:
    return ("",) * n
