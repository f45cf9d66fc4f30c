"""Finding a backend human's checkable claims in a reply, on the host, without running anything.

A claim is a call of the task's function with literal arguments and a value the human says it gives:

- a call followed by what it gives: ``f(2, 3) should return 5``, `` `f([])` gives `0` ``, ``f(x) -> y``,
  ``f(x) == y``, ``f(x): y``, "I'd expect f(x) to be y", "calling f(1) yields [1]";
- an answer to the agent's question about one call ("What should f([1, 2]) return?" -> "It should be 3." or a
  bare "3"), and a yes or no to a question that states a value ("Should f(2) return 4?" -> "Yes." / "No.");
- for a function of one parameter, a literal put in prose: "for [1, 2] it returns 3", "given an empty list it
  should return 0", "an empty list gives 0".

What is found here is only read, never run: the values are Python literals (``ast.literal_eval``), a few words
("an empty list", "None", "true"), numbers as people write them (``1,000``, ``$5``, ``10%``). A negated statement
("should not return 5") and a hedged one ("5 or 6", "around 5 items") are not claims, or are ``unchecked``
ones: a finding here is never turned into ``false`` by guesswork. Every scan is bounded (text, calls, nesting).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import islice
from typing import Any

MAX_SCAN = 20_000
"""Characters of a reply (or question) searched for claims: a longer reply is searched in its first part only."""
MAX_CLAIMS = 16
"""Claims read from one reply at most."""
MAX_CANDIDATES = 200
"""Calls (and, for prose, places an argument may be named) looked at in one reply at most: a reply is read in
bounded time whatever it holds."""
MAX_CALL = 2_000
"""The longest call text read as a claim's call."""
MAX_DEPTH = 24
"""Brackets nested deeper than this are not read (``ast.literal_eval`` recurses)."""
_TAIL = 160
"""How far after a call its stated value may start."""

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
        core = self.text if self.percent else _short_repr(self.value)
        return ("not " if self.negated else "") + ("about " if self.approx else "") + core


@dataclass(frozen=True)
class Found:
    """A claim found in a reply: the ``call`` (source text, normalised), whether it is literal, and what is said."""

    span: tuple[int, int]
    call: str
    literal: bool
    stated: Stated


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the task's function names ----------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def function_names(ground_truth: str, tests: tuple[str, ...], description: str) -> tuple[tuple[str, ...], int | None]:
    """The names a claim may call (the reference's top-level functions the tests call, else all of them, else the
    signature's), and how many arguments the entry function takes when it takes exactly one (else None)."""
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    try:
        tree = ast.parse(ground_truth)
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    called: list[str] = []
    for test in tests:
        try:
            for node in ast.walk(ast.parse(test, mode="eval")):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs:
                    called.append(node.func.id)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    names = list(dict.fromkeys(called)) or list(defs)
    if not names:
        match = re.search(r"def\s+([A-Za-z_]\w*)\s*\(", description)
        names = [match.group(1)] if match else []
    single = None
    if names and names[0] in defs:
        args = defs[names[0]].args
        positional = [*args.posonlyargs, *args.args]
        required = len(positional) - len(args.defaults)
        if len(positional) == 1 or (required == 1 and not args.vararg):
            single = 1
    return tuple(names), single


# -- reading values -------------------------------------------------------------------------------------------
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "′": "'", "«": '"', "»": '"'})
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
_EMPTY_VALUES: dict[str, Any] = {
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


def _depth_ok(text: str) -> bool:
    depth = top = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            top = max(top, depth)
        elif ch in ")]}":
            depth -= 1
    return top <= MAX_DEPTH


def _closing(text: str, start: int, limit: int = MAX_CALL) -> int:
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
    if not text.strip() or len(text) > MAX_CALL or not _depth_ok(text):
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
        close = _closing(text, pos)
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
        return Stated(_EMPTY_VALUES[empty.group(1).lower()], empty.group(0), approx=approx), empty.end()
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
    return _EMPTY_VALUES[empty.group(1).lower()] if empty else NO_VALUE


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


# -- finding calls ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallAt:
    start: int
    end: int  # one past the closing parenthesis
    text: str
    literal: bool


def calls_in(text: str, names: Sequence[str]) -> Iterator[CallAt]:
    """The calls of ``names`` in ``text`` (not definitions: ``def f(...)``), literal or not, in order."""
    if not names:
        return
    pattern = _name_pattern(tuple(names))
    for match in pattern.finditer(text, 0, MAX_SCAN):
        start = match.start()
        before = text[max(0, start - 6) : start]
        if re.search(r"\bdef\s+$", before):
            continue
        open_at = match.end() - 1
        close = _closing(text, open_at)
        if close < 0:
            continue
        raw = text[start : close + 1]
        yield CallAt(start, close + 1, " ".join(raw.split()), _is_literal_call(raw))


@lru_cache(maxsize=4096)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(n) for n in names) + r")\s*\(")


