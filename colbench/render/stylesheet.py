"""Trim the Tailwind stylesheet to the rules a static page can use, so Chromium parses kilobytes instead of 2.9 MB.

Parsing and indexing the full Tailwind 2.2.19 build (about 39 000 rules) dominated the render of a typical ColBench
page. A page that cannot run script (see ``renderer.is_static``) has exactly the class names written in its HTML, so
a rule whose selectors all need a class the page never mentions can match nothing and is dropped:

- A rule is kept when at least one of its selectors needs only classes that occur in the page, or needs none
  (``*``, ``html``, ``[hidden]`` ...); it is kept verbatim, with every selector of its list. Classes inside
  ``:not()`` and other functional pseudo-classes, or inside attribute selectors, count as not needed, so they only
  ever keep more.
- The page's candidate class names are every maximal run of the characters Tailwind class names are made of, taken
  from the lower-cased HTML and from it again with character references decoded, and compared lower-cased (a page
  without a doctype is in quirks mode, where class selectors ignore ASCII case). Extra candidates only keep more.
- Order is preserved and ``@media`` blocks are re-opened around the rules they held; ``@keyframes`` and any other
  at-rule are kept whole.

The index checks itself when built: trimming for every class it knows must give back the stylesheet byte for byte,
otherwise (a stylesheet this parser does not understand) it refuses to trim and the full sheet is served.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_TOKEN_RE = re.compile(r"/\*.*?\*/|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[{}]", re.S)
_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
_CLASS_RE = re.compile(r"\.((?:[A-Za-z0-9_\-]|[^\x00-\x7f]|\\[0-9A-Fa-f]{1,6}[ \t\n\r\f]?|\\[^0-9A-Fa-f\r\n\f])+)")
_ESCAPE_RE = re.compile(r"\\(?:([0-9A-Fa-f]{1,6})[ \t\n\r\f]?|(.))", re.S)
_CONTAINERS = ("@media", "@supports", "@layer", "@container")


def _unescape_ident(ident: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        return match.group(2)

    return _ESCAPE_RE.sub(one, ident)


def _top_level(text: str) -> Iterator[tuple[int, int]]:
    """The spans of ``text`` outside strings and ``(...)`` / ``[...]``: one character each, or an escape
    (a backslash and the character it escapes). Brackets and quotes themselves are in no span."""
    depth = 0
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == "\\":
            if depth == 0:
                yield i, i + 2
            i += 1
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            yield i, i + 1
        i += 1


def _strip_nested(selector: str) -> str:
    """The selector without strings, ``(...)`` and ``[...]`` contents: the classes left are the ones it needs."""
    return "".join(selector[start:end] for start, end in _top_level(selector))


def _split_selectors(prelude: str) -> list[str]:
    """A selector list split at its top-level commas."""
    parts: list[str] = []
    start = 0
    for i, end in _top_level(prelude):
        if prelude[i:end] == ",":
            parts.append(prelude[start:i])
            start = end
    parts.append(prelude[start:])
    return parts


def required_classes(selector: str) -> frozenset[str]:
    """The (lower-cased) class names an element must carry for ``selector`` to match anything."""
    bare = _strip_nested(_COMMENT_RE.sub(" ", selector))
    return frozenset(_unescape_ident(m.group(1)).lower() for m in _CLASS_RE.finditer(bare))


@dataclass
class _Leaf:
    text: str
    path: tuple[int, ...]  # the enclosing container blocks, outermost first
    needs: list[frozenset[str]] = field(default_factory=list)  # one per selector; empty list: always kept


class ParseError(ValueError):
    """The stylesheet is not one this trimmer understands (it then serves the sheet whole)."""


class StylesheetIndex:
    """One stylesheet, split into rules indexed by the classes their selectors need; ``trim`` rebuilds a subset."""

    def __init__(self, css: bytes) -> None:
        self.css = css
        self._preludes: list[str] = []  # container block id -> its prelude ("@media (min-width:640px)")
        self._leaves: list[_Leaf] = []
        self._always: list[int] = []
        self._by_class: dict[str, list[tuple[int, frozenset[str]]]] = {}
        self.usable = False
        try:
            self._parse(css.decode("utf-8"))
        except (ParseError, UnicodeDecodeError):
            return
        for i, leaf in enumerate(self._leaves):
            if not leaf.needs or any(not need for need in leaf.needs):
                self._always.append(i)
                continue
            for need in leaf.needs:
                for name in need:
                    self._by_class.setdefault(name, []).append((i, need))
        alphabet = {ch for name in self._by_class for ch in name}
        self._candidate_re = (
            re.compile("[" + "".join(re.escape(ch) for ch in sorted(alphabet)) + "]+") if alphabet else None
        )
        # Self-check: keeping every class must reproduce the stylesheet exactly.
        self.usable = self._emit(range(len(self._leaves))) == css

    @property
    def classes(self) -> frozenset[str]:
        """Every class name some rule needs."""
        return frozenset(self._by_class)

    def _parse(self, text: str) -> None:
        stack: list[tuple[int | None, int, int]] = []  # (container id, or None for a rule; its start; its "{")
        path: list[int] = []
        start = 0  # where the current prelude (or leaf) starts
        opaque_depth = 0
        opaque_start = 0
        for match in _TOKEN_RE.finditer(text):
            token = match.group()
            if token not in "{}":
                continue  # comments and strings stay part of the surrounding text
            if token == "{":
                if opaque_depth:
                    opaque_depth += 1
                    continue
                prelude = _COMMENT_RE.sub("", text[start : match.start()]).strip()
                if prelude.startswith("@") and prelude.lower().startswith(_CONTAINERS):
                    self._preludes.append(text[start : match.start()])
                    path.append(len(self._preludes) - 1)
                    stack.append((path[-1], start, match.start()))
                    start = match.end()
                elif prelude.startswith("@"):
                    opaque_depth, opaque_start = 1, start  # @keyframes, @font-face ...: kept whole
                else:
                    stack.append((None, start, match.start()))
                continue
            # "}"
            if opaque_depth:
                opaque_depth -= 1
                if opaque_depth == 0:
                    self._leaves.append(_Leaf(text[opaque_start : match.end()], tuple(path)))
                    start = match.end()
                continue
            if not stack:
                raise ParseError("unbalanced '}'")
            container, opened, brace = stack.pop()
            if container is None:
                selector = text[opened:brace]
                bare = _COMMENT_RE.sub("", selector)
                # A statement at-rule (@import ...;) glued in front keeps the rule whatever its selector.
                needs = [] if "@" in bare or ";" in bare else [required_classes(p) for p in _split_selectors(bare)]
                self._leaves.append(_Leaf(text[opened : match.end()], tuple(path), needs))
            else:
                tail = text[start : match.start()]
                if _COMMENT_RE.sub("", tail).strip():
                    raise ParseError("text before a container's '}'")
                if tail:
                    self._leaves.append(_Leaf(tail, tuple(path)))
                path.pop()
                if not self._leaves or container not in self._leaves[-1].path:
                    self._leaves.append(_Leaf("", (*path, container)))  # an empty block, kept as written
            start = match.end()
        if stack or opaque_depth:
            raise ParseError("unbalanced '{'")
        if _COMMENT_RE.sub("", text[start:]).strip():
            raise ParseError("text after the last rule")
        if text[start:]:
            self._leaves.append(_Leaf(text[start:], ()))  # trailing comments or whitespace

    def _emit(self, keep: range | list[int]) -> bytes:
        out: list[str] = []
        opened: list[int] = []
        for i in keep:
            leaf = self._leaves[i]
            common = 0
            while common < len(opened) and common < len(leaf.path) and opened[common] == leaf.path[common]:
                common += 1
            out.append("}" * (len(opened) - common))
            del opened[common:]
            for block in leaf.path[common:]:
                out.append(self._preludes[block] + "{")
                opened.append(block)
            out.append(leaf.text)
        out.append("}" * len(opened))
        return "".join(out).encode("utf-8")

    def candidates(self, page: str) -> set[str]:
        """The class names ``page`` might use: every run of class-name characters, raw and with references decoded."""
        if self._candidate_re is None:
            return set()
        lowered = page.lower()
        found = set(self._candidate_re.findall(lowered))
        if "&" in lowered:
            found.update(self._candidate_re.findall(html.unescape(lowered).lower()))
        return found

    def trim(self, page: str) -> bytes:
        """The stylesheet with only the rules that can match an element of ``page`` (the whole sheet if unusable)."""
        if not self.usable:
            return self.css
        present = self.candidates(page)
        keep = set(self._always)
        for name in present & self._by_class.keys():
            for leaf, need in self._by_class[name]:
                if leaf not in keep and need <= present:
                    keep.add(leaf)
        return self._emit(sorted(keep))
