"""An episode as a page shows it, the HTML report's and the viewer's alike: its dialogue (each text cut at its leak
spans and at the spans of the human's claims, the claims in words, the human's other draws, what a grounded human
was privately told) and its backend tests.

Everything here is plain data for templates that escape it: nothing of a record is ever marked safe. What an older
run's record lacks (leak spans, claim checks, per-turn screenshots) becomes a note, not an error. Spans are
untrusted too: a leak span outside the text is ignored; a claim's span is clipped to the text, and one that is
empty or overlaps a claim already placed (false claims are placed first) is left unmarked in the text, though the
claim is still listed under the reply.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.report.truth import claim_note
from colbench.runs import DialogueTurn, safe_relative
from colbench.runs.turns import Draw
from colbench.types.claims import Claim

MAX_TEXT = 200_000  # characters of one text shown; a longer one is cut (and said so): a 5 MB answer stays usable
MAX_NOTE = 2_000  # characters of a claim's call, stated or actual value shown
MAX_MARKS = 1_000  # spans of one text considered (a hostile record may hold millions)
TRUTH_ACTIONS = ("shown", "resampled", "withheld")  # withheld: the leak policy withheld every draw
_ORDER = {"false": 0, "true": 1, "unchecked": 2}  # which claim keeps a stretch of text two claims both mark


@dataclass(frozen=True)
class ClaimMark:
    """A claim as the page shows it: its verdict and, in words, what was said and what the reference gives."""

    verdict: str
    note: str
    placed: bool = True  # whether its span marks the text


@dataclass(frozen=True)
class Segment:
    text: str
    leak: bool = False
    claim: ClaimMark | None = None


@dataclass(frozen=True)
class ShownDraw:
    """One of the human's draws for a turn under ``--truth-policy resample``."""

    number: int  # 1-based, in the order they were drawn
    segments: list[Segment]
    claims: list[ClaimMark]
    shown: bool  # the draw the agent saw


@dataclass
class ShownTurn:
    role: str
    segments: list[Segment]
    number: int  # the agent turn it belongs to (1-based)
    leak_score: float | None = None
    leak: bool = False
    leak_action: str | None = None
    original: list[Segment] | None = None  # the flagged reply the agent did not see (redacted/resampled)
    withheld: list[str] = field(default_factory=list)  # every flagged reply the agent did not see
    screenshot: str | None = None  # frontend agent turns: the page the human saw
    checked: bool = False  # the human's claims were checked (runs with the claims checker)
    untrue: bool = False  # the human's first draw held a false claim
    truth_action: str | None = None  # shown | resampled | withheld (by the leak policy)
    claims: list[ClaimMark] = field(default_factory=list)  # of the reply the agent saw
    draws: list[ShownDraw] = field(default_factory=list)  # every draw, under resample
    shown_draw: int | None = None  # which draw (1-based) the agent saw, under resample
    grounding: list[tuple[str, str]] = field(default_factory=list)  # (call, result) the human was told privately


def clip(text: str) -> str:
    """``text`` as shown: NUL bytes made visible (U+FFFD) and cut at :data:`MAX_TEXT` characters."""
    text = text.replace("\x00", "\ufffd")
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… [{len(text) - MAX_TEXT:,} more characters not shown]"


def _cut(value: str) -> str:
    value = value.replace("\x00", "\ufffd")
    return value if len(value) <= MAX_NOTE else value[:MAX_NOTE] + "…"


def claim_mark(claim: Claim, placed: bool = True) -> ClaimMark:
    actual = None if claim.actual is None else _cut(claim.actual)
    cut = Claim(claim.span, _cut(claim.call), _cut(claim.stated), actual, claim.verdict, _cut(claim.why))
    return ClaimMark(claim.verdict, claim_note(cut), placed)


def place_claims(claims: Sequence[Claim], length: int) -> list[tuple[int, int, int]]:
    """``(start, end, index)`` of the claims whose spans mark the text, sorted: spans clipped to ``[0, length)``;
    empty ones and those overlapping a span already placed are left out (false claims are placed first, then true,
    then unchecked; earlier first within each)."""
    placed: list[tuple[int, int, int]] = []
    starts: list[int] = []
    ranked = sorted(range(min(len(claims), MAX_MARKS)), key=lambda i: (_ORDER.get(claims[i].verdict, 3), i))
    for i in ranked:
        start, end = max(0, claims[i].span[0]), min(length, claims[i].span[1])
        if start >= end:
            continue
        at = bisect.bisect_left(starts, start)
        if (at > 0 and placed[at - 1][1] > start) or (at < len(placed) and placed[at][0] < end):
            continue
        starts.insert(at, start)
        placed.insert(at, (start, end, i))
    return placed


