"""One episode as its page shows it: turns with leak spans and the human's claims cut out, the score explained, the
pages seen.

Everything here is plain data for the templates, which escape it: nothing of a record is ever marked safe. What
an older run's record lacks (leak spans, claim checks, per-turn screenshots, a task snapshot) becomes a note, not an
error. Spans are untrusted too: a leak span outside the text is ignored; a claim's span is clipped to the text, and
one that is empty, not two integers, or overlaps a claim already placed (false claims are placed first) is left
unmarked in the text, though the claim is still listed under the reply.
"""

from __future__ import annotations

import bisect
import itertools
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.report.truth import as_text, claim_note, claims_of, is_checked, turn_untrue
from colbench.runs import EpisodeRecord
from colbench.types.claims import Claim
from colbench.view.index import RunIndex
from colbench.view.summary import config_snapshot

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


@dataclass
class Draw:
    """One of the human's draws for a turn under ``--truth-policy resample`` that the agent did not see."""

    number: int  # 1-based, in the order they were drawn
    segments: list[Segment]
    claims: list[ClaimMark]


@dataclass
class Turn:
    role: str
    segments: list[Segment]
    number: int  # the agent turn it belongs to (1-based)
    leak_score: float | None = None
    leak: bool = False
    leak_action: str | None = None
    original: list[Segment] | None = None  # the flagged reply the agent did not see (redacted/resampled)
    screenshot: str | None = None  # frontend agent turns: the page the human saw
    checked: bool = False  # the human's claims were checked (runs with the claims checker)
    untrue: bool = False  # the human's first draw held a false claim
    truth_action: str | None = None  # shown | resampled | withheld (by the leak policy)
    claims: list[ClaimMark] = field(default_factory=list)  # of the reply the agent saw
    draws: list[Draw] = field(default_factory=list)  # the other draws (resample)
    shown_draw: int | None = None  # which draw (1-based) the agent saw, under resample
    grounding: list[tuple[str, str]] = field(default_factory=list)  # (call, result) the human was told privately


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


@dataclass
class Box:
    x: float
    y: float
    width: float
    height: float
    label: str
    matched: bool


@dataclass
class Overlay:
    """Blocks of a page drawn over its screenshot (frontend v1 records), in screenshot pixels."""

    image: str
    width: int
    height: int
    boxes: list[Box]


@dataclass
class Episode:
    record: EpisodeRecord
    turns: list[Turn]
    tests: list[TestRow]
    score_fields: list[tuple[str, str]]
    subscores: list[tuple[str, float]]
    screenshot: str | None
    reference_screenshot: str | None
    overlays: list[Overlay]
    task: dict[str, str] | None
    answer: str
    notes: list[str] = field(default_factory=list)


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
    for span in spans[:MAX_MARKS] if isinstance(spans, list) else []:
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


def _draws(raw: dict[str, Any]) -> tuple[list[Draw], int | None]:
    """The draws of a resampled turn other than the one the agent saw, and which one it saw (1-based)."""
    draws = raw.get("truth_draws")
    if not isinstance(draws, list) or len(draws) < 2:
        return [], None
    shown = raw.get("truth_shown")
    shown = shown if isinstance(shown, int) and not isinstance(shown, bool) and 0 <= shown < len(draws) else None
    out = []
    for i, draw in enumerate(draws[:MAX_MARKS]):
        if i == shown or not isinstance(draw, dict):
            continue
        claims = claims_of(draw.get("claims"))
        reply = draw.get("reply")
        out.append(Draw(i + 1, segments(reply if isinstance(reply, str) else "", None, claims), _listed(claims, reply)))
    return out, None if shown is None else shown + 1


def _listed(claims: Sequence[Claim], text: Any) -> list[ClaimMark]:
    """Every claim of a reply, in order, each saying whether its span marks the text."""
    length = min(len(text), MAX_TEXT) if isinstance(text, str) else 0
    placed = {i for _, _, i in place_claims(claims, length)}
    return [claim_mark(c, i in placed) for i, c in enumerate(claims[:MAX_MARKS])]


def _grounding(raw: Any) -> list[tuple[str, str]]:
    out = []
    for item in raw[:MAX_MARKS] if isinstance(raw, list) else []:
        if isinstance(item, dict) and item.get("call") is not None:
            call, result = item.get("call"), item.get("result")
            out.append((_cut(call if isinstance(call, str) else json.dumps(call)), _cut(as_text(result))))
    return out