def _is_literal_call(raw: str) -> bool:
    if not _depth_ok(raw):
        return False
    try:
        node = ast.parse(raw.translate(_QUOTES).strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return False
    try:
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            ast.literal_eval(arg)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def normal_call(raw: str) -> str:
    """A literal call as it will run: typographic quotes made ASCII, blanks collapsed."""
    return " ".join(raw.translate(_QUOTES).split())


# what joins a call to the value it gives
_STRONG_VERB = (
    r"(?:returns?|returned|gives?|gave|yields?|outputs?|produces?|"
    r"prints?|printed|shows?|showed|displays?|displayed|evaluates?\s+to|evaluated\s+to|equals?|"
    r"is\s+equal\s+to|be\s+equal\s+to|results?\s+in|resulted\s+in|comes?\s+(?:out|back)\s+(?:as|to|with)|comes?\s+to|"
    r"came\s+(?:out|back)\s+(?:as|to|with)|comes?\s+out|came\s+out|spits?\s+(?:out|back)|spat\s+(?:out|back)|becomes?|"
    r"ends?\s+up\s+(?:as|with|being)|ended\s+up\s+(?:as|with|being)|hands?\s+back|sends?\s+back|works?\s+out\s+to|"
    r"amounts?\s+to|adds?\s+up\s+to)"
)
_MODAL = (
    r"(?:should|would|will|must|shall|could|can|might|may|ought\s+to|(?:is\s+|are\s+|'s\s+)?(?:going|supposed|expected|meant)"
    r"\s+to|(?:is\s+|'s\s+)?gonna|(?:has\s+|'s\s+)?gotta|has\s+to|needs\s+to|has\s+got\s+to|'d|'ll)"
)
_NEGATION = (
    r"(?:does\s*n[o']t|do\s*n[o']t|did\s*n[o']t|is\s*n[o']t|should\s*n[o']t|would\s*n[o']t|wo\s*n[o']t|won't|"
    r"can\s*n[o']t|must\s*n[o']t|never|shouldn't|wouldn't|doesn't|didn't|isn't|won’t|doesn’t|shouldn’t|isn’t)"
)
_ADVERB = (
    r"(?:also|just|only|simply|still|really|actually|definitely|always|correctly|then|now|probably|basically|obviously|"
    r"clearly|surely|certainly|indeed|literally|apparently|supposedly|usually|normally)"
)
_RESULT_NOUN = r"(?:result|output|return\s+value|return|value|answer|outcome|response)"
_CONNECT = re.compile(
    r"(?:[`\"'”’]|\*{1,2}|_{1,2})?[ \t]*(?:,|\.\.\.+|…|[—–]|[ \t]-(?=[ \t]))?\s*(?:"
    r"(?P<sym>==>|-->|--|==|=>|->|→|⇒|⟶|=|:|\||[—–])(?:\s*(?:(?:should|would|will|must)\s+)?(?:returns?|gives?|be|yields?|"
    r"outputs?|produces?)(?![\w]))?"
    # the call's result named: "f(x)'s result is", "f(x), the result is"
    r"|(?P<possessive>(?:'s|’s|,?\s*(?:its|the))\s+(?:expected\s+|correct\s+)?" + _RESULT_NOUN + r"\s+"
    r"(?:is|should\s+be|would\s+be|will\s+be|must\s+be|=|:))"
    # a person getting the value: "you should get", "I got", "we'd see", "it printed", "I'm expecting"
    r"|(?P<subject>(?:and|then|so)\s+(?:just\s+)?(?:got|get|gets|saw|see|received|ended\s+up\s+with)"
    r"|(?:(?:and|so|then)\s+)?(?:then\s+)?(?:"
    r"(?:i'm|i\s+am|we're|we\s+are|i\s+was|we\s+were|you're|you\s+are|you'll\s+be|you'd\s+be)\s+"
    r"(?:expecting|getting|seeing|receiving)"
    r"|(?:you|we|i|one|it|they)\s*"
    r"(?:" + _MODAL + r"\s+(?P<neg3>not\s+|never\s+)?|(?P<neg4>" + _NEGATION + r")\s+)?(?:" + _ADVERB + r"\s+)?"
    r"(?:get|gets|got|getting|see|sees|saw|receive|receives|received|expect|expected|want|wanted|need|"
    r"print|prints|printed|show|shows|showed|return|returns|returned|give|gives|gave|output|outputs|"
    r"spits?\s+out|spat\s+out|end\s+up\s+with|ended\s+up\s+with)"
    r"(?:\s+(?:it|that|this|the\s+result|the\s+output))?(?:\s+to\s+(?:get|see|be|return|give|equal|output))?))"
    r"|(?:(?:it|this|that|which|then|that\s+one|this\s+one|the\s+" + _RESULT_NOUN + r")(?:\s+|(?='s|’s)))?"
    r"(?:" + _MODAL + r"\s+(?P<neg1>not\s+|never\s+)?(?:" + _ADVERB + r"\s+)?)?"
    r"(?P<neg2>" + _NEGATION + r"\s+)?"
    r"(?:" + _ADVERB + r"\s+)?(?:(?P<strong>" + _STRONG_VERB + r")|be|is|are|was|'s|’s)"
    r"|\s+should\s+(?:be|return|give|yield|equal|output|produce|evaluate\s+to|come\s+out\s+as)"
    r"|(?P<to>\s+to\s+(?:(?:also|just|only|always)\s+)?(?:be|return|give|yield|equal|output|produce|evaluate\s+to|"
    r"come\s+out\s+(?:as|to)|come\s+back\s+(?:as|with)|end\s+up\s+(?:as|with)))"
    r")(?(sym)|(?![\w]))(?:\s+(?:you|me|us|back|out|exactly|just))?\s*",
    re.IGNORECASE,
)
_FILLER_WORD = re.compile(r"[ \t]*,?[ \t]*(?P<word>[A-Za-z][\w']*)")
_FILLER_STOP = frozenset(
    re.findall(
        r"\S+",
        "not never no nor n't don't doesn't didn't isn't wasn't won't shouldn't wouldn't can't cannot but or if "
        "unless whether than of twice times plus minus squared doubled halved half double triple each per both all "
        "sum total average mean length size count first last second third item items element elements key keys "
        "without except instead rather whose which where while and",
    )
)
MAX_FILLER = 6
"""Words a call may be followed by before a person says what they got: "when I ran f(2) on my laptop I got 4"."""
# what may stand right before a call whose value is stated after it without making it another claim
_BEFORE_NOT_VALUE = re.compile(
    r"(?:(?<![\w])(?:if|whether|unless|suppose|supposing|assuming|assume|in\s+case|once|until|not|twice|half|double|"
    r"triple|thrice)"
    r"|(?:^|[.!?:;\n(]|(?<![\w])(?:so|and|but|also|then|ok|okay|hmm|wait|and\s+so|why|how|how\s+come|when|where|what|"
    r"which),?)\s*(?:does|do|did|should|would|will|is|can|could|shall|must|might|may|was|were|are|doesn't|don't|"
    r"didn't|shouldn't|wouldn't|won't|isn't|can't|couldn't|aren't|wasn't|does\s+not|should\s+not|would\s+not)"
    r"|(?<![\w])(?:the\s+)?(?:(?:first|second|third|last|final|next|\w+(?:st|nd|rd|th))\s+)?"
    r"(?:items?|elements?|entry|entries|keys?|part|parts|length|len|size|sum|type|count|number|digits?|characters?|"
    r"letters?|words?|lines?|index|indices|sign|square|root|log|half|rest|max|min|maximum|minimum|average|mean|"
    r"total|values|first|last|second|third|middle|end|start|beginning|tail|head|one)\s+(?:of|in|from|inside)"
    r"(?:\s+(?:the\s+)?(?:result|output|value|list|dict|tuple|string)\s+(?:of|from))?"
    r"|[\d)\]}][ \t]*[-+*/%]|\w[-+*/%])"
    r"(?:\s+(?:calling|running|running\s+a\s+call\s+to))?[\s`\"']*$",
    re.IGNORECASE,
)
_QUESTION_AFTER = re.compile(
    r"[ \t]*(?:,[ \t]*(?:right|correct|yes|no|isn't\s+it|doesn't\s+it|is\s+that\s+right|or\s+not|maybe|perhaps)[ \t]*)?"
    r"[\"'`]?\?",
    re.IGNORECASE,
)


_NEXT_SENTENCE = re.compile(
    r"[`\"')]*[ \t]*(?:[.;][ \t]+(?=(?:(?:and|so|then)\s+)?(?:the\s+(?:expected\s+|correct\s+)?"
    + _RESULT_NOUN
    + r"|it)\s)"
    r"|\?[ \t]+(?=(?:(?:well|hmm|oh|ok|so)[,.!]?\s+)?(?:the\s+(?:expected\s+|correct\s+)?" + _RESULT_NOUN + r"|it|that)"
    r"(?:\s|'s|’s|'d|'ll)))",
    re.IGNORECASE,
)


def _after_call(text: str, end: int, start: int = -1) -> tuple[Stated, int] | None:
    """The value stated right after a call that ends at ``end`` (a few words may come between when a person then
    says what they got: "on my laptop I got 4", "with my old script and it printed 4"; or the next sentence names
    its result: "Say we call f(2). The result should be 4."); ``start``: where the call starts, when known (what
    comes before it may tell how to read what follows)."""
    found = _connected(text, end, start=start) or _generic(text, end)
    if found is not None:
        return found
    following = _NEXT_SENTENCE.match(text, end, min(len(text), end + 60))
    if following is not None:
        found = _connected(text, following.end(), start=start)
        if found is not None:
            return found
    pos = end
    for _ in range(MAX_FILLER):
        word = _FILLER_WORD.match(text, pos, min(len(text), pos + 60))
        if word is None or word.group("word").lower() in _FILLER_STOP or word.group("word").lower().endswith("n't"):
            return None
        pos = word.end()
        found = _connected(text, pos, after_words=True)
        if found is not None:
            return found
    return None


_EXPECTING = re.compile(
    r"(?<![\w])(?:expect|expects|expected|expecting|want|wants|wanted|need|needs|like|wish|prefer|believe|assume|"
    r"consider|require|requires|think|know|knew|get|make|have|find|found|see|saw|saw|mean|meant|intend|intended|"
    r"asked|ask|tell|told|designed)\s+(?:that\s+)?[`\"']?$",
    re.IGNORECASE,
)


def _connected(text: str, end: int, after_words: bool = False, start: int = -1) -> tuple[Stated, int] | None:
    window = text[end : end + _TAIL]
    connect = _CONNECT.match(window)
    if connect is None or (after_words and not (connect.group("subject") or connect.group("strong"))):
        return None  # after a few words only a verb of giving names the call's value, not "is" nor ":"
    if connect.group("to") and not (start >= 0 and _EXPECTING.search(text, max(0, start - 40), start)):
        return None  # "I'd expect f(x) to be 3", not "it would be wrong for f(x) to be 3"
    pos = end + connect.end()
    negated = any(connect.group(g) for g in ("neg1", "neg2", "neg3", "neg4"))
    read = read_value(text, pos)
    if read is None:
        return None
    stated, stop = read
    if negated:
        return None  # "should not return 5": says what it is not, the value it gives is in another sentence
    if _another_value(text, stop):
        return None  # "f(1) and f(2) return 3 and 4 respectively", "returns 'a', 'b'": values, not the value
    if connect.group("sym") == ":" and "\n" in text[end:pos]:
        return None  # a heading followed by a block, not f(x): y
    return stated, stop


# a verb of no known list between a call and a value that closes the clause ("f(x) spews out 3."); the verbs that
# say something else about a call ("f(x) takes 3", "f(x) has 2") are not read
_ANY_VERB = re.compile(
    r"[ \t]+(?:(?:should|would|will|must|'d|'ll|can)\s+)?(?:(?:just|also|then|always|still|really|basically)\s+)?"
    r"(?P<verb>[a-z]{3,}(?:s|ed)|(?<=should\s)[a-z]{3,}|(?<=would\s)[a-z]{3,}|(?<=will\s)[a-z]{3,}|(?<=must\s)[a-z]{3,})"
    r"(?:\s+(?:back|out|up|over|to|as|into|in|with))?[ \t]+",
)
_NOT_GIVING = frozenset(
    re.findall(
        r"\S+",
        "has have had takes take took needs need needed uses use used calls call called runs run ran accepts accept "
        "accepted requires require required contains contain contained includes include included handles handle "
        "handled raises raise raised throws throw threw fails fail failed crashes crash crashed works work worked "
        "breaks break broke loops loop looped iterates iterate checks check checked compares compare compared sorts "
        "sort sorted counts count counted lasts last lasted costs cost seems seem seemed looks look looked sounds "
        "sound feels feel appears appear appeared starts start started begins begin ends end ended finishes finish "
        "finished waits wait waited sleeps sleep slept times time timed skips skip skipped ignores ignore ignored "
        "misses miss missed lacks lack lacked adds add added subtracts subtract multiplies multiply divides divide "
        "rounds round rounded exceeds exceed exceeded beats beat matches match matched hits hit passes pass passed "
        "means mean meant does did goes go went gets get got is was are were be been being has",
    )
)


def _generic(text: str, end: int) -> tuple[Stated, int] | None:
    """A value after a verb of no known list that closes its clause: "f(x) spews out 3.", "f(x) should emit 'a'"."""
    verb = _ANY_VERB.match(text, end, min(len(text), end + 60))
    if verb is None or verb.group("verb").lower() in _NOT_GIVING or verb.group("verb").lower() in _FILLER_STOP:
        return None
    read = read_value(text, verb.end())
    if read is None or not re.match(r"[ \t]*(?:[.,;!)\n]|$)", text[read[1] : read[1] + 4]):
        return None
    if isinstance(read[0].value, str) and read[0].text[:1] not in "'\"`":
        return None
    return read


def _another_value(text: str, stop: int) -> bool:
    """Whether another value follows the one ending at ``stop`` in a list ("3 and 4", "'a', 'b' or 'c'", "3 and 4
    respectively")."""
    if re.match(r"[ \t]*,?[ \t]*respectively", text[stop : stop + 24], re.IGNORECASE):
        return True
    joint = re.match(r"[ \t]*(?:,[ \t]*and|,[ \t]*or|,|and|&|or)[ \t]+", text[stop : stop + 12], re.IGNORECASE)
    if joint is None:
        return False
    pos = stop + joint.end()
    return read_value(text, pos) is not None or _loose_value(text, pos) is not None


def _commented(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """``f(2)  # 4`` or ``print(f(2))  # -> 4``: the value in a comment after the call, alone on its line."""
    wrapped = re.search(r"(?<![\w.])print\(\s*$", text[max(0, call.start - 10) : call.start])
    after = re.match(r"(?:\s*\))?" if wrapped else "", text[call.end : call.end + 10])
    pos = call.end + (after.end() if after else 0)
    comment = re.match(
        r"[ \t]*#[ \t]*(?:(?:->|=>|→|==|=|:|(?:should\s+)?(?:returns?|gives?|outputs?|prints?|be|is)|"
        r"expected(?:\s+output)?:?|output:|result:)[ \t]*)?",
        text[pos : pos + 60],
        re.IGNORECASE,
    )
    if comment is None:
        return None
    read = read_value(text, pos + comment.end())
    if read is None or not re.match(r"[ \t]*(?:\n|$)", text[read[1] : read[1] + 40]):
        return None
    return read


_NEXT_LINE_LABEL = re.compile(
    r"[ \t]*\n[ \t]*(?:[-*•][ \t]*)?(?:(?:expected|correct|actual)?[ \t]*(?:output|result|value|return(?:\s+value)?|"
    r"answer|returns|gives|expected)|out|->|=>|→|==|=)[ \t]*(?:[:=]|->|=>|→|is)?[ \t]*",
    re.IGNORECASE,
)


def _doctest(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """``>>> f(2)`` and on the next line the value alone, as a doctest or a REPL shows it; or a call and on the
    next line a labelled value ("Input: f(2)" / "Output: 4", "f(2)" / "Expected: 4")."""
    line_start = text.rfind("\n", 0, call.start) + 1
    labelled = _NEXT_LINE_LABEL.match(text[call.end : call.end + 60])
    if labelled is not None and labelled.end() > labelled.group(0).rfind("\n") + 1:
        after: re.Match[str] | None = labelled
    elif re.fullmatch(r"[ \t]*(?:>>>|In\s*\[\d*\]:)[ \t]*", text[line_start : call.start]):
        after = re.match(r"[ \t]*\n(?:Out\s*\[\d*\]:)?[ \t]*", text[call.end : call.end + 40])
    else:
        return None
    if after is None:
        return None
    read = read_value(text, call.end + after.end())
    if read is None or not re.match(r"[ \t]*(?:\n|$)", text[read[1] : read[1] + 40]):
        return None
    return read


# the value named before the call: "you should get 3 from f(x)", "it returns None for f([])", "3 == f(1)",
# "3 is what f(1) returns"
_CALL_VERBS = (
    r"(?:call|called|run|ran|try|tried|pass|passed|do|did|use|used|execute|executed|evaluate|evaluated|type|typed)"
)
_BEFORE_CALL = re.compile(
    r"(?:(?<![\w])(?:for|from|with|on|by\s+calling|when\s+calling|when\s+running|after\s+calling|on\s+calling|"
    r"(?:when|if|once|after|whenever)\s+(?:i|you|we|one)\s+" + _CALL_VERBS + r"|"
    r"(?:when|if)\s+(?:i|you|we)\s+(?:give|feed)\s+it)"
    r"(?:\s+(?:it\s+)?(?:the\s+)?(?:args?|arguments|inputs?|parameters|values)\s+(?:of|from|in))?"
    r"|(?P<what>(?<![\w])(?:is|'s|was|would\s+be|will\s+be|should\s+be)\s+(?:exactly\s+)?(?:what|the\s+(?:expected\s+|correct\s+|right\s+)?"
    r"(?:result|output|answer|return\s+value|value)\s+(?:of|for|from))(?:\s+(?:i|you|we)\s+(?:get|got|see|saw|expect)"
    r"(?:\s+(?:from|for|when\s+calling|when\s+running|if\s+you\s+call))?)?"
    r"|(?<![\w])(?:is|gets|was|should\s+be|would\s+be|will\s+be)\s+(?:returned|given|produced|output|printed)\s+"
    r"(?:by|for|from)|(?:comes|came|should\s+come|will\s+come)\s+(?:back\s+|out\s+)?(?:from|of))"
    r"(?:\s+(?:calling|running|it\s+as))?"
    r"|==)[\s`]*$",
    re.IGNORECASE,
)
_VALUE_VERB = re.compile(
    r"(?:(?<![\w])(?:returns?|returned|gives?|gave|get|gets|got|yields?|outputs?|produces?|prints?|printed|"
    r"expect(?:ed|ing)?|see|saw|equals?|receive|received|end\s+up\s+with|ended\s+up\s+with|"
    r"(?:it|that|the\s+(?:result|output|answer|return\s+value))\s*"
    r"(?:is|'s|should\s+be|would\s+be|will\s+be|must\s+be))|assert)(?![\w])[ \t]*",
    re.IGNORECASE,
)
_VALUE_START = re.compile(
    r"(?:^|(?<=[.!?:;]\s))[ \t]*(?:(?:so|well|ok|okay|yes|yeah|hmm|oh|and|but|also|then)[,!]?[ \t]+)?",
    re.IGNORECASE | re.MULTILINE,
)


def _before_call(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """A value stated before the call it is about (``_BEFORE_CALL``): the value and where its statement starts."""
    joint = _BEFORE_CALL.search(text, max(0, call.start - 80), call.start)
    if joint is None:
        return None
    value_end = joint.start()
    while value_end > 0 and text[value_end - 1] in " \t,":
        value_end -= 1
    clause = re.split(r"[.!?;\n]", text[call.end : call.end + 80])[0]
    if _negated(clause):
        return None  # "3 is what f(x) should not return"
    window = max(0, value_end - MAX_CALL - 40)
    starts = list(_VALUE_VERB.finditer(text, window, value_end))
    if joint.group("what"):  # "3 is what f(x) gives": the value may open the sentence
        starts += [m for m in _VALUE_START.finditer(text, window, value_end) if m.start() >= window]
    best: tuple[Stated, int] | None = None
    for verb in starts:
        read = read_value(text, verb.end())
        if read is None or read[1] != value_end:
            continue
        before = re.split(r"[.!?;\n]", text[max(0, verb.start() - 40) : verb.start()])[-1]
        if _negated(before):
            return None  # "I don't get 3 from f(x)"
        best = read[0], verb.end() if verb.re is _VALUE_START else verb.start()
    return best


_DENIAL = re.compile(
    r"(?<![\w])(?:not|never|no|n't|doubt|doubtful|unlikely|wrong|bug|buggy|incorrect|mistake|mistaken|instead\s+of|"
    r"rather\s+than|avoid|hardcod\w*|hard-cod\w*|pretend|fake|false\s+that|untrue\s+that|impossible)(?![\w])|n't(?![\w])",
    re.IGNORECASE,
)


def _denied_before(text: str, start: int) -> bool:
    """Whether the clause before a call denies or doubts what follows ("I doubt f(x) gives 3", "don't hardcode
    f(x) = 3"): a statement about the call that is not what the person says it gives."""
    before = _STRING.sub(lambda m: " " * len(m.group(0)), text[max(0, start - MAX_CALL - 80) : start])
    clause = re.split(r"[.!?;:,\n]|\bbut\b", before[-80:])[-1]
    return bool(_DENIAL.search(clause))


_STRING = re.compile(r"(?<![\w])'[^'\n]*'(?![\w])|\"[^\"\n]*\"|`[^`\n]*`")


_LIST_JOINT = re.compile(r"[ \t]*(?:,[ \t]*and|,[ \t]*or|,|and|&)[ \t]*", re.IGNORECASE)


def _respectively(text: str, calls: Sequence[CallAt]) -> list[Found]:
    """ "f(1) and f(2) return 3 and 4 respectively": each call with its value, in order."""
    out: list[Found] = []
    i = 0
    while i < len(calls):
        group = [calls[i]]
        while i + len(group) < len(calls):
            joint = _LIST_JOINT.fullmatch(text, group[-1].end, calls[i + len(group)].start)
            if joint is None:
                break
            group.append(calls[i + len(group)])
        if len(group) < 2:
            i += 1
            continue
        i += len(group)
        connect = _CONNECT.match(text[group[-1].end : group[-1].end + _TAIL])
        if connect is None or any(connect.group(g) for g in ("neg1", "neg2", "neg3", "neg4")):
            continue
        pos, values = group[-1].end + connect.end(), list[Stated]()
        while len(values) < len(group):
            read = read_value(text, pos) if not values else None
            if values:
                joint = _LIST_JOINT.match(text, pos)
                read = read_value(text, joint.end()) if joint else None
                if read is None and joint is not None:  # the follow-word rule does not apply inside a list
                    read = _loose_value(text, joint.end())
            elif read is None:
                read = _loose_value(text, pos)
            if read is None:
                break
            values.append(read[0])
            pos = read[1]
        tail = re.match(r"[ \t]*,?[ \t]*respectively", text[pos : pos + 24], re.IGNORECASE)
        if len(values) != len(group) or tail is None:
            continue
        first, stop = group[0].start, pos + tail.end()
        if (
            _BEFORE_NOT_VALUE.search(text, max(0, first - 60), first)
            or _denied_before(text, first)
            or _QUESTION_AFTER.match(text, stop)
            or _unsure(text, first, stop, [(c.start, c.end) for c in group])
        ):
            continue  # asked, doubted or taken back, as a single claim would be
        for call, value in zip(group, values, strict=True):
            out.append(Found((call.start, pos + tail.end()), normal_call(call.text), call.literal, value))
    return out


def _loose_value(text: str, pos: int) -> tuple[Stated, int] | None:
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


def find_claims(
    reply: str,
    names: Sequence[str],
    single_arg: int | None,
    question: str | None = None,
) -> list[Found]:
    """The claims of ``reply`` (see the module docstring), in order, at most ``MAX_CLAIMS``."""
    text = reply[:MAX_SCAN].translate(_QUOTES)  # one character for one: spans still index the reply
    found: list[Found] = []
    taken: list[tuple[int, int]] = []
    skipped_until = -1  # where the last call that is not about its own value ended
    calls = list(islice(calls_in(text, names), MAX_CANDIDATES))
    paired = _respectively(text, calls)
    for item in paired:
        found.append(item)
        taken.append(item.span)
    for call in calls:
        if len(found) >= MAX_CLAIMS:
            break
        if any(a <= call.start < b for a, b in taken):
            continue
        if (
            _BEFORE_NOT_VALUE.search(text, max(0, call.start - 60), call.start)
            or _denied_before(text, call.start)
            or (skipped_until >= 0 and re.fullmatch(r"\s*(?:,|and|or|,\s*and)\s*", text[skipped_until : call.start]))
        ):
            skipped_until = call.end  # "the first item of f(x) is 3", "if f(x) is 3", "the sum of f(1) and f(2)"
            continue
        read = _after_call(text, call.end, call.start) or _doctest(text, call) or _commented(text, call)
        if read is not None:
            stated, stop = read
            span, value_at = (call.start, stop), (max(call.end, stop - len(stated.text) - 2), stop)
        else:
            before = _before_call(text, call)
            if before is None or any(a < call.start and b > before[1] for a, b in taken):
                continue
            stated, start = before
            span, value_at = (start, call.end), (start, call.start)
        if _QUESTION_AFTER.match(text, span[1]):
            continue  # "so f(x) gives 3?", "f(x) is 3, right?": asked, not said
        if _unsure(text, *span, values=[(call.start, call.end), value_at]):
            continue  # "maybe f(x) gives 3", "f(x) might return 3, not sure": not said as known
        found.append(Found(span, normal_call(call.text), call.literal, stated))
        taken.append(span)
    if single_arg == 1 and names and len(found) < MAX_CLAIMS:
        for item in _prose_claims(text, names[0], taken):
            if len(found) >= MAX_CLAIMS:
                break
            found.append(item)
            taken.append(item.span)
    if question and not found:
        answer = _answer_to(text, question[:MAX_SCAN].translate(_QUOTES), names)
        if answer is not None and not _list_marker(text, answer):
            found.append(answer)
    found = [f for f in found if not _CONDITIONAL.match(text, f.span[1])]
    found.sort(key=lambda f: f.span)
    return found[:MAX_CLAIMS]


# a value said to hold only under a condition ("returns True if the list is empty", "gives 0 when x < 0") is a rule,
# not what the call gives; a condition on the speaker ("if I remember right") is a hedge and keeps the claim
_CONDITIONAL = re.compile(
    r"[ \t]*,?[ \t]*(?:only[ \t]+)?(?:if|when|whenever|unless|provided|as[ \t]+long[ \t]+as|in[ \t]+case|assuming)\b"
    r"(?![ \t]+(?:i|i'm|i[ \t]+am|i've|i[ \t]+recall|i[ \t]+remember|i'm[ \t]+not|my[ \t]+memory|memory)\b)",
    re.IGNORECASE,
)


def _list_marker(text: str, answer: Found) -> bool:
    """A reply opening "1. The list ..." numbers its points: the 1 answers nothing."""
    start, stop = answer.span
    return (
        start == 0
        and answer.stated.value == 1
        and not isinstance(answer.stated.value, bool)
        and re.match(r"[.)][ \t]+[A-Z]", text[stop : stop + 3]) is not None
    )


# -- prose: "for [1, 2] it returns 3" ---------------------------------------------------------------------------
_PROSE_ARG = re.compile(
    r"(?:(?<![\w])(?:for|with|given|on|passing|feeding|supplying|providing|giving\s+it|input(?:ting)?|"
    r"an?\s+(?:input|argument|arg|parameter)\s+of|take|taking|consider|using|"
    r"by\s+(?:passing|giving|feeding)(?:\s+it)?|"
    r"(?:if|when|once|whenever)\s+(?:you\s+|we\s+|i\s+|someone\s+|somebody\s+|anyone\s+|a\s+user\s+|the\s+user\s+|"
    r"they\s+)?(?:pass|passes|passed|give|gives|gave|input|inputs|call\s+it\s+with|calls\s+it\s+with|run\s+it\s+(?:on|with)|"
    r"feed|feeds|plug\s+in|plugs\s+in|put\s+in|puts\s+in|pass\s+in|passes\s+in|use|uses|enter|enters|provide|provides)"
    r"(?:\s+it)?(?:\s+in)?|"
    r"(?:feed|give|pass|hand)\s+it|plug\s+in|pass\s+in|put\s+in|(?:^|(?<=[.!?:;]\s))(?:pass|feed|give|try|use)(?:\s+it)?|"
    r"(?:you|we|i|they|someone)\s+(?:pass|passes|passed|feed|feeds|give|gives|input|inputs|enter|enters)(?:\s+(?:it|in))?|"
    r"(?:(?:if|when|say|suppose|let's\s+say|imagine|assume|assuming|and|so)\s+)?(?:the|my|an?|your)\s+"
    r"(?:input|argument|arg|parameter)\s+(?:is|was|=|:))"
    r"(?:[ \t]*[:=])?\s+(?:it\s+|in\s+|the\s+input\s+|an?\s+input\s+of\s+|an?\s+input\s+|input\s+)?)",
    re.IGNORECASE,
)
_SUBJECT = (
    r"(?:it|the\s+function|that|this|you|we|i|one|the\s+result|the\s+output|the\s+answer|the\s+return\s+value|"
    r"the\s+value|the\s+function\s+call)"
)
_PROSE_VERB = (
    r"(?:returns?|gives?|yields?|outputs?|produces?|prints?|be|is|get|gets|got|see|expect(?:\s+to\s+(?:get|see))?|"
    r"(?:like|love|want|hope|expect)\s+to\s+(?:see|get)|want|map\s+to|maps\s+to|turns?\s+into|goes\s+to|go\s+to|"
    r"get\s+back|spits?\s+out|hands?\s+back|gives?\s+back|returns?\s+back|results?\s+in|leads?\s+to|"
    r"equals?|comes?\s+out\s+(?:as|to)|evaluates?\s+to|ends?\s+up\s+(?:as|with)|spits?\s+out)"
)
_PROSE_THEN = re.compile(
    r"(?:\s+as\s+(?:the\s+|an\s+|its\s+)?(?:input|argument|arg|parameter))?"
    r"\s*(?:,?\s*(?:for\s+example|for\s+instance|as\s+an\s+example|e\.g\.|say))?"
    r"\s*(?:(?:->|=>|→|⇒|-->|==>)\s*(?:(?:output|result|returns?|gives?|expected)(?:\s*[:=])?\s*)?|"
    r"(?:[,;:—–]|\s-)?\s*(?:(?:and|so)\s+)?(?:then\s+)?(?:"
    r"" + _SUBJECT + r"(?:'s|’s)"  # "it's 3"
    r"|(?:" + _SUBJECT + r"\s*(?:'d|'ll|’d|’ll)?\s*)?"
    r"(?:(?:should|would|will|must|ought\s+to|is\s+supposed\s+to|needs\s+to|is\s+expected\s+to|has\s+to)\s+)?"
    r"(?:(?:also|just|simply|only|always|then)\s+)?" + _PROSE_VERB + r""
    r")(?![\w])(?:\s+(?:back|out))?)\s*",
    re.IGNORECASE,
)
_EMPTY_SUBJECT = re.compile(
    r"(?<![\w])(?:an?\s+|the\s+)?empty\s+(list|array|string|str|dict|dictionary|set|tuple)(?:\s+input)?\s+"
    r"(?:should\s+|would\s+|will\s+)?(?:returns?|gives?|yields?|produces?|outputs?|results?\s+in)(?![\w])\s*",
    re.IGNORECASE,
)
_EMPTY_IF = re.compile(
    r"(?<![\w])(?:if|when|whenever|once)\s+(?:the\s+|an?\s+|your\s+|my\s+)?(?:input\s+)?"
    r"(list|array|string|str|dict|dictionary|set|tuple)(?:\s+(?:passed\s+in|given|input))?\s+(?:is|was|'s)\s+empty",
    re.IGNORECASE,
)


_AS_INPUT = re.compile(
    r"[ \t]+(?:as\s+(?:the\s+|an\s+|its\s+)?(?:input|argument|arg|parameter)(?![\w])|"
    r"(?=(?:should|would|will|must)\s+(?:map|turn|go)\s+(?:to|into)(?![\w]))|(?=(?:maps|turns|goes)\s+(?:to|into)(?![\w])))",
    re.IGNORECASE,
)
_IN_OUT = re.compile(r"[ \t]+in[ \t]*(?:[,;:—–→]|->|=>)[ \t]*", re.IGNORECASE)
_MAPS = r"(?:(?:should|would|will|must)\s+)?(?:map|maps|turn|turns|go|goes)\s+(?:to|into)"
# "it should return 3 given [1, 2]": the value, then the argument
_GIVEN_AFTER = re.compile(
    r"[ \t]+(?:given|for|with|when\s+given|if\s+given|on|from|when\s+(?:the\s+)?input\s+is|if\s+(?:the\s+)?input\s+is|"
    r"when\s+(?:you\s+)?(?:pass|give|feed)(?:\s+it)?|if\s+(?:you\s+)?(?:pass|give|feed)(?:\s+it)?)[ \t]+"
    r"(?:(?:an?|the)\s+input\s+(?:of\s+)?|input\s+)?",
    re.IGNORECASE,
)


def _prose_claims(text: str, name: str, taken: list[tuple[int, int]]) -> Iterator[Found]:
    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in taken)

    # the argument: a value, or a number followed by the words that say what it gives ("given 250 the function
    # gives 3": what follows the number is the sentence's, not a unit's)
    starts = [
        (m, read_value(text, m.end()) or _loose_value(text, m.end()))
        for m in islice(_PROSE_ARG.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)
    ]
    for m in islice(_VALUE_START.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES):  # "[1, 2] as input gives 3"
        arg = read_value(text, m.end()) or _loose_value(text, m.end())
        tail = _AS_INPUT.match(text, arg[1]) if arg else None
        if arg is not None and tail is not None:
            starts.append((m, (arg[0], tail.end())))
        joint = _IN_OUT.match(text, arg[1]) if arg else None
        out = read_value(text, joint.end()) or _loose_value(text, joint.end()) if joint else None
        if arg is not None and out is not None and re.match(r"[ \t]+out(?![\w])", text[out[1] : out[1] + 8]):
            span = (m.end(), out[1] + 4)
            if free(span) and not arg[0].approx and not _unsure(text, *span, [(m.end(), out[1])]):
                yield Found(span, f"{name}({_short_repr(arg[0].value, MAX_CALL)})", True, out[0])
    for match, arg in starts:
        if arg is None or arg[0].approx or arg[0].percent:
            continue
        then = _PROSE_THEN.match(text, arg[1])
        if then is None or then.end() == arg[1]:
            continue
        stated = read_value(text, then.end())
        if stated is None:
            continue
        span = (match.start(), stated[1])
        if not free(span) or _negated(text[arg[1] : then.end()]) or _QUESTION_AFTER.match(text, stated[1]):
            continue
        if _unsure(text, *span, values=[(arg[1] - len(arg[0].text) - 1, arg[1]), (then.end(), stated[1])]):
            continue
        yield Found(span, f"{name}({_short_repr(arg[0].value, MAX_CALL)})", True, stated[0])
    for verb in islice(_VALUE_VERB.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES):  # "it should return 3 given [1, 2]"
        stated = read_value(text, verb.end())
        given = _GIVEN_AFTER.match(text, stated[1]) if stated else None
        arg = read_value(text, given.end()) if given else None
        if stated is None or arg is None or arg[0].approx or arg[0].percent:
            continue
        if not re.match(r"[ \t]*(?:[.,;!\n]|and\b|$)", text[arg[1] : arg[1] + 8]):
            continue
        span = (verb.start(), arg[1])
        clause = re.split(r"[.!?;:,\n]|\bbut\b", text[max(0, verb.start() - 60) : verb.start()])[-1]
        if not free(span) or _negated(clause) or _DENIAL.search(clause) or _QUESTION_AFTER.match(text, arg[1]):
            continue
        if _unsure(text, *span, values=[(verb.end(), stated[1]), (given.end() if given else 0, arg[1])]):
            continue
        yield Found(span, f"{name}({_short_repr(arg[0].value, MAX_CALL)})", True, stated[0])
    empties = [*islice(_EMPTY_SUBJECT.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)]
    for match in [*empties, *islice(_EMPTY_IF.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)]:
        pos = match.end()
        if match.re is _EMPTY_IF:
            then = _PROSE_THEN.match(text, pos)
            if then is None or then.end() == pos or _negated(text[pos : then.end()]):
                continue
            pos = then.end()
        stated = read_value(text, pos)
        if stated is None:
            continue
        span = (match.start(), stated[1])
        said = not _QUESTION_AFTER.match(text, stated[1]) and not _unsure(text, *span, [(match.end(), stated[1])])
        if free(span) and said:
            value = _EMPTY_VALUES[match.group(1).lower()]
            yield Found(span, f"{name}({value!r})", True, stated[0])


def _negated(text: str) -> bool:
    return bool(re.search(r"\b(?:not|never|n't)\b|n't\b|n’t\b", text, re.IGNORECASE))


# -- an answer to a question about one call ---------------------------------------------------------------------
_INTERJECTION = r"(?:(?:oh+|ah+|hmm+|h?mm+|uh+|um+|well|so|ok(?:ay)?|alright|actually|honestly|ha(?:ha)*)[,.!…]*\s+)?"
_AFTER_WORD = r"(?=\s*(?:[,.!;:—–-]|$)|\s+(?:it|that|this|exactly|correct|right|indeed|precisely|the)\b)"
_YES = re.compile(
    r"\s*" + _INTERJECTION + r"(?:"
    r"(?:yes|yeah|yep|yup|ya|correct|exactly|that's\s+right|that\s+is\s+right|that's\s+correct|that\s+is\s+correct|"
    r"that's\s+it|that's\s+the\s+one|affirmative|mm-?hmm|uh-?huh|you\s+got\s+it|spot\s+on|bingo|precisely|"
    r"confirmed|i\s+(?:can\s+)?confirm(?:\s+that)?|(?:you're|you\s+are)\s+(?:(?:totally|absolutely|quite)\s+)?(?:right|correct)|"
    r"(?:it|that)\s+(?:does|is|will|should|would)(?=\s*(?:[.!]|$)))"
    + _AFTER_WORD
    # words that also open other sentences ("Right, so what I need is..."): a yes only alone or echoing the question
    + r"|(?:right|sure|indeed|absolutely|definitely|of\s+course|true)"
    r"(?=\s*(?:[.!]|$)|\s*,?\s*(?:it|that)(?:'s|\s+(?:is|does|will|should|would|returns|gives))\b)"
    r")",
    re.IGNORECASE,
)
_NO = re.compile(
    r"\s*" + _INTERJECTION + r"(?:no|nope|nah|not\s+quite|not\s+really|incorrect|wrong|that's\s+wrong|"
    r"that's\s+not\s+right|that's\s+not\s+it|that's\s+incorrect|that\s+is\s+not\s+right|that's\s+not\s+correct|negative|"
    r"(?:you're|you\s+are)\s+(?:(?:totally|absolutely|quite)\s+)?(?:wrong|mistaken|incorrect)|"
    r"(?:it|that)\s+(?:doesn't|does\s+not|isn't|is\s+not|won't|will\s+not|shouldn't|should\s+not|wouldn't)"
    r"(?=\s*(?:[.!,;]|$)))" + _AFTER_WORD,
    re.IGNORECASE,
)
# what makes a statement no claim: the person says they do not know, or only might
_UNSURE = re.compile(
    r"(?<![\w])(?:not\s+(?:sure|certain|100%)|unsure|no\s+idea|no\s+clue|(?:do\s*n[o']t|do\s+not|can't|cannot|can\s+not)"
    r"\s+(?:know|remember|recall|tell|say)|not\s+(?:know|remember)|maybe|perhaps|possibly|might|may\s+be|could\s+be|"
    r"let\s+me\s+(?:check|look|see|think|verify)|i'll\s+(?:check|look|have\s+to)|(?:look|check)\s+(?:it\s+)?(?:up|later)|"
    r"have\s+to\s+check|need\s+to\s+check|depends|guessing|wild\s+guess|i\s+doubt|doubt\s+it|doubtful|"
    r"(?:could|may)\s+(?:return|give|yield|output))"
    r"(?![\w])",
    re.IGNORECASE,
)
_ANSWER_VERB = (
    r"(?:'s|’s|'d\s+be|'ll\s+be|is|was|are|equals|returns|gives|yields|outputs|prints|evaluates\s+to|"
    r"(?:comes|came)\s+(?:out|back)\s+(?:as|to|with)|works\s+out\s+to|amounts\s+to|adds\s+up\s+to|"
    r"(?:" + _MODAL + r"\s+)?(?:(?:also|just|only|probably|definitely|always|basically|then)\s+)?"
    r"(?:be|return|give|yield|output|produce|print|equal|evaluate\s+to|come\s+(?:out|back)\s+(?:as|to|with)|"
    r"work\s+out\s+to|amount\s+to|add\s+up\s+to|be\s+equal\s+to))"
)
_ANSWER_LEAD = re.compile(
    r"\s*(?:(?:yes|yeah|yep|no|nope|well|so|hmm+|h?mm+|oh+|ah+|uh+|um+|ok(?:ay)?|alright|sure|right|actually|honestly|"
    r"basically|good\s+question|great\s+question|easy|simple|easy\s+one|that's\s+(?:an\s+)?easy(?:\s+one)?|"
    r"that's\s+simple|let\s+me\s+see|let's\s+see|i\s+see|of\s+course|quick\s+answer|short\s+answer|"
    r"off\s+the\s+top\s+of\s+my\s+head|from\s+my\s+notes|in\s+my\s+notes|in\s+(?:that|this|which)\s+case|"
    r"for\s+(?:that|this)(?:\s+one|\s+call|\s+input|\s+example)?|there|then|here|with\s+(?:those|these)\s+"
    r"(?:inputs|arguments|args|values))\s*[,.!:…—–-]*\s+)*"
    r"(?:(?:i\s+think|i\s+believe|i'd\s+say|i\s+would\s+say|i\s+guess|(?:i'm|i\s+am)\s+(?:(?:pretty|fairly|quite|very|"
    r"absolutely|completely|100%)\s+)?(?:sure|certain|confident|positive)|pretty\s+sure|probably|definitely|if\s+i\s+remember(?:\s+(?:right|correctly))?|as\s+far\s+as\s+i\s+know|"
    r"from\s+memory|i\s+know\s+that|i'm\s+confident)(?:\s+that)?\s*,?\s*)?"
    r"(?:(?:(?:it|that|this|that\s+one|this\s+one|that\s+call|this\s+call|the\s+function|the\s+call|"
    r"(?:the\s+)?(?:expected\s+|correct\s+|right\s+|actual\s+)?" + _RESULT_NOUN + r"(?:\s+(?:there|here))?)"
    r"\s*" + _ANSWER_VERB + r""
    r"|(?:you|we|i|one)(?:'d|'ll|\s+" + _MODAL + r")?\s+(?:(?:also|just|only|probably|then)\s+)?"
    r"(?:get|got|see|saw|receive|want|expect|end\s+up\s+with)(?:\s+to\s+(?:get|see))?"
    r"|i(?:'d|\s+would)?\s+expect(?:\s+to\s+(?:get|see))?|i'm\s+expecting|we're\s+expecting"
    r"|(?:" + _MODAL + r"\s+)(?:(?:also|just|only|probably|definitely)\s+)?(?:be|return|give|yield|output|"
    r"come\s+(?:out|back)\s+(?:as|to|with)|evaluate\s+to|equal)"
    r"|returns?|gives?|expected(?:\s+(?:output|result|value|answer))?|answer|result|output)(?![\w]))?"
    r"\s*(?:[:=]|->|→)?\s*",
    re.IGNORECASE,
)


# what, right after a claim, takes it back: "... no wait", "but that was a bug", "I might be wrong"
_RETRACTION = re.compile(
    r"[^.!?\n]{0,80}?(?:[.!?…]+|\s+-+|\s*[—–])?[ \t]*(?:(?:no\s*,?\s*wait|wait\s*,?\s*no|actually\s*,?\s*no|"
    r"scratch\s+that|"
    r"never\s*mind|or\s+not|correction|sorry\s*,?\s*(?:no|i\s+mean)|i\s+mean)(?![\w])|"
    r"[^.!?\n]{0,60}?(?:that\s+(?:was|is|'s)\s+(?:a\s+bug|wrong|incorrect|a\s+mistake|not\s+right)|"
    r"which\s+(?:was|is)\s+(?:a\s+bug|wrong|incorrect|a\s+mistake)|(?:i\s+)?(?:might|could|may)\s+be\s+wrong|"
    r"don't\s+quote\s+me|not\s+sure\s+though|if\s+i'm\s+not\s+mistaken))",
    re.IGNORECASE,
)


def _unsure(text: str, start: int, stop: int, values: Sequence[tuple[int, int]] = ()) -> bool:
    """Whether the sentence around ``text[start:stop]`` (bounded) says the person does not know (``_UNSURE``); the
    ``values`` spans (the call's arguments, the value stated) are not read: "maybe" in a string is no hedge."""
    lo = max(
        text.rfind(". ", max(0, start - 200), start),
        text.rfind("\n", max(0, start - 200), start),
        text.rfind("!", max(0, start - 200), start),
        text.rfind("?", max(0, start - 200), start),
        start - 200,
        -1,
    )
    ends = [text.find(mark, stop, stop + 200) for mark in (". ", "\n", "!", "?")]
    hi = min((i for i in ends if i >= 0), default=min(len(text), stop + 200))
    chars = list(text[lo + 1 : hi])
    for a, b in values:
        for i in range(max(a, lo + 1), min(b, hi)):
            chars[i - lo - 1] = " "
    if _UNSURE.search(_STRING.sub(lambda m: " " * len(m.group(0)), "".join(chars))):
        return True
    return bool(_RETRACTION.match(_STRING.sub(lambda m: " " * len(m.group(0)), text[stop : stop + 160])))


def proposals(text: str, names: Sequence[str]) -> dict[str, Stated]:
    """What a turn says its literal calls give, in a question too ("Should f(2) return 4?", "f(2) gives 4, right?"
    propose 4): the value a yes confirms, and the agent's values a grounded human is told the truth about. The
    first value said of each call, in order."""
    text = re.sub(  # "should f(x) return 5 or something else?" proposes 5
        r"(?<=\S)([ \t]+or[ \t]+(?:something|anything)[ \t]+else|[ \t]+or[ \t]+not|[ \t]+or[ \t]+what|,?[ \t]+right)"
        r"(?=[ \t]*\?)",
        lambda m: " " * len(m.group(0)),
        text[:MAX_SCAN].translate(_QUOTES),
        flags=re.IGNORECASE,
    )
    out: dict[str, Stated] = {}
    for c in islice(calls_in(text, names), MAX_CANDIDATES):
        read = _after_call(text, c.end, c.start) if c.literal else None
        if read is not None and not read[0].negated:
            out.setdefault(normal_call(c.text), read[0])
    return out


def _answer_to(text: str, question: str, names: Sequence[str]) -> Found | None:
    """The value ``text`` gives in answer to a question about one literal call (or a yes or no to a question that
    states the call's value)."""
    asked = list(
        dict.fromkeys(normal_call(c.text) for c in islice(calls_in(question, names), MAX_CANDIDATES) if c.literal)
    )
    if len(asked) != 1:
        return None
    call = asked[0]
    proposed = next(iter(proposals(question, names).values()), None)
    head = _ANSWER_LEAD.match(text)
    pos = head.end() if head else 0
    read = read_value(text, pos)
    if _unsure(text, 0, read[1] if read else pos, [(pos, read[1])] if read else []):
        return None  # "no idea", "not sure, maybe 3", "let me check": nothing is said
    if read is not None and not _negated(text[:pos]):
        stated, stop = read
        if _answer_like(text, pos, stop):
            return Found((pos, stop), call, True, stated)
    if read is None:
        short = _short_answer(text)
        if short is not None:
            return Found(short[0], call, True, short[1])
    if proposed is not None:
        yes, no = _YES.match(text), _NO.match(text)
        if yes and not _negated(text[: yes.end() + 12].lower().replace("not quite", "")):
            return Found((yes.start(), yes.end()), call, True, proposed)
        if no and read is None:
            negated = Stated(proposed.value, proposed.text, proposed.approx, proposed.percent, negated=True)
            return Found((no.start(), no.end()), call, True, negated)
    return None


def _answer_like(text: str, start: int, stop: int) -> bool:
    """A value read at the start of a reply answers the question when what follows it ends the statement (not
    "3 of them are...", which ``read_value`` already refuses, nor "2 things: ...", nor a numbered list's "1)" or
    "1." before the next item)."""
    rest = text[stop : stop + 3]
    if re.fullmatch(r"\d{1,2}", text[start:stop].strip()) and (
        rest[:1] == ")" or (rest[:1] == "." and re.search(r"(?:^|\n)[ \t]*\d{1,2}[.)][ \t]", text[stop:]))
    ):
        return False
    if start > 120 or _QUESTION_AFTER.match(text, stop) or (rest and rest[0] not in " .,;!)\n`'\""):
        return False
    words = re.match(r"[ \t]+([A-Za-z][\w']*(?:\s+[A-Za-z][\w']*){0,2})", text[stop : stop + 40])
    return words is None or bool(_AFFIRMING.match(words.group(1)))


# what may follow a value that answers a question ("3 is the answer", "3 for sure"; not "3 is the number of items")
_AFFIRMING = re.compile(
    r"(?:is\s+(?:the\s+(?:answer|result|output|value|one)|what|right|correct|it)|was\s+(?:the\s+answer|what)|"
    r"should\s+be|would\s+be|comes?\s+(?:out|back)|i\s+(?:think|believe|guess|reckon|expect|got|get)|for\s+sure|"
    r"definitely|probably|exactly|precisely|if|since|because|as|from|there|here|in\s+that|then|too|though|right|"
    r"again|back|every|each|always|when|i'm|i'd|that's|it's|you|we|and|but|so)(?![\w'])",
    re.IGNORECASE,
)
_ANSWER_CUES = frozenset(
    re.findall(
        r"\S+",
        "to with as be is was are it's that's get got gets say says expect expecting return returns returned give "
        "gives gave yield yields output outputs produce produces print prints equal equals probably definitely guess "
        "think bet pick choose answer result output value expected surely certainly obviously clearly just exactly "
        "simply maybe",
    )
)
_ANSWER_WORD = re.compile(r"[ \t]*([A-Za-z][\w']*)[ \t,:]+")


def _short_answer(text: str) -> tuple[tuple[int, int], Stated] | None:
    """A short first sentence whose last word is the value: "I'd go with 3.", "Evaluates to 3." (a literal, not a
    word; no denial, no doubt before it)."""
    pos = 0
    for _ in range(6):
        word = _ANSWER_WORD.match(text, pos, min(len(text), pos + 40))
        if word is None or word.group(1).lower() in _FILLER_STOP or _DENIAL.fullmatch(word.group(1)):
            return None
        pos = word.end()
        value = read_value(text, pos)
        if value is None:
            continue
        if word.group(1).lower() not in _ANSWER_CUES:
            return None  # "see line 12", "it takes 3": a number of something else
        if not re.match(r"[ \t]*(?:[.!]|$|\n)", text[value[1] : value[1] + 4]):
            return None
        if isinstance(value[0].value, str) and value[0].text[:1] not in "'\"`":
            return None
        return (pos, value[1]), value[0]
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
