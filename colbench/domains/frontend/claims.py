"""The frontend claims checker: text the human quotes as shown on the page it wants, checked against the reference
page's visible text.

A claim is a quoted run of words ("...", “...”, '...') of 2 to 200 characters. The reference's visible text is
the text of its ``<body>`` as the v1 metrics' blocks hold it: the words of every element a browser would show (not
``script``, ``style``, ``template``, ``noscript``, nor an element hidden by Tailwind's ``hidden`` class, a
``hidden`` attribute or an inline ``display: none``), read from the markup without rendering, compared case- and
blank-insensitively. Verdicts:

- ``true``: the reference shows the quoted text;
- ``false``: it does not, and the sentence says what the wanted page shows;
- ``unchecked``: the sentence is about the agent's page ("your page says ...", "instead of ...", "remove ...") or
  negates.

A quote that is markup rather than words (a class name or a list of them, a colour code, a tag) or that the
sentence names as markup ('the class "hero big"', 'an id of "main"', 'the image "logo.png"') is no claim.
Everything else the human says (colours, layout) is not a claim here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from colbench.types.claims import Claim, Grounded

if TYPE_CHECKING:
    from colbench.types.task import Task

CHECKER = "page-text-claims/2"
MAX_SCAN = 20_000
MAX_CLAIMS = 16
_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|(?<![\w])'([^'\n]{2,200})'(?![\w])")
_AGENTS_PAGE = re.compile(
    r"\b(?:your|you\s+(?:have|wrote|used|put|show|display)|currently|right\s+now|instead\s+of|rather\s+than|"
    r"replace|remove|delete|drop|get\s+rid|change|rename|swap|not|n't|no\s+longer|don't|shouldn't|isn't|wrong|"
    r"typo|misspel\w*)\b",
    re.IGNORECASE,
)
_MARKUP = re.compile(
    r"^(?:[#.]?[a-z]+(?:-[a-z0-9/.]+)+|#[0-9a-f]{3,8}|</?\w+[^>]*>|[\w-]+:[\w-]+|\S+\.(?:png|jpg|css|js))$"
)
_NAMES_MARKUP = re.compile(
    r"\b(?:class|classes|classname|class\s+names?|tailwind|css|selector|id|ids|attribute|attr|tag|font|font-family|"
    r"colou?r\s+code|hex|href|src|url|file|filename|image|img|icon|variable|var)\s*(?:of|to|named|called|is|=|:)?\s*$",
    re.IGNORECASE,
)
_SKIP = frozenset({"script", "style", "template", "noscript", "head", "title", "svg"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


@dataclass(frozen=True)
class Quote:
    span: tuple[int, int]
    text: str
    about_agent: bool


class _VisibleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # per open element: hidden
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            alt = dict(attrs).get("alt")
            if tag == "img" and alt and not any(self.stack):
                self.parts.append(alt)
            return
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        style = (values.get("style") or "").replace(" ", "").lower()
        hidden = tag in _SKIP or "hidden" in classes or "hidden" in values or "display:none" in style
        self.stack.append(hidden)

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not any(self.stack):
            self.parts.append(data)


@lru_cache(maxsize=2048)
def visible_text(html: str) -> str:
    """The reference page's visible words, lower-cased, blanks collapsed (module docstring)."""
    parser = _VisibleText()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError):  # a page the parser gives up on: what was read so far
        pass
    return _normal(" ".join(parser.parts))


def _normal(text: str) -> str:
    return " ".join(text.replace("’", "'").replace("‘", "'").lower().split())


def find_quotes(reply: str) -> list[Quote]:
    text = reply[:MAX_SCAN]
    found: list[Quote] = []
    for match in _QUOTED.finditer(text):
        if len(found) >= MAX_CLAIMS:
            break
        quoted = next(g for g in match.groups() if g is not None).strip()
        if not quoted or all(_MARKUP.match(token) for token in quoted.split()):
            continue  # a class name or a list of them ("text-3xl font-bold"), a colour, a tag
        start = max(text.rfind(".", 0, match.start()), text.rfind("\n", 0, match.start()), -1) + 1
        sentence = text[start : match.start()]
        if _NAMES_MARKUP.search(sentence):
            continue  # 'the class "hero big"', 'an id of "main"': what the markup is called, not what it shows
        found.append(Quote(match.span(), quoted, bool(_AGENTS_PAGE.search(sentence))))
    return found


class FrontendClaimChecker:
    """Quoted visible text, checked against the reference page's (module docstring). Runs nothing: the reference's
    markup is read on the host."""

    name = CHECKER

    def find(self, task: Task, reply: str, question: str | None = None) -> list[Quote]:
        return find_quotes(reply)

    def settle(self, task: Task, found: Sequence[Sequence[object]]) -> list[tuple[Claim, ...]]:
        shown = visible_text(task.ground_truth)
        return [tuple(_settled(q, shown) for q in group if isinstance(q, Quote)) for group in found]

    def ground(self, task: Task, agent_text: str) -> tuple[Grounded, ...]:
        return ()


def _settled(quote: Quote, shown: str) -> Claim:
    stated = quote.text
    if quote.about_agent:
        return Claim(quote.span, "page", stated, None, "unchecked", "about the agent's page, or negated")
    if _normal(stated).strip(" .,:;!?") in shown:
        return Claim(quote.span, "page", stated, "shown", "true", "the reference page shows this text")
    return Claim(quote.span, "page", stated, "not shown", "false", "the reference page shows no such text")
