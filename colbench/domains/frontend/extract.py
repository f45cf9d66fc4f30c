"""Find the HTML page in an agent's message (frontend answers).

Agents wrap pages in many ways: a fenced block, prose around a bare document, the original release's
``OUTPUT:`` prefix, a page cut short by a token limit. The rule, in order (docs/frontend.md):

1. The first complete document ``<html ...> ... </html>`` (with a ``<!DOCTYPE html>`` right before it kept),
   looked for first inside fenced code blocks, then in the whole text.
2. A document that was opened but never closed (a reply cut by a token limit): from ``<html`` to the end of its
   fenced block, or of the text. Browsers close what is left open, as they would for the human.
3. No ``<html>`` at all but a ``<body>`` element: from ``<body`` to ``</body>`` (or the end), as a page.
4. A fenced block tagged ``html`` whose content starts with a tag: that fragment, as a page.

Anything else (prose, questions, code in other languages) is no page: ``None``. Only the first page of a message
counts; the agent prompt asks for one page per turn.
"""

from __future__ import annotations

import re
from functools import partial

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_DOCTYPE = re.compile(r"<!doctype\s+html[^>]*>\s*$", re.IGNORECASE)
_OPEN = re.compile(r"<html(?=[\s>])", re.IGNORECASE)
_CLOSE = re.compile(r"</html\s*>", re.IGNORECASE)
_BODY_OPEN = re.compile(r"<body(?=[\s>])", re.IGNORECASE)
_BODY_CLOSE = re.compile(r"</body\s*>", re.IGNORECASE)


def extract_html(text: str) -> str | None:
    """The page an agent's message delivers, or ``None`` when it contains none (see the module docstring)."""
    if not text:
        return None
    fenced = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    for find in (partial(_document, complete=True), partial(_document, complete=False), _body):  # rules 1 to 3
        for where in [body for _, body in fenced] + [text]:
            page = find(where)
            if page is not None:
                return page
    for lang, body in fenced:
        if lang in ("html", "htm", "xhtml") and body.lstrip().startswith("<"):
            return str(body).strip()
    return None


def _document(text: str, *, complete: bool) -> str | None:
    opened = _OPEN.search(text)
    if opened is None:
        return None
    closed = _CLOSE.search(text, opened.end())
    if complete and closed is None:
        return None
    end = closed.end() if closed is not None else len(text)
    start = opened.start()
    doctype = _DOCTYPE.search(text[:start])
    if doctype is not None:
        start = doctype.start()
    return text[start:end].strip()


def _body(text: str) -> str | None:
    opened = _BODY_OPEN.search(text)
    if opened is None:
        return None
    closed = _BODY_CLOSE.search(text, opened.end())
    return text[opened.start() : closed.end() if closed is not None else len(text)].strip()
