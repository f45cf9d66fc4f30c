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
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

MAX_SCAN = 20_000
"""Characters of a reply (or question) searched for claims: a longer reply is searched in its first part only."""
MAX_CLAIMS = 16
"""Claims read from one reply at most."""
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
    r"(?:(?:exactly|just|simply|precisely|only|back|out|something\s+like|like|"
    r"(?P<approx>about|around|approximately|approx\.?|roughly|nearly|almost|close\s+to|~|≈)|"
    r"(?:the|a|an)\s+(?:value|number|integer|int|float|string|str|list|array|tuple|dict|dictionary|set|boolean|bool|"
    r"result|output|answer|sum|total|count|amount)(?:\s+of)?|value(?:\s+of)?|(?:the\s+)?number|you)\s*[:]?\s*)*",
    re.IGNORECASE,
)
# words a stated number may be followed by in a sentence; any other word makes it a quantity ("3 items"): unread
_FOLLOW = frozenset(
    re.findall(
        r"\S+",
        "and or but because since for in when if which as so then here there that too though right yes no not "
        "i i'm it it's this that's is was will would should with on at to from by exactly precisely instead "
        "dollars dollar usd cents euros euro eur pounds gbp",
    )
)
_HEDGE_AFTER = re.compile(
    r"\s*(?:or\s+(?:so|thereabouts|close|around|nearby|something\s+like\s+that)\b|-?ish\b|…|\.\.\.|maybe|perhaps|"
    r"probably|i\s+think|i\s+guess|i\s+believe|not\s+sure|if\s+i\s+recall|roughly|approximately|give\s+or\s+take)",
    re.IGNORECASE,
)
# what makes a stated number one of several, a range or a formula: no value is stated
_AMBIGUOUS_AFTER = re.compile(
    r"\s*(?:or\b|,\s*[-+−]?\$?\d|/\s*\d|\+|\*|×|\^|±|-\s*\d|–\s*\d|to\s+[-+]?\$?\d|and\s+up\b|or\s+more\b|"
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
    """``text`` as a Python literal (sets made frozensets, as the sandbox's values decode), else ``NO_VALUE``."""
    if not text.strip() or len(text) > MAX_CALL or not _depth_ok(text):
        return NO_VALUE
    try:
        return _frozen(ast.literal_eval(text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
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
    if pos >= len(text):
        return None
    ch = text[pos]
    if ch == "`":  # a code span: the value is all of it
        end = text.find("`", pos + 1)
        if end < 0 or end - pos > MAX_CALL:
            return None
        inner = text[pos + 1 : end].strip()
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
    if ch in "'\"":
        end = _string_end(text, pos)
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
    word = re.match(r"[A-Za-z]+", text[pos:])
    if word and word.group(0).lower() in _WORD_VALUES:
        after = text[pos + word.end() : pos + word.end() + 1]
        if after in ("", " ", ".", ",", ";", "!", "?", ")", "\n", "`", '"', "'"):
            return Stated(_WORD_VALUES[word.group(0).lower()], word.group(0), approx=approx), pos + word.end()
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
    follow = re.match(r"\s*([A-Za-z][\w']*)", text[end:])
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
_CONNECT = re.compile(
    r"[`\"'”’]?\s*,?\s*(?:"
    r"(?P<sym>==|=>|->|→|⇒|=|:)"
    r"|(?:(?:it|this|that|which|then)\s+)?"
    r"(?:(?:should|would|will|must|shall|could|can|might|may|ought\s+to|is\s+going\s+to|is\s+supposed\s+to|"
    r"is\s+expected\s+to|has\s+to|needs\s+to|has\s+got\s+to)\s+(?P<neg1>not\s+|never\s+)?(?:also\s+|just\s+|only\s+|"
    r"simply\s+|still\s+|really\s+|actually\s+|definitely\s+)?)?"
    r"(?P<neg2>(?:does\s*n[o']t|do\s*n[o']t|is\s*n[o']t|should\s*n[o']t|would\s*n[o']t|wo\s*n[o']t|won't|can\s*n[o']t|"
    r"must\s*n[o']t|never|shouldn't|wouldn't|doesn't|isn't|won’t|doesn’t|shouldn’t|isn’t)\s+)?"
    r"(?:also\s+|just\s+|only\s+|simply\s+|actually\s+|always\s+|correctly\s+)?"
    r"(?:returns?|returned|returning|gives?|giving|gave|yields?|yielding|outputs?|outputting|produces?|producing|"
    r"prints?|evaluates?\s+to|equals?|is\s+equal\s+to|be\s+equal\s+to|results?\s+in|comes?\s+(?:out|back)\s+(?:as|to|with)|"
    r"comes?\s+out|spits?\s+out|be|is|are|was|becomes?|'s)"
    r"(?:\s+(?:you|me|us|back|out|exactly|just))?"
    r"|\s+(?:to|should)\s+(?:be|return|give|yield|equal|output|produce|evaluate\s+to|come\s+out\s+as)"
    r")(?(sym)|(?![\w]))\s*",
    re.IGNORECASE,
)
_CALLING = re.compile(r"(?:call(?:ing|ed)?|run(?:ning)?|invok(?:e|ing))\s*$", re.IGNORECASE)


def _after_call(text: str, end: int) -> tuple[Stated, int] | None:
    """The value stated right after a call that ends at ``end``."""
    window = text[end : end + _TAIL]
    connect = _CONNECT.match(window)
    if connect is None:
        return None
    pos = end + connect.end()
    negated = bool(connect.group("neg1") or connect.group("neg2"))
    read = read_value(text, pos)
    if read is None:
        return None
    stated, stop = read
    if negated:
        return None  # "should not return 5": says what it is not, the value it gives is in another sentence
    if connect.group("sym") == ":" and "\n" in text[end:pos]:
        return None  # a heading followed by a block, not f(x): y
    return stated, stop


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
    for call in calls_in(text, names):
        if len(found) >= MAX_CLAIMS:
            break
        read = _after_call(text, call.end)
        if read is None:
            continue
        stated, stop = read
        found.append(Found((call.start, stop), normal_call(call.text), call.literal, stated))
        taken.append((call.start, stop))
    if single_arg == 1 and names and len(found) < MAX_CLAIMS:
        for item in _prose_claims(text, names[0], taken):
            if len(found) >= MAX_CLAIMS:
                break
            found.append(item)
            taken.append(item.span)
    if question and not found:
        answer = _answer_to(text, question[:MAX_SCAN].translate(_QUOTES), names)
        if answer is not None:
            found.append(answer)
    found.sort(key=lambda f: f.span)
    return found


# -- prose: "for [1, 2] it returns 3" ---------------------------------------------------------------------------
_PROSE_ARG = re.compile(
    r"(?:(?<![\w])(?:for|with|given|on|if\s+(?:you\s+)?(?:pass|give|input|call\s+it\s+with|feed)|passing|input(?:ting)?|"
    r"when\s+(?:you\s+)?(?:pass|give|input|feed)|when\s+(?:the\s+)?input\s+is|if\s+the\s+input\s+is|an?\s+input\s+of)"
    r"\s+(?:it\s+|in\s+|the\s+input\s+|an?\s+input\s+of\s+|an?\s+input\s+|input\s+)?)",
    re.IGNORECASE,
)
_PROSE_THEN = re.compile(
    r"\s*,?\s*(?:then\s+)?(?:(?:it|the\s+function|that|this|you|we|i|the\s+result|the\s+output|the\s+answer)\s+)?"
    r"(?:'d|'ll|should|would|will|must|ought\s+to|is\s+supposed\s+to|needs\s+to)?\s*"
    r"(?:(?:also\s+|just\s+|simply\s+)?(?:returns?|gives?|yields?|outputs?|produces?|be|is|get|expect(?:\s+to\s+get)?|"
    r"see|equals?))(?![\w])\s*",
    re.IGNORECASE,
)
_EMPTY_SUBJECT = re.compile(
    r"(?<![\w])(?:an?\s+|the\s+)?empty\s+(list|array|string|str|dict|dictionary|set|tuple)(?:\s+input)?\s+"
    r"(?:should\s+|would\s+|will\s+)?(?:returns?|gives?|yields?|produces?|outputs?|results?\s+in)(?![\w])\s*",
    re.IGNORECASE,
)


def _prose_claims(text: str, name: str, taken: list[tuple[int, int]]) -> Iterator[Found]:
    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in taken)

    for match in _PROSE_ARG.finditer(text, 0, MAX_SCAN):
        arg = read_value(text, match.end())
        if arg is None or arg[0].approx or arg[0].percent:
            continue
        then = _PROSE_THEN.match(text, arg[1])
        if then is None or then.end() == arg[1]:
            continue
        stated = read_value(text, then.end())
        if stated is None:
            continue
        span = (match.start(), stated[1])
        if not free(span) or _negated(text[arg[1] : then.end()]):
            continue
        yield Found(span, f"{name}({_short_repr(arg[0].value, MAX_CALL)})", True, stated[0])
    for match in _EMPTY_SUBJECT.finditer(text, 0, MAX_SCAN):
        stated = read_value(text, match.end())
        if stated is None:
            continue
        span = (match.start(), stated[1])
        if free(span):
            value = _EMPTY_VALUES[match.group(1).lower()]
            yield Found(span, f"{name}({value!r})", True, stated[0])


def _negated(text: str) -> bool:
    return bool(re.search(r"\b(?:not|never|n't)\b|n't\b|n’t\b", text, re.IGNORECASE))


# -- an answer to a question about one call ---------------------------------------------------------------------
_YES = re.compile(
    r"\s*(?:yes|yeah|yep|yup|correct|exactly|right|that's\s+right|that\s+is\s+right|that's\s+correct|indeed|"
    r"absolutely|sure|definitely)\b",
    re.IGNORECASE,
)
_NO = re.compile(r"\s*(?:no|nope|not\s+quite|incorrect|wrong|that's\s+wrong|that's\s+not\s+right)\b", re.IGNORECASE)
_ANSWER_LEAD = re.compile(
    r"\s*(?:(?:yes|yeah|yep|no|nope|well|so|hmm+|ok(?:ay)?|sure|right|actually|good\s+question|great\s+question)"
    r"[,.!:]?\s+)*"
    r"(?:(?:i\s+think|i\s+believe|i'd\s+say|i\s+would\s+say|i\s+guess|i'm\s+pretty\s+sure|probably|definitely)\s*,?\s*)?"
    r"(?:(?:it|that|this|the\s+(?:result|output|answer|return\s+value|value|function))\s*(?:'s|’s|\s+is|\s+should\s+be|"
    r"\s+would\s+be|\s+will\s+be|\s+must\s+be|\s+needs\s+to\s+be|\s+should\s+(?:return|give|yield|output)|"
    r"\s+would\s+(?:return|give|yield|output)|\s+will\s+(?:return|give|yield|output)|\s+returns|\s+gives|\s+yields|"
    r"\s+outputs|\s+ought\s+to\s+be|\s+comes\s+out\s+(?:as|to))|you(?:'d|\s+would|\s+should|'ll|\s+will)?\s+"
    r"(?:get|see|receive)|i(?:'d|\s+would)?\s+expect(?:\s+to\s+(?:get|see))?|(?:should|would)\s+be|returns?|gives?|"
    r"the\s+(?:result|output|answer|value)\s+(?:is|should\s+be|would\s+be))?\s*[:]?\s*",
    re.IGNORECASE,
)


def _answer_to(text: str, question: str, names: Sequence[str]) -> Found | None:
    """The value ``text`` gives in answer to a question about one literal call (or a yes or no to a question that
    states the call's value)."""
    asked = list(dict.fromkeys(normal_call(c.text) for c in calls_in(question, names) if c.literal))
    if len(asked) != 1:
        return None
    call = asked[0]
    proposed: Stated | None = None
    for c in calls_in(question, names):
        read = _after_call(question, c.end)
        if c.literal and read is not None:
            proposed = read[0]
            break
    head = _ANSWER_LEAD.match(text)
    pos = head.end() if head else 0
    read = read_value(text, pos)
    if read is not None and not _negated(text[:pos]):
        stated, stop = read
        if _answer_like(text, pos, stop):
            return Found((pos, stop), call, True, stated)
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
    "3 of them are...", which ``read_value`` already refuses, nor "2 things: ...")."""
    rest = text[stop : stop + 3]
    return start <= 120 and (not rest or rest[0] in " .,;!?)\n`'\"")


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
