"""Reading a value as a person states it in a reply, on the host, without running anything.

The values are Python literals (``ast.literal_eval``, JSON too), a few words ("an empty list", "None", "true"),
numbers as people write them (``1,000``, ``$5``, ``10%``). A hedged one ("about 5", "5 or so") is read as such, and
one of several, a range or a formula ("5 or 6", "3 to 5", "2 * x") is not read at all: what is read here is never
turned into a claim by guesswork. Every scan is bounded (text, nesting).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from colbench.domains.backend.values import short_repr

MAX_CALL = 2_000
"""The longest call text read as a claim's call."""
MAX_DEPTH = 24
"""Brackets nested deeper than this are not read (``ast.literal_eval`` recurses)."""

NO_VALUE = object()


@dataclass(frozen=True)
class Stated:
    """A value as the human stated it: ``value`` (a host literal), ``text`` as written, ``decimals`` (the numbers'
    written precision where it matters), ``approx`` (a hedge word before it: "about"), ``percent`` (written with
    ``%``), ``negated`` ("not 5": the claim is that the call does *not* give it)."""

    value: Any
    text: str
    approx: bool = False
    percent: bool = False
    negated: bool = False

    def shown(self) -> str:
        core = self.text if self.percent else short_repr(self.value)
        return ("not " if self.negated else "") + ("about " if self.approx else "") + core


QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "′": "'", "«": '"', "»": '"'})
_WORD_VALUES: dict[str, Any] = {
    "true": True,
    "false": False,
    "none": None,
    "null": None,
    "nothing": None,
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "infinity": float("inf"),
    "inf": float("inf"),
    "nan": float("nan"),
}
_EMPTY = re.compile(
    r"(?:an?\s+|the\s+)?empty\s+(list|array|string|str|dict|dictionary|map|mapping|set|tuple|object)\b", re.IGNORECASE
)
EMPTY_VALUES: dict[str, Any] = {
    "list": [],
    "array": [],
    "string": "",
    "str": "",
    "dict": {},
    "dictionary": {},
    "map": {},
    "mapping": {},
    "object": {},
    "set": frozenset(),
    "tuple": (),
}
_NUMBER = re.compile(
    r"(?P<sign>[-+−]?)(?P<cur>[$€£])?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?P<exp>[eE][-+]?\d+)?"
    r"(?P<pct>\s?%)?(?![\w.]\d)"
)
_LEAD = re.compile(
    r"(?:[:=][ \t]*)?(?:(?:exactly|just|simply|precisely|only|back|out|something\s+like|like|obviously|clearly|"
    r"definitely|certainly|surely|literally|always|still|(?:result|output|answer|return\s+value)(?=\s*[:=])|"
    r"(?P<approx>about|around|approximately|approx\.?|roughly|nearly|almost|close\s+to|~|≈)|"
    r"(?:the|a|an)\s+(?:value|number|integer|int|float|string|str|list|array|tuple|dict|dictionary|set|boolean|bool|"
    r"result|output|answer|sum|total|count|amount)(?:\s+of)?|value(?:\s+of)?|(?:the\s+)?number|you|"
    r"expect(?:ed|ing)?(?:\s+(?:output|result|value|return|answer))?)\s*[:]?\s*)*",
    re.IGNORECASE,
)
# words a stated number may be followed by in a sentence; any other word makes it a quantity ("3 items"): unread
_FOLLOW = frozenset(
    re.findall(
        r"\S+",
        "and or but because since for in when if which as so then here there that too though right yes no not "
        "i i'm it it's this that's is was will would should with on at to from by exactly precisely instead "
        "back again every each always now after before unless while whereas although also here's there's "
        "comes came gets goes looks sounds seems must might may can could shall you you'd you'll we we'd given "
        "last earlier today yesterday recently once originally "
        "dollars dollar usd cents euros euro eur pounds gbp",
    )
)
_HEDGE_AFTER = re.compile(
    r"[ \t]*(?:or\s+(?:so|thereabouts|close|around|nearby|something\s+like\s+that)\b|-?ish\b|…|\.\.\.|maybe|perhaps|"
    r"probably|i\s+think|i\s+guess|i\s+believe|not\s+sure|if\s+i\s+recall|roughly|approximately|give\s+or\s+take)",
    re.IGNORECASE,
)
# what makes a stated number one of several, a range or a formula: no value is stated
_AMBIGUOUS_AFTER = re.compile(
    r"[ \t]*(?:or\b|,\s*[-+−]?\$?\d|/\s*\d|\+|\*{1,2}[ \t]*[\d(.]|×|\^|±|-\s*\d|–\s*\d|to\s+[-+]?\$?\d|"
    r"and\s+[-+]?\$?\d|and\s+up\b|"
    r"or\s+more\b|"
    r"x\s*\d|either\b|plus\b|minus\b|times\b|divided\b)",
    re.IGNORECASE,
)