def _turns(record: EpisodeRecord, notes: list[str], index: RunIndex) -> list[Turn]:
    turns: list[Turn] = []
    number = 0
    spans_seen = shots_seen = claims_seen = human_seen = False
    for raw in record.dialogue or []:
        if not isinstance(raw, dict):
            continue
        role = "agent" if raw.get("role") == "agent" else "human"
        text = str(raw.get("text") or "")
        if role == "agent":
            number += 1
            shot = raw.get("screenshot")
            shot = shot if isinstance(shot, str) and safe_relative(index.run_dir, shot) else None
            shots_seen = shots_seen or shot is not None
            turns.append(Turn(role, segments(text, None), number, screenshot=shot))
            continue
        spans = raw.get("leak_spans")
        spans_seen = spans_seen or spans is not None
        human_seen = True
        checked = is_checked(raw)
        claims_seen = claims_seen or checked
        claims = claims_of(raw.get("claims")) if checked else []
        action = raw.get("leak_action") if isinstance(raw.get("leak_action"), str) else None
        withheld = raw.get("withheld") if isinstance(raw.get("withheld"), list) else []
        original = None
        if action in ("redacted", "resampled") and withheld:
            original = segments(str(withheld[0]), spans)
            shown = segments(text, None, claims)
        else:
            shown = segments(text, spans, claims)
        score = raw.get("leak_score")
        truth_action = raw.get("truth_action")
        draws, shown_draw = _draws(raw) if checked else ([], None)
        turns.append(
            Turn(
                role,
                shown,
                number,
                leak_score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
                leak=raw.get("leak") is True,
                leak_action=action,
                original=original,
                checked=checked,
                untrue=checked and turn_untrue(raw),
                truth_action=truth_action if truth_action in TRUTH_ACTIONS else None,
                claims=_listed(claims, text),
                draws=draws,
                shown_draw=shown_draw,
                grounding=_grounding(raw.get("grounding")),
            )
        )
    if any(t.role == "human" and t.leak_score is not None for t in turns) and not spans_seen:
        notes.append("this run's records have no leak spans: the flagged text is not highlighted")
    if human_seen and not claims_seen:
        notes.append("the human's replies were not checked for false claims (--truth-policy off, or an older run)")
    if index.domain.renders_pages and number and not shots_seen:
        notes.append("this run's records have no per-turn screenshots: only the final page is shown")
    return turns


def safe_relative(run_dir: Path, name: str) -> bool:
    """Whether ``name`` is a plain relative path inside ``run_dir`` once resolved (symlinks followed)."""
    if not name or "\x00" in name or name.startswith(("/", "\\")) or ":" in name:
        return False
    try:
        target = (run_dir / name).resolve()
    except (OSError, RuntimeError):
        return False
    return target.is_relative_to(run_dir.resolve()) and target.is_file()


def png_size(path: Path) -> tuple[int, int] | None:
    """Width and height from a PNG's header (no image library needed to lay boxes over it)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def _boxes(blocks: Any, side: str) -> list[Box]:
    """The blocks of one side, each marked matched or not by ``blocks["matches"]``."""
    raw = blocks.get(side) if isinstance(blocks, dict) else None
    matches = blocks.get("matches") if isinstance(blocks, dict) else None
    column = 0 if side == "reference" else 1
    matched = {
        m[column]
        for m in (matches if isinstance(matches, list) else [])
        if isinstance(m, list) and len(m) >= 2 and isinstance(m[column], int)
    }
    out = []
    for i, block in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(block, list) or len(block) != 8:
            continue
        kind, x, y, w, h, text = block[:6]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y, w, h)):
            continue
        out.append(Box(float(x), float(y), float(w), float(h), f"{kind}: {str(text)[:80]}", i in matched))
    return out


def _overlays(record: EpisodeRecord, index: RunIndex, shot: str | None, ref: str | None) -> list[Overlay]:
    score = record.score if isinstance(record.score, dict) else {}
    blocks = score.get("blocks")
    if not isinstance(blocks, dict):
        return []
    out = []
    for side, image in (("reference", ref), ("answer", shot)):
        if image is None:
            continue
        size = png_size(index.run_dir / image)
        if size is not None:
            out.append(Overlay(image, size[0], size[1], _boxes(blocks, side)))
    return out


def _task(index: RunIndex, task_id: str) -> dict[str, str] | None:
    """The task's row from the run's snapshot (tasks.jsonl), scanned line by line; None without one."""
    name = config_snapshot(index)
    if name is None:
        return None
    with open(index.run_dir / name, "rb") as handle:
        for raw in handle:
            try:
                row = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(row, dict) and str(row.get("task_id")) == task_id:
                return {
                    str(k): clip(v if isinstance(v, str) else json.dumps(v, indent=1, ensure_ascii=False))
                    for k, v in row.items()
                    if k != "task_id"
                }
    return None


def build_episode(index: RunIndex, record: EpisodeRecord) -> Episode:
    notes: list[str] = []
    turns = _turns(record, notes, index)
    score = record.score if isinstance(record.score, dict) else {}
    tests = [TestRow.of(t) for t in score.get("tests") or [] if isinstance(t, dict)]
    plain = [(str(k), clip(json.dumps(v, ensure_ascii=False))) for k, v in score.items() if k not in SCORE_PARTS]
    subs = score.get("subscores")
    subscores = [
        (str(k), float(v))
        for k, v in (subs.items() if isinstance(subs, dict) else [])
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    shot = record.screenshot if record.screenshot and safe_relative(index.run_dir, record.screenshot) else None
    ref = record.reference_screenshot
    ref = ref if ref and safe_relative(index.run_dir, ref) else None
    task = _task(index, record.task_id)
    if task is None:
        notes.append("no task snapshot in this run (tasks.jsonl): task, hidden information and reference not shown")
    answer = record.answer_html if record.answer_html is not None else record.answer
    return Episode(
        record=record,
        turns=turns,
        tests=tests,
        score_fields=plain,
        subscores=subscores,
        screenshot=shot,
        reference_screenshot=ref,
        overlays=_overlays(record, index, shot, ref),
        task=task,
        answer=clip(answer or ""),
        notes=notes,
    )


SCORE_PARTS = ("tests", "subscores", "blocks")
"""Score fields shown in their own sections rather than as plain values."""
