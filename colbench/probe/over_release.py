"""Over-release: how much of the reference's own vocabulary a human reply puts in front of the agent first.

The leak detector looks for the answer's *form* (code); this counts *words of the answer* a reply gives away, code
or not. Exactly (docs/human-quality.md, "The probe"):

- **The reference's tokens** are read from ``task.ground_truth`` with :mod:`tokenize` (up to a point it cannot
  read past): every ``NUMBER`` by its numeric value (``ast.literal_eval``: ``0.50`` is ``0.5``, ``10`` is
  ``10.0``, ``1_000`` is ``1000``; a sign is an operator, not part of the number); every string literal by its
  contents (``ast.literal_eval``; bytes read as Latin-1; an f-string by its literal pieces), surrounding
  whitespace stripped, kept when not empty; every ``NAME`` of at least ``MIN_NAME`` characters that is not a
  Python keyword (hard or soft) nor a builtin (``dir(builtins)``): one- and two-letter names (``i``, ``x``, ``df``)
  are every program's, and prose is full of them ("i.e.", "a", "is").
- **A text mentions** an identifier when it is one of its words (maximal runs of ``\\w``), case-sensitive; a
  number when one of its numbers has the same value (a run of digits with an optional fraction and exponent, or
  digits grouped by commas in threes, ``1,000``; not touching a letter, digit or ``_``, nor part of a dotted run
  like ``1.2.3``; signs ignored, words such as "five" not read); a string when its contents occur in the text,
  case-insensitively.
- A reply **newly reveals** a token when the reply mentions it and neither the task's problem description nor any
  earlier turn of the dialogue (the agent's turns, including the one the reply answers, and the human's earlier
  replies) does.
- ``over_release`` of a set of replies: the mean count of tokens each reply newly reveals (``mean``) and the
  share of replies that newly reveal at least one (``share``).
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

Number = int | float | complex

MIN_NAME = 3
"""Identifiers shorter than this are not counted (module docstring)."""
EXCLUDED_NAMES = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
"""Names that are Python's, not the reference's: keywords (hard and soft) and builtins."""
_WORDS = re.compile(r"\w+")
_NUMBERS = re.compile(
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?!\w|\.\d)"
)
_FSTRING_MIDDLE = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python 3.12+: an f-string's literal pieces


@dataclass(frozen=True)
class Vocabulary:
    """The reference's tokens: identifiers, numbers (by value) and strings (``strings``: lowered contents, with
    the contents as written in ``shown``)."""

    names: frozenset[str]
    numbers: frozenset[Number]
    strings: frozenset[str]
    shown: tuple[tuple[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.names) + len(self.numbers) + len(self.strings)


@lru_cache(maxsize=4096)
def reference_tokens(code: str) -> Vocabulary:
    """The tokens of a reference (module docstring); what ``tokenize`` cannot read past is left out."""
    names: set[str] = set()
    numbers: set[Number] = set()
    strings: dict[str, str] = {}
    for kind, text in _tokens(code):
        if kind == tokenize.NAME:
            if text.isidentifier() and len(text) >= MIN_NAME and text not in EXCLUDED_NAMES:
                names.add(text)
        elif kind == tokenize.NUMBER:
            value = _number(text)
            if value is not None:
                numbers.add(value)
        elif kind == tokenize.STRING or (_FSTRING_MIDDLE is not None and kind == _FSTRING_MIDDLE):
            for piece in _string_contents(text, kind == tokenize.STRING):
                strings.setdefault(piece.lower(), piece)
    return Vocabulary(frozenset(names), frozenset(numbers), frozenset(strings), tuple(sorted(strings.items())))


def _tokens(code: str) -> Iterator[tuple[int, str]]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            yield token.type, token.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        return


def _number(text: str) -> Number | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, int | float | complex) and not isinstance(value, bool) else None


def _string_contents(text: str, whole_token: bool) -> list[str]:
    pieces: list[str] = []
    if not whole_token:  # an f-string's literal piece (3.12+ tokenizer)
        pieces = [text]
    else:
        try:
            value = ast.literal_eval(text)
            pieces = [value.decode("latin-1") if isinstance(value, bytes) else str(value)]
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            try:  # an f-string (one token before 3.12): its literal pieces
                node = ast.parse(text.strip(), mode="eval").body
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                node = None
            if isinstance(node, ast.JoinedStr):
                pieces = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return [p.strip() for p in pieces if p.strip()]


@dataclass(frozen=True)
class Mentions:
    """What a text mentions: its words, the values of its numbers, and itself lowered (for strings)."""

    words: frozenset[str]
    numbers: frozenset[Number]
    lowered: str


def mentions(text: str) -> Mentions:
    numbers: set[Number] = set()
    for match in _NUMBERS.finditer(text):
        raw = match.group(0).replace(",", "")
        try:
            numbers.add(float(raw) if any(c in raw for c in ".eE") else int(raw))
        except (ValueError, OverflowError):
            continue
    return Mentions(frozenset(_WORDS.findall(text)), frozenset(numbers), text.lower())


def revealed(vocabulary: Vocabulary, reply: str, context: Sequence[str]) -> list[str]:
    """The reference's tokens ``reply`` newly reveals: mentioned in it and in no text of ``context`` (the problem
    description and the earlier turns). Shown as identifiers, numbers (``repr`` of the value) and strings (``repr``
    of the contents as written), sorted."""
    said = mentions(reply)
    before = [mentions(text) for text in context]
    found = [name for name in vocabulary.names if name in said.words and not any(name in m.words for m in before)]
    found += [
        repr(number)
        for number in vocabulary.numbers
        if number in said.numbers and not any(number in m.numbers for m in before)
    ]
    found += [
        repr(shown)
        for lowered, shown in vocabulary.shown
        if lowered in said.lowered and not any(lowered in m.lowered for m in before)
    ]
    return sorted(found)


def dialogue_revealed(
    ground_truth: str, description: str, turns: Sequence[str], replies: Sequence[str]
) -> list[list[str]]:
    """What each reply of a dialogue newly reveals: reply ``i`` answers agent turn ``i``, after the description,
    agent turns ``0..i`` and human replies ``0..i-1``."""
    vocabulary = reference_tokens(ground_truth)
    out = []
    for i, reply in enumerate(replies):
        context = [description, *turns[: i + 1], *replies[:i]]
        out.append(revealed(vocabulary, reply, context))
    return out


def over_release(counts: Sequence[int]) -> dict[str, float] | None:
    """``mean``: tokens newly revealed per reply; ``share``: replies that newly reveal at least one (None: no
    replies)."""
    if not counts:
        return None
    return {"mean": sum(counts) / len(counts), "share": sum(c > 0 for c in counts) / len(counts)}