def segments(text: str, spans: Any, claims: Sequence[Claim] = ()) -> list[Segment]:
    """``text`` cut at the leak spans (``[[start, end], ...]``, character offsets; bad spans are ignored) and at the
    spans of ``claims`` (clipped, see :func:`place_claims`): each segment is leaked or not, and inside one claim's
    span or none."""
    length = min(len(text), MAX_TEXT)
    text = clip(text)
    cuts: list[tuple[int, int]] = []
    for span in spans[:MAX_MARKS] if isinstance(spans, list | tuple) else []:
        if (
            isinstance(span, list | tuple)
            and len(span) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
            and 0 <= span[0] < span[1] <= len(text)
        ):
            cuts.append((span[0], span[1]))
    marks = [(start, end, claim_mark(claims[i])) for start, end, i in place_claims(claims, length)]
    points = sorted({0, len(text), *(p for c in cuts for p in c), *(p for m in marks for p in m[:2])})
    leak_events: dict[int, int] = {}
    for start, end in cuts:
        leak_events[start] = leak_events.get(start, 0) + 1
        leak_events[end] = leak_events.get(end, 0) - 1
    out: list[Segment] = []
    depth = 0
    mark = 0
    for a, b in itertools.pairwise(points):
        depth += leak_events.get(a, 0)
        while mark < len(marks) and marks[mark][1] <= a:
            mark += 1
        claim = marks[mark][2] if mark < len(marks) and marks[mark][0] <= a else None
        leak = depth > 0
        if out and out[-1].leak == leak and out[-1].claim is claim:
            out[-1] = Segment(out[-1].text + text[a:b], leak, claim)
        else:
            out.append(Segment(text[a:b], leak, claim))
    return out or [Segment(text)]


def _listed(claims: Sequence[Claim], text: str) -> list[ClaimMark]:
    """Every claim of a reply, in order, each saying whether its span marks the text."""
    placed = {i for _, _, i in place_claims(claims, min(len(text), MAX_TEXT))}
    return [claim_mark(c, i in placed) for i, c in enumerate(claims[:MAX_MARKS])]


def _draw(draw: Draw, shown: int | None) -> ShownDraw:
    return ShownDraw(
        draw.number, segments(draw.reply, None, draw.claims), _listed(draw.claims, draw.reply), draw.number == shown
    )


def _human(turn: DialogueTurn, number: int) -> ShownTurn:
    claims = turn.claims or ()
    original = None
    if turn.leak_action in ("redacted", "resampled") and turn.withheld:
        original = segments(turn.withheld[0], turn.leak_spans)
        shown = segments(turn.text, None, claims)
    else:
        shown = segments(turn.text, turn.leak_spans, claims)
    shown_draw = None if turn.truth_shown is None else turn.truth_shown + 1
    draws = turn.truth_draws[:MAX_MARKS] if turn.checked and len(turn.truth_draws) > 1 else ()
    return ShownTurn(
        "human",
        shown,
        number,
        leak_score=turn.leak_score,
        leak=turn.leak,
        leak_action=turn.leak_action,
        original=original,
        withheld=[clip(text) for text in turn.withheld[:MAX_MARKS]],
        checked=turn.checked,
        untrue=turn.checked and turn.untrue,
        truth_action=turn.truth_action if turn.truth_action in TRUTH_ACTIONS else None,
        claims=_listed(claims, turn.text),
        draws=[_draw(draw, shown_draw) for draw in draws],
        shown_draw=shown_draw if draws else None,
        grounding=[(_cut(told.call), _cut(told.result)) for told in turn.grounding[:MAX_MARKS]],
    )


def shown_turns(turns: Sequence[DialogueTurn], run_dir: Path, renders_pages: bool) -> tuple[list[ShownTurn], list[str]]:
    """The turns of an episode as shown, and notes on what its records lack (an older run)."""
    out: list[ShownTurn] = []
    notes: list[str] = []
    number = 0
    for turn in turns:
        if turn.role == "agent":
            number += 1
            shot = turn.screenshot if safe_relative(turn.screenshot, run_dir) else None
            out.append(ShownTurn("agent", segments(turn.text, None), number, screenshot=shot))
        else:
            out.append(_human(turn, number))
    humans = [turn for turn in turns if turn.role == "human"]
    if any(t.leak_score is not None for t in humans) and all(t.leak_spans is None for t in humans):
        notes.append("this run's records have no leak spans: the flagged text is not highlighted")
    if humans and not any(t.checked for t in humans):
        notes.append("the human's replies were not checked for false claims (--truth-policy off, or an older run)")
    if renders_pages and number and all(t.screenshot is None for t in out):
        notes.append("this run's records have no per-turn screenshots: only the final page is shown")
    return out, notes


@dataclass(frozen=True)
class TestRow:
    """One backend test call as a record's ``score.tests`` holds it (missing fields read as empty)."""

    name: str
    call: str
    passed: bool
    judgeable: bool
    outcome: str
    detail: str

    @classmethod
    def of(cls, raw: dict[str, Any]) -> TestRow:
        def text(key: str) -> str:
            value = raw.get(key)
            return clip(value if isinstance(value, str) else "" if value is None else json.dumps(value))

        return cls(
            text("name"),
            text("judged") or text("expression"),
            raw.get("passed") is True,
            raw.get("judgeable") is not False,
            text("outcome"),
            text("detail"),
        )


def test_rows(score: Any) -> list[TestRow]:
    """The backend tests of a record's ``score`` (none where it has no list of them)."""
    tests = score.get("tests") if isinstance(score, dict) else None
    return [TestRow.of(test) for test in tests if isinstance(test, dict)] if isinstance(tests, list) else []