def depth_ok(text: str) -> bool:
    depth = top = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            top = max(top, depth)
        elif ch in ")]}":
            depth -= 1
    return top <= MAX_DEPTH


def closing(text: str, start: int, limit: int = MAX_CALL) -> int:
    """The index of the bracket closing the one at ``text[start]``, skipping strings; -1 if not within ``limit``."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    quote = ""
    i, end = start, min(len(text), start + limit)
    while i < end:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
            if len(stack) > MAX_DEPTH:
                return -1
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return i
        i += 1
    return -1


def _literal(text: str) -> Any:
    """``text`` as a Python literal (sets made frozensets, as the sandbox's values decode), or as JSON (``{"a":
    true}``, ``[null]``: people paste JSON too), else ``NO_VALUE``."""
    if not text.strip() or len(text) > MAX_CALL or not depth_ok(text):
        return NO_VALUE
    try:
        return _frozen(ast.literal_eval(text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if text.strip()[:1] in "[{":
        try:
            return _frozen(json.loads(text.strip()))
        except (ValueError, RecursionError):
            pass
    return NO_VALUE


def _frozen(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return frozenset(_frozen(v) for v in value)
    if isinstance(value, list):
        return [_frozen(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return {_frozen(k): _frozen(v) for k, v in value.items()}
    return value


def read_value(text: str, pos: int) -> tuple[Stated, int] | None:
    """The value stated at ``text[pos:]`` (after the words that introduce it) and where it ends, or None."""
    lead = _LEAD.match(text, pos)
    approx = bool(lead and lead.group("approx"))
    pos = lead.end() if lead else pos
    emphasis = re.match(r"\*{1,2}|_{1,2}", text[pos : pos + 2])
    if emphasis is None:
        return _read_at(text, pos, approx)
    read = _read_at(text, pos + emphasis.end(), approx)  # **3**, _True_: markdown's emphasis around the value
    if read is None:
        return None
    closing = emphasis.group(0)
    stop = read[1] + len(closing) if text.startswith(closing, read[1]) else read[1]
    return read[0], stop


def _read_at(text: str, pos: int, approx: bool) -> tuple[Stated, int] | None:
    if pos >= len(text):
        return None
    ch = text[pos]
    if ch == "`":  # a code span: the value is all of it
        end = text.find("`", pos + 1)
        if end < 0 or end - pos > MAX_CALL:
            return None
        inner = text[pos + 1 : end].strip()
        number = _NUMBER.fullmatch(inner)
        if number:  # a number as people write it: `1,000` is a thousand, not a tuple
            read = _number(inner, number, approx)
            return None if read is None else (read[0], end + 1)
        value = _literal(inner)
        if value is NO_VALUE:
            value = _word_value(inner)
        if value is NO_VALUE:
            return None
        return Stated(value, inner, approx=approx), end + 1
    if ch in "([{":
        close = closing(text, pos)
        if close < 0:
            return None
        raw = text[pos : close + 1]
        value = _literal(raw)
        return None if value is NO_VALUE else (Stated(value, raw, approx=approx), close + 1)
    prefix = 1 if ch in "bB" and text[pos + 1 : pos + 2] in ("'", '"') else 0  # b'...': bytes
    if ch == "'" and pos > 0 and text[pos - 1].isalnum():
        return None  # "you're", "it's": an apostrophe, not a string
    if ch in "'\"" or prefix:
        end = _string_end(text, pos + prefix)
        if end < 0:
            return None
        raw = text[pos : end + 1]
        value = _literal(raw)
        return None if value is NO_VALUE else (Stated(value, raw, approx=approx), end + 1)
    number = _NUMBER.match(text, pos)
    if number:
        return _number(text, number, approx)
    empty = _EMPTY.match(text, pos)
    if empty:
        return Stated(EMPTY_VALUES[empty.group(1).lower()], empty.group(0), approx=approx), empty.end()
    word = re.match(r"[A-Za-z]+", text[pos : pos + 20])
    if word and word.group(0).lower() in _WORD_VALUES:
        end = pos + word.end()
        after = text[end : end + 1]
        follow = re.match(r"[ \t]*([A-Za-z][\w']*)", text[end : end + 40])
        if follow and follow.group(1).lower() not in _FOLLOW:
            return None  # "nothing special", "true story": words, not a value
        if after in ("", " ", ".", ",", ";", "!", "?", ")", "\n", "`", '"', "'", "*", "_"):
            return Stated(_WORD_VALUES[word.group(0).lower()], word.group(0), approx=approx), end
    return None


def _string_end(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text) and i - start <= MAX_CALL:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        if text[i] == "\n":
            return -1
        i += 1
    return -1


def _word_value(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in _WORD_VALUES:
        return _WORD_VALUES[lowered]
    empty = _EMPTY.fullmatch(text.strip())
    return EMPTY_VALUES[empty.group(1).lower()] if empty else NO_VALUE


def _number(text: str, match: re.Match[str], approx: bool) -> tuple[Stated, int] | None:
    whole = match.group("int").replace(",", "")
    frac, exp = match.group("frac") or "", match.group("exp") or ""
    sign = "-" if match.group("sign") in ("-", "−") else ""
    end = match.end()
    if end < len(text) and text[end] == "." and text[end + 1 : end + 2].isdigit():
        return None  # a version number or a date: 1.2.3
    follow = re.match(r"[ \t]*([A-Za-z][\w']*)", text[end : end + 40])
    if follow and follow.group(1).lower() not in _FOLLOW:
        return None  # a quantity of something ("3 items"), not the value itself
    if _AMBIGUOUS_AFTER.match(text, end):
        return None
    if _HEDGE_AFTER.match(text, end):
        approx = True
    try:
        value: Any = int(sign + whole) if not frac and not exp else float(sign + whole + frac + exp)
    except ValueError:
        return None
    percent = bool(match.group("pct"))
    return Stated(value, match.group(0).strip(), approx=approx, percent=percent), end


def loose_value(text: str, pos: int) -> tuple[Stated, int] | None:
    """A value in a list of values: the words after it are the list's, not a quantity's ("3 and 4 respectively")."""
    number = _NUMBER.match(text, pos)
    if number:
        whole = number.group("int").replace(",", "")
        try:
            value: Any = (
                float(whole + (number.group("frac") or "") + (number.group("exp") or ""))
                if (number.group("frac") or number.group("exp"))
                else int(whole)
            )
        except ValueError:
            return None
        value = -value if number.group("sign") in ("-", "−") else value
        return Stated(value, number.group(0).strip(), percent=bool(number.group("pct"))), number.end()
    word = re.match(r"[A-Za-z]+", text[pos : pos + 20])
    if word and word.group(0).lower() in _WORD_VALUES:
        return Stated(_WORD_VALUES[word.group(0).lower()], word.group(0)), pos + word.end()
    return None


def approx_decimals(value: Any) -> int | None:
    """The decimals a stated float was written with (``repr`` keeps what was typed), None for other values."""
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        text = repr(value)
        if "e" in text or "E" in text:
            return None
        return len(text.split(".")[1]) if "." in text else 0
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        return -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return None
