"""Read what a rendered page lays out where (text runs, images, coloured boxes) from the browser, for ``ink``.

The reading runs in a CDP isolated world (``Page.createIsolatedWorld``): a JavaScript world of its own over the
page's DOM, with its own built-ins and prototypes, so nothing a page script did to ``getComputedStyle``,
``Range.prototype.getClientRects``, ``Element.prototype.getBoundingClientRect``, tree walkers or
``elementsFromPoint`` in the page's world reaches it (a test overrides all of them). It also runs where the page has
scripting off (static pages), and it runs after the screenshot, on the same document, while the page's own scripts
are stopped (the renderer does that), so what it reads is what was captured; animations are settled first as for
the screenshot (finite ones at their end, infinite ones cancelled), since Playwright's screenshot of a scripted page
restarts the infinite ones afterwards.

What it keeps is a candidate only: ``colbench.render.ink`` confirms every text run against the screenshot's pixels.
The reader already leaves out what the browser itself says no one can see:

- an element ``checkVisibility`` rejects (``display: none`` anywhere up the chain, ``visibility: hidden``,
  ``content-visibility: hidden``, so also a closed ``<details>``, opacity 0 on it or an ancestor);
- text whose opacity (the product of ``opacity`` and ``filter: opacity()`` up the chain, times the alpha of its fill
  colour, ``-webkit-text-fill-color``) is under 0.1, unless the fill is transparent because the text shows a
  background through ``background-clip: text`` (gradient headings; ``ink`` then measures its colour from pixels);
- text inside ``<script>``, ``<style>``, ``<template>``, ``<select>``, ``<textarea>``, ``<noscript>``, frames and
  SVG; text in shadow trees and CSS generated content (``::before``) is not read at all;
- text a person would read as other words than the DOM holds: drawn as discs (``-webkit-text-security``), in reversed
  or reordered order (``unicode-bidi: bidi-override``, also on an ancestor up to its block), or in a font the page
  brought itself (a ``data:`` or ``blob:`` web font may draw any glyph for any character); glyphs squeezed on top of
  each other (less than ``MIN_ADVANCE`` line heights of width per character);
- line boxes (``Range.getClientRects``: one per line fragment) under ``MIN_HEIGHT`` (6 px) tall or 2 px wide, or
  outside the screenshot (off-screen, negative offsets, ``text-indent: -9999px``, below the ``max_height`` cut); a
  line box partly outside is cut to the screenshot;
- line boxes the browser's own hit test does not find on top at 2 of 3 points along the line's middle
  (``elementsFromPoint``, with ``pointer-events`` forced on for the test): clipped by an ancestor's overflow, ``clip``
  or ``clip-path``, or covered by an element painted over it that paints something there (a background colour or
  image, a replaced element, text of its own, a ``::before``/``::after`` with content). An element a page keeps out of
  the hit test even so (``inert``, or ``pointer-events: none !important`` in a style attribute, which beats the forced
  rule) covers whatever lies under its box, and its own text does not count. Points below the viewport are tested with
  the page scrolled there (elements that move with scrolling, ``position: fixed``/``sticky``, then do not count as
  covering); the scroll and the forced rule are put back afterwards.

Colours are turned into sRGB by a 1x1 canvas in the same world, so every CSS colour form the browser accepts
(named, hex, ``rgb``/``hsl``/``hwb``, ``lab``/``lch``/``oklab``/``oklch``, ``color-mix``, ``currentColor``,
system colours) reads the same way; out-of-gamut colours are clipped to sRGB.

Bounds: at most ``MAX_NODES`` nodes are walked (in document order), ``MAX_TEXT_RECTS`` line boxes, ``MAX_CHARS``
characters and ``MAX_ELEMENTS`` image and box candidates are kept, and the hit tests stop after ``HIT_TEST_WORK``
divided by the nodes walked (what is left untested counts as not seen, never as seen). Every bound is a count, none
a clock, so a page reads the same on an idle and on a busy machine; the reading says which bounds cut it short
(``cuts``). The CDP call itself is bounded by the caller's timeout and by ``Runtime.evaluate``'s own (past them the
render fails: it never reads less). A page of 100,000 paragraphs is read in a few seconds on a 2-core machine; a page
of the ColBench sample in a few tens of milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from playwright.async_api import CDPSession

MIN_HEIGHT = 6
"""Line boxes lower than this (px; a font of about 5 px) hold no text a person can read."""
MIN_ADVANCE = 0.12
"""A text node's line boxes must be at least this many line heights wide per character (glyphs squeezed on top of
each other by ``letter-spacing`` or ``scaleX`` are unreadable; an ``i`` in a common sans is about 0.25)."""
MAX_NODES = 20_000
"""Nodes (elements and text) walked at most, in document order."""
MAX_TEXT_RECTS = 1_500
"""Line boxes of text kept for the hit test at most."""
MAX_ELEMENTS = 1_000
"""Image and box candidates kept for the hit test at most."""
MAX_CHARS = 200_000
"""Characters of text read at most (a text node that would pass it is left out: a screenshot shows far fewer)."""
HIT_TEST_WORK = 40_000_000
"""Hit tests allowed, times the nodes walked: a hit test costs about as much as the page has nodes (a page of
100,000 elements side by side makes each take milliseconds), so a page walked to ``MAX_NODES`` gets 2,000 of them
and a page of the ColBench sample (a few hundred nodes, a few hundred tests) never reaches the bound. Points not
tested count as not seen. A count, not a clock: what a render reads never depends on how busy the machine is (a
wall-clock bound once cut one render of a page short and not the next); time is bounded only by the caller's
timeout, which fails the render instead of reading less."""

Rect = tuple[float, float, float, float]
"""x, y, width, height in CSS px of the screenshot."""

_WORLD = "colbench-blocks"

SETTLE_ANIMATIONS_JS = """const settle = (root) => {
    for (const animation of root.getAnimations()) {
      if (!animation.effect || animation.playbackRate === 0) continue;
      try {
        if (Number.isFinite(animation.effect.getComputedTiming().endTime)) animation.finish();
        else animation.cancel();
      } catch (e) {}
    }
  };"""
"""JavaScript: ``settle(root)`` does to the animations of a document or shadow root what Playwright's screenshot
does: finite ones jump to their end, infinite ones are cancelled (the screenshot's preparation and the page reader
both run it)."""

_READ_JS = (
    r"""((WIDTH, HEIGHT, MAX_NODES, MAX_RECTS, MAX_ELEMENTS, HIT_TEST_WORK, MAX_CHARS, MIN_HEIGHT,
  MIN_ADVANCE) => {
  const view = document.defaultView;
  const body = document.body;
  const out = {texts: [], elements: [], walked: 0, cuts: []};
  const cut = (bound) => { if (!out.cuts.includes(bound)) out.cuts.push(bound); };
  if (!body || !view) return out;
  // As for the screenshot: finite animations at their end, infinite ones cancelled (Playwright's screenshot of a
  // scripted page restarts the infinite ones afterwards, at their first frame, which the frozen clock holds).
  """
    + SETTLE_ANIMATIONS_JS
    + r"""
  settle(document);
  const styles = new Map();
  const css = (el) => {
    let s = styles.get(el);
    if (s === undefined) { s = view.getComputedStyle(el); styles.set(el, s); }
    return s;
  };
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.globalCompositeOperation = "copy";
  const colours = new Map();
  const rgba = (text) => {
    let c = colours.get(text);
    if (c === undefined) {
      ctx.fillStyle = "rgba(0, 0, 0, 0)";
      ctx.fillStyle = text;
      ctx.fillRect(0, 0, 1, 1);
      const d = ctx.getImageData(0, 0, 1, 1).data;
      c = [d[0], d[1], d[2], d[3] / 255];
      colours.set(text, c);
    }
    return c;
  };
  const filterOpacity = (filter) => {
    if (!filter || filter === "none") return 1;
    let a = 1;
    for (const m of filter.matchAll(/opacity\(\s*([0-9.]+)(%?)\s*\)/g)) a *= m[2] ? Number(m[1]) / 100 : Number(m[1]);
    return Math.min(a, 1);
  };
  // Cached walks up the parent chain, iterative (a page may nest elements thousands deep).
  const chained = (cache, own, combine, root) => (el) => {
    const path = [];
    let node = el, value = root;
    while (node && node.nodeType === 1) {
      const hit = cache.get(node);
      if (hit !== undefined) { value = hit; break; }
      path.push(node);
      node = node.parentElement;
    }
    for (let i = path.length - 1; i >= 0; i--) {
      value = combine(own(path[i]), value);
      cache.set(path[i], value);
    }
    return value;
  };
  const alpha = chained(new Map(), (el) => { const s = css(el); return Number(s.opacity) * filterOpacity(s.filter); },
    (own, up) => own * up, 1);
  const moves = chained(new Map(), (el) => { const p = css(el).position; return p === "fixed" || p === "sticky"; },
    (own, up) => own || up, false);
  const visible = (el) => el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  const REPLACED = new Set(["IMG", "VIDEO", "CANVAS", "IFRAME", "EMBED", "OBJECT", "INPUT", "TEXTAREA", "SELECT",
    "BUTTON", "PROGRESS", "METER"]);
  const ownText = (el) => {
    for (let c = el.firstChild; c; c = c.nextSibling) if (c.nodeType === 3 && /\S/.test(c.data)) return true;
    return false;
  };
  // A ::before or ::after box is hit as its element: one with content may paint text or a background there.
  const generated = (el) => ["::before", "::after"].some((pseudo) => {
    const content = view.getComputedStyle(el, pseudo).content;
    return content !== "none" && content !== "normal";
  });
  const paintsCache = new Map();
  const paints = (el) => {
    let p = paintsCache.get(el);
    if (p === undefined) {
      const s = css(el);
      p = alpha(el) >= 0.05 && (rgba(s.backgroundColor)[3] > 0.05 || s.backgroundImage !== "none" ||
        REPLACED.has(el.tagName) || el instanceof SVGElement || ownText(el) || generated(el));
      paintsCache.set(el, p);
    }
    return p;
  };
  const clipText = (el, stop) => {
    let depth = 0;
    for (let node = el; node && node.nodeType === 1 && depth++ < 8; node = node.parentElement) {
      const s = css(node);
      if ((s.webkitBackgroundClip === "text" || s.backgroundClip === "text") &&
          (s.backgroundImage !== "none" || rgba(s.backgroundColor)[3] > 0.05)) return true;
      if (node === stop) break;
    }
    return false;
  };
  // The nearest ancestor-or-self that ``passes`` (or body), remembered for every element on the way.
  const nearest = (passes) => {
    const cache = new Map();
    return (el) => {
      const path = [];
      let node = el, found;
      while (true) {
        found = cache.get(node);
        if (found !== undefined) break;
        path.push(node);
        if (!node.parentElement || node === body || passes(node)) { found = node; break; }
        node = node.parentElement;
      }
      for (const seen of path) cache.set(seen, found);
      return found;
    };
  };
  const blockOf = nearest((node) => { const d = css(node).display; return d !== "inline" && d !== "contents"; });
  const boxOwner = nearest((node) => css(node).display !== "contents");
  const containers = new Map();
  const container = (el) => {
    const node = blockOf(el);
    let id = containers.get(node);
    if (id === undefined) { id = containers.size; containers.set(node, id); }
    return [node, id];
  };
  // Fonts the page brought itself (only data: and blob: URLs can load offline) may draw any glyph for any
  // character: text set in one could show other words than its DOM holds, so it is not read.
  const unquote = (name) => name.trim().replace(/^["']|["']$/g, "").toLowerCase();
  const pageFonts = new Set();
  for (const face of document.fonts) if (face.status === "loaded") pageFonts.add(unquote(face.family));
  const inPageFont = (s) => pageFonts.size > 0 && s.fontFamily.split(",").some((name) => pageFonts.has(unquote(name)));
  // Characters drawn in another order than the DOM's (bidi-override) or as discs (text-security) show other words.
  const scrambled = (el, stop) => {
    let depth = 0;
    for (let node = el; node && node.nodeType === 1 && depth++ < 64; node = node.parentElement) {
      if (css(node).unicodeBidi.includes("override")) return true;
      if (node === stop) break;
    }
    return false;
  };
  const owners = new Map();
  const owner = (el) => {
    let info = owners.get(el);
    if (info !== undefined) return info;
    info = null;
    const s = css(el);
    const target = boxOwner(el);  // a display: contents element has no box of its own to check or hit
    const readable = s.webkitTextSecurity === "none" && !inPageFont(s);
    if (visible(target) && s.visibility === "visible" && parseFloat(s.fontSize) >= 1 && readable) {
      const a = alpha(el);
      const fill = rgba(s.webkitTextFillColor);
      const [box, id] = container(el);
      let colour = null;
      if (a >= 0.1 && fill[3] * a >= 0.1) colour = [fill[0], fill[1], fill[2], fill[3] * a];
      if ((colour !== null || (a >= 0.1 && clipText(el, box))) && !scrambled(el, box)) {
        info = {id, colour, target, transform: s.textTransform};
      }
    }
    owners.set(el, info);
    return info;
  };
  const clip = (r) => {
    const x0 = Math.max(r.left, 0), y0 = Math.max(r.top, 0);
    const x1 = Math.min(r.right, WIDTH), y1 = Math.min(r.bottom, HEIGHT);
    return [x0, y0, x1 - x0, y1 - y0];
  };
  const transform = (text, how) => {
    if (how === "uppercase") return text.toUpperCase();
    if (how === "lowercase") return text.toLowerCase();
    if (how === "capitalize") return text.replace(/(^|\s)(\S)/g, (m, a, b) => a + b.toUpperCase());
    return text;
  };
  const queries = [];  // [x, y, target, wholeElement, item]
  const SKIP = new Set(["SCRIPT", "STYLE", "TEMPLATE", "SELECT", "TEXTAREA", "NOSCRIPT", "IFRAME", "FRAME",
    "OBJECT", "EMBED", "DATALIST", "HEAD", "TITLE"]);
  const range = document.createRange();
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.nodeType === 1 && (SKIP.has(n.tagName) || (n instanceof SVGElement && n.ownerSVGElement))
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const IMAGES = new Set(["IMG", "VIDEO", "CANVAS"]);
  // Words on either side of what is not read (whitespace, a line break, hidden text) stay apart.
  let rects = 0, chars = 0, space = false;
  const elements = [];
  for (let node = walker.currentNode; node; node = walker.nextNode()) {
    if (out.walked >= MAX_NODES) { cut("nodes walked"); break; }
    out.walked++;
    if (node.nodeType === 3) {
      const parent = node.parentElement;
      if (!parent || parent instanceof SVGElement || !/\S/.test(node.data)) { space = true; continue; }
      if (rects >= MAX_RECTS) { cut("line boxes"); continue; }
      const info = owner(parent);
      if (info === null) { space = true; continue; }
      if (chars + node.data.length > MAX_CHARS) { cut("characters"); continue; }
      chars += node.data.length;
      range.selectNodeContents(node);
      const item = [info.id, (space ? " " : "") + transform(node.data, info.transform), info.colour, []];
      space = false;
      const lines = Array.from(range.getClientRects()).filter((r) => r.height >= MIN_HEIGHT && r.width >= 2);
      // Glyphs squeezed together (letter-spacing, scaleX) are unreadable: each character needs some width.
      const letters = node.data.replace(/\s/g, "").length;
      const width = lines.reduce((sum, r) => sum + r.width, 0);
      const tall = lines.reduce((most, r) => Math.max(most, r.height), 0);
      if (width < letters * tall * MIN_ADVANCE) { space = true; continue; }
      for (const r of lines) {
        const c = clip(r);
        if (c[2] < 2 || c[3] < MIN_HEIGHT) continue;
        if (rects >= MAX_RECTS) { cut("line boxes"); break; }
        rects++;
        const rect = [c[0], c[1], c[2], c[3], 0];
        item[3].push(rect);
        for (const f of [0.25, 0.5, 0.75]) queries.push([c[0] + c[2] * f, c[1] + c[3] / 2, info.target, false, rect]);
      }
      if (item[3].length) out.texts.push(item);
      else space = true;
      continue;
    }
    const el = node;
    elements.push(el);
    if (el.tagName === "BR") space = true;
    const s = css(el);
    const image = IMAGES.has(el.tagName) || el.tagName === "svg" ||
      (el.tagName === "INPUT" && el.type === "image") || s.backgroundImage !== "none";
    if (!image && !(rgba(s.backgroundColor)[3] > 0.05)) continue;
    const c = clip(el.getBoundingClientRect());
    if (c[2] < 4 || c[3] < 4 || alpha(el) < 0.1 || !visible(el)) continue;
    if (out.elements.length >= MAX_ELEMENTS) { cut("images and boxes"); continue; }
    const item = [image ? "image" : "box", c[0], c[1], c[2], c[3], 0];
    out.elements.push(item);
    queries.push([c[0] + c[2] / 2, c[1] + c[3] / 2, el, true, item]);
  }
  // The hit test: is the text's element (or the element, or one of its descendants) on top at each point?
  const force = document.createElement("style");
  force.textContent = "*, *::before, *::after { pointer-events: auto !important; }";
  (document.head || document.documentElement).appendChild(force);
  // What a page keeps out of the hit test even so (pointer-events: none !important in a style attribute, inert)
  // cannot be seen through by it: such an element covers what lies under its box, and its own text does not count.
  const anyInert = document.querySelector("[inert]") !== null;
  const untested = (el) => css(el).pointerEvents === "none" || (anyInert && el.closest("[inert]") !== null);
  const unhittable = [];
  for (const el of elements) {
    if (!untested(el) || !paints(el) || !visible(el)) continue;
    const r = el.getBoundingClientRect();
    unhittable.push([el, r.left, r.top, r.right, r.bottom]);
  }
  const hidden = (x, y, target) => untested(target) || unhittable.some(
    ([el, left, top, right, bottom]) => x >= left && x < right && y >= top && y < bottom && !el.contains(target));
  const height = view.innerHeight;
  let scroll = 0;
  queries.sort((a, b) => a[1] - b[1]);
  let tests = Math.floor(HIT_TEST_WORK / Math.max(1, out.walked));
  for (const [x, y, target, whole, item] of queries) {
    if (tests-- <= 0) { cut("hit tests"); break; }
    if (y - scroll >= height) {
      view.scrollTo({top: y, left: 0, behavior: "instant"});
      scroll = view.scrollY;
    }
    if (y < scroll || y - scroll >= height || (unhittable.length && hidden(x, y, target))) continue;
    for (const el of document.elementsFromPoint(x, y - scroll)) {
      if (el === target || (whole && target.contains(el))) { item[item.length - 1]++; break; }
      if (scroll > 0 && moves(el)) continue;
      if (paints(el)) break;
    }
  }
  view.scrollTo({top: 0, left: 0, behavior: "instant"});
  force.remove();
  return out;
})"""
)


class ReadError(Exception):
    """The reading failed inside the browser (the render then ends ``error``, like a crashed page)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class TextRun:
    """One text node's visible line boxes (those the hit test found on top), and what the browser says it is."""

    container: int
    """The id of its nearest ancestor that is not ``display: inline`` (runs sharing one, in a row, form a block)."""
    text: str
    """Its characters as laid out (``text-transform`` applied; whitespace as in the DOM, and a space in front when
    something not read, such as whitespace between two links or a ``<br>``, came before it)."""
    colour: tuple[int, int, int, float] | None
    """Its fill colour in sRGB with the alpha of the whole chain; None when it shows a background (clip: text)."""
    rects: tuple[Rect, ...]


@dataclass(frozen=True)
class ElementBox:
    """An image or a box painting its own background colour, found on top at its centre."""

    kind: Literal["image", "box"]
    rect: Rect


@dataclass(frozen=True)
class PageReading:
    """What the browser lays out, in document order, and which bounds cut the reading short."""

    texts: tuple[TextRun, ...]
    elements: tuple[ElementBox, ...]
    walked: int
    cuts: tuple[str, ...]
    """The bounds that stopped part of the reading: ``nodes walked``, ``line boxes``, ``characters``, ``images and
    boxes``, ``hit tests``."""


async def read_page(cdp: CDPSession, width: int, height: int, timeout_s: float) -> PageReading:
    """Read the page ``cdp`` is attached to, for a screenshot of ``width`` x ``height`` from its top left corner."""
    tree = await cdp.send("Page.getFrameTree")
    world = await cdp.send(
        "Page.createIsolatedWorld", {"frameId": tree["frameTree"]["frame"]["id"], "worldName": _WORLD}
    )
    bounds = f"{MAX_NODES}, {MAX_TEXT_RECTS}, {MAX_ELEMENTS}, {HIT_TEST_WORK}, {MAX_CHARS}, {MIN_HEIGHT}, {MIN_ADVANCE}"
    call = f"{_READ_JS}({width}, {height}, {bounds})"
    answer = await cdp.send(
        "Runtime.evaluate",
        {
            "expression": call,
            "contextId": world["executionContextId"],
            "returnByValue": True,
            "timeout": int(timeout_s * 1000),
        },
    )
    if "exceptionDetails" in answer:
        details = answer["exceptionDetails"]
        message = details.get("exception", {}).get("description") or details.get("text") or "an exception"
        raise ReadError(f"reading the page's blocks failed: {str(message).splitlines()[0]}")
    return _parse(answer.get("result", {}).get("value"))


def _well_formed(text: str) -> str:
    """``text`` with lone surrogates (a script can put them in a text node) replaced, so it encodes as UTF-8."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _parse(value: Any) -> PageReading:
    """The reading as typed records; a line box counts where the hit test found the text on top at 2 of 3 points."""
    if not isinstance(value, dict):
        return PageReading((), (), 0, ())
    texts = []
    for container, text, colour, rects in value.get("texts", ()):
        seen = tuple((x, y, w, h) for x, y, w, h, hits in rects if hits >= 2)
        if seen:
            rgba = (int(colour[0]), int(colour[1]), int(colour[2]), float(colour[3])) if colour else None
            texts.append(TextRun(int(container), _well_formed(str(text)), rgba, seen))
    elements = tuple(
        ElementBox(kind, (x, y, w, h)) for kind, x, y, w, h, hits in value.get("elements", ()) if hits >= 1
    )
    cuts = tuple(str(bound) for bound in value.get("cuts", ()))
    return PageReading(tuple(texts), elements, int(value.get("walked", 0)), cuts)
