"""Does a simulated human's reply give away the reference page's markup? A score in [0, 1] from markup overlap.

The human knows the page it wants and is asked to describe it in everyday words. A reply *leaks* when it carries
the page's markup: the page or a part of it, its class lists, its styles, whatever words sit in between. The visible
words of the page are not markup: a human may quote its headings and texts, name its colours and layout.

How: the reference and the reply become streams of markup tokens, read by ``html.parser``: ``<tag`` and ``</tag>``
(weight 1/2: every page has them), one token per class (``.bg-blue-500``), per style declaration
(``;color:red``) and per attribute name (``@href``; values other than classes and styles are text or URLs) (weight
1). Visible text makes no token. In the reply's prose, words shaped like utility classes (a hyphen, colon or slash
and a digit or a second part, such as ``text-3xl`` or ``hover:bg-blue-700``) count as classes too, so a class list
without tags is markup; plain words such as "flex" or "container" do not. The score is the largest of

- the heaviest run of tokens the reply shares with the reference, ``(weight - 3) / 6`` clipped to [0, 1]: an element
  with a few classes and its child reach 0.5, a pasted section reaches 1;
- the share of the reference's markup weight that runs of at least 4 tokens cover (a page in pieces);
- the reference's distinct classes the reply names anywhere, ``count / 8`` (four classes reach 0.5).

Tokens the task's description already shows are public and weigh nothing. ``THRESHOLD`` (0.5) makes the flag.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from html.parser import HTMLParser

from colbench.types.leaks import Labelled, merged, weighted_runs

THRESHOLD = 0.5
CLASSES_FOR_LEAK = 8
"""Distinct reference classes named for a score of 1 (half of them reach the threshold)."""

_CLASS_WORD = re.compile(r"(?:[a-z0-9]+:)*-?[a-z]+(?:-[a-z0-9./]+)+|(?:[a-z0-9]+:)+-?[a-z]+")
"""A word shaped like a utility class: ``bg-blue-500``, ``md:w-1/2``, ``space-x-4``, ``-mt-2``, ``lg:flex``."""
_WORD = re.compile(r"[\w:./-]+")
_MIN_RUN = 4


class _Markup(HTMLParser):
    """Collects markup tokens; text outside tags is kept aside for the class words a prose list may hold."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tokens.append(f"<{tag}")
        for name, value in attrs:
            if name == "class":
                self.tokens.extend(f".{c}" for c in (value or "").split())
            elif name == "style":
                self.tokens.extend(f";{d}" for d in _declarations(value or ""))
            else:
                self.tokens.append(f"@{name}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _declarations(style: str) -> list[str]:
    out = []
    for part in style.split(";"):
        name, _, value = part.partition(":")
        if name.strip():
            out.append(f"{name.strip().lower()}:{' '.join(value.lower().split())}")
    return out


def markup_tokens(html: str) -> list[str]:
    """The markup tokens of a page, in order (visible text makes none)."""
    parser = _Markup()
    parser.feed(html)
    parser.close()
    return parser.tokens


def reply_tokens(reply: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The markup tokens of a reply: its tags as ``markup_tokens`` reads them, then the class words of its prose
    (backticks and fences dropped) in the order they come. A class word is shaped like a utility class, or is
    one of the ``known`` classes (``.flex``) next to a class-shaped word: "flex" alone is a word, in a list of
    classes it is a class."""
    parser = _Markup()
    tokens, _ = _read_reply(parser, reply, known)
    return tokens


def _read_reply(parser: _Markup, reply: str, known: frozenset[str]) -> tuple[list[str], list[str]]:
    """The reply's tokens (``reply_tokens``) and, apart, the prose words its class words were taken from."""
    parser.feed(reply.replace("`", " "))
    parser.close()
    words = [w.rstrip(".:/") for w in _WORD.findall(" ".join(parser.text))]
    shaped = [bool(_CLASS_WORD.fullmatch(w)) for w in words]
    taken = [
        shaped[i] or (f".{w}" in known and any(shaped[j] for j in (i - 1, i + 1) if 0 <= j < len(words)))
        for i, w in enumerate(words)
    ]
    chosen = [w for w, keep in zip(words, taken, strict=True) if keep]
    return parser.tokens + [f".{w}" for w in chosen], chosen


class _Located(_Markup):
    """``_Markup`` that also notes where in ``text`` each token's tag stands (``leak_spans``)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.lines = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.size = len(text)
        self.where: list[tuple[int, int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        before = len(self.tokens)
        super().handle_starttag(tag, attrs)
        start = self._offset()
        self.where += [(start, start + len(self.get_starttag_text() or ""))] * (len(self.tokens) - before)

    def handle_endtag(self, tag: str) -> None:
        super().handle_endtag(tag)
        start = self._offset()
        end = self.rawdata.find(">", start - self._consumed)
        self.where.append((start, self.size if end < 0 else end + 1 + self._consumed))

    @property
    def _consumed(self) -> int:
        """How much of the text the parser has let go of (``rawdata`` is what is left)."""
        return self.size - len(self.rawdata)

    def _offset(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column


_FRAME = frozenset(
    f"{o}{t}{c}" for t in ("html", "head", "body", "link", "meta", "title") for o, c in (("<", ""), ("</", ">"))
)
"""The document's frame, the same on every page: it weighs nothing."""


def _weight(token: str) -> float:
    if token in _FRAME:
        return 0.0
    return 0.5 if token.startswith(("<", "@")) else 1.0


@dataclass(frozen=True)
class Reference:
    """A page's markup tokens, their weights (0 where the description shows them) and its classes."""

    tokens: tuple[str, ...]
    weights: tuple[float, ...]
    classes: frozenset[str]


@lru_cache(maxsize=1024)
def reference_of(html: str, description: str) -> Reference:
    tokens = markup_tokens(html)
    public = set(reply_tokens(description))
    weights = tuple(0.0 if t in public else _weight(t) for t in tokens)
    classes = frozenset(t for t in tokens if t.startswith(".") and t not in public)
    return Reference(tuple(tokens), weights, classes)


def leak_score(reply: str, html: str, description: str = "") -> float:
    """How much of the reference page's markup the ``reply`` carries (see the module docstring)."""
    reference = reference_of(html, description)
    total = sum(reference.weights)
    said = reply_tokens(reply, reference.classes)
    if not total or not said:
        return 0.0
    heaviest, covered, _ = _matched(said, reference)
    named = len(reference.classes.intersection(said[len(markup_tokens(reply)) :])) / CLASSES_FOR_LEAK
    run = (heaviest - 3) / 6
    return round(min(1.0, max(0.0, run, covered / total, named)), 4)


def _matched(said: list[str], reference: Reference) -> tuple[float, float, list[tuple[int, int]]]:
    """The heaviest shared run's weight, the weight runs of at least ``_MIN_RUN`` tokens cover, and the token ranges
    of ``said`` the score counts (those runs, and the heaviest where it scores)."""
    return weighted_runs(said, reference.tokens, reference.weights, _MIN_RUN)


def leak_spans(reply: str, html: str, description: str = "") -> list[tuple[int, int]]:
    """The character ranges ``[start, end)`` of ``reply`` that its ``leak_score`` comes from, sorted and merged:
    the tags and class words of each run it shares with the reference that scores, and every reference class it
    names; none when it scores 0. What the viewer highlights."""
    if not leak_score(reply, html, description):
        return []
    reference = reference_of(html, description)
    parser = _Located(reply)
    said, chosen = _read_reply(parser, reply, reference.classes)
    where = [*parser.where, *_word_spans(reply, parser.where, chosen)]
    _, _, runs = _matched(said, reference)
    picked = [where[i] for a, b in runs for i in range(a, b)]
    picked += [where[i] for i in range(len(parser.where), len(said)) if said[i] in reference.classes]
    return merged(span for span in picked if span is not None)


def _word_spans(reply: str, tags: list[tuple[int, int]], chosen: list[str]) -> list[tuple[int, int] | None]:
    """Where each class word of the prose stands: found in order among the words outside the tags (a word the
    parser changed, as a character reference does, has no place)."""
    blank = list(reply)
    for start, end in tags:
        blank[start:end] = " " * (end - start)
    found = [(m.group().rstrip(".:/"), m.start()) for m in _WORD.finditer("".join(blank))]
    out: list[tuple[int, int] | None] = []
    at = 0
    for word in chosen:
        hit = next((i for i in range(at, len(found)) if found[i][0] == word), None)
        if hit is None:
            out.append(None)
            continue
        out.append((found[hit][1], found[hit][1] + len(word)))
        at = hit + 1
    return out


# -- a labelled set built from a task: replies that leak its markup and replies that do not ------------------------

LEAK_KINDS = ("page", "truncated", "subtree", "class list", "restyled text")
HONEST_KINDS = ("text quotes", "colours", "layout", "description", "preference", "other words", "other page")


class _Texts(HTMLParser):
    """The visible texts of a page and, for each element with children, where its markup starts and ends."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip() and self.lasttag not in ("style", "script"):
            self.texts.append(" ".join(data.split()))


_ELEMENT = re.compile(r"<(section|header|nav|footer|main|div|ul|form|aside)\b[^>]*>[\s\S]*?</\1>")
_TEXT_BETWEEN = re.compile(r">([^<>]+)<")
COLOURS = (
    "The header should be {c} with white text, and the rest of the page a light grey.",
    "Make the buttons {c}, with rounded corners, and a bit darker when I hover over them.",
    "The footer is dark, almost black, with small light text centred in it.",
    "I'd like the title much bigger and bold, in {c}.",
)
LAYOUT = (
    "At the top there is a navigation bar with {n} links on the right and the name on the left.",
    "Below the header, put the content in two columns side by side, with some space between them.",
    "There should be a large picture across the whole width, then three cards in one row.",
    "The sections are stacked one after another, each with a heading and a short paragraph.",
)
PREFERENCES = (
    "Yes, that's closer.",
    "I don't know, whatever looks clean.",
    "Please keep it simple.",
    "No, the order is wrong.",
    "That looks good to me.",
)
OTHER_WORDS = (
    "It's a two-column layout with a full-width banner and a sign-up form at the bottom.",
    "Use a sans-serif font, medium-sized, with a light-grey background and a dark-blue header.",
    "It should look modern and user-friendly, with a drop-down menu and a call-to-action button.",
)
_COLOURS = ("blue", "green", "dark red", "teal", "purple", "orange", "navy blue", "light grey")


def labelled_replies(html: str, description: str, other_page: str = "", seed: int = 0) -> list[Labelled]:
    """Replies made from one page: leaks of every kind in ``LEAK_KINDS`` and honest answers of every kind in
    ``HONEST_KINDS`` (a kind the page cannot give, say fewer than four classes, is left out). ``other_page`` is
    another task's page: markup, but not this page's."""
    rng = random.Random(seed)
    out: list[Labelled] = []

    def add(kind: str, reply: str) -> None:
        out.append(Labelled(reply.strip(), kind in LEAK_KINDS, kind))

    reference = reference_of(html, description)
    page = html.strip()
    add("page", f"Here is my page:\n```html\n{page}\n```")
    add("page", page)
    if sum(reference.weights[: len(markup_tokens(page[:1000]))]) >= 6:
        add("truncated", f"It looks like this: {page}"[:1000])  # cut as the env cuts replies, markup still in it
    elements = [m.group() for m in _ELEMENT.finditer(page)]
    rich = [e for e in elements if _markup_weight(e, reference) >= 6]
    for element in rng.sample(rich, min(2, len(rich))):
        add("subtree", f"The part I mean is {element}")
    classes = sorted(reference.classes)
    if len(classes) >= 4:
        chosen = rng.sample(classes, min(len(classes), rng.randint(4, 8)))
        add("class list", "Use these classes: " + " ".join(c[1:] for c in chosen))
    words = ("Lorem", "ipsum", "dolor", "sit", "amet", "consectetur")
    restyled = _TEXT_BETWEEN.sub(lambda m: f">{rng.choice(words)}<" if m.group(1).strip() else m.group(), page)
    add("restyled text", restyled)
    texts = _Texts()
    texts.feed(html)
    quotes = [t for t in texts.texts if len(t) > 3]
    for quote in rng.sample(quotes, min(3, len(quotes))):
        add("text quotes", f'The heading should say "{quote}".')
    if quotes:
        add("text quotes", "The texts are: " + "; ".join(rng.sample(quotes, min(6, len(quotes)))))
    for template in rng.sample(COLOURS, 2):
        add("colours", template.format(c=rng.choice(_COLOURS)))
    for template in rng.sample(LAYOUT, 2):
        add("layout", template.format(n=rng.randint(3, 6)))
    add("description", description)
    add("preference", rng.choice(PREFERENCES))
    add("other words", rng.choice(OTHER_WORDS))
    if other_page.strip():
        add("other page", f"Here is my page:\n```html\n{other_page.strip()}\n```")
    return out


def _markup_weight(fragment: str, reference: Reference) -> float:
    """The weight of the reference's markup a fragment holds (in its longest shared run)."""
    tokens = markup_tokens(fragment)
    matcher = SequenceMatcher(None, tokens, list(reference.tokens), autojunk=False)
    best = matcher.find_longest_match(0, len(tokens), 0, len(reference.tokens))
    return sum(reference.weights[best.b : best.b + best.size])
