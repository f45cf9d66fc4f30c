"""One episode as its page shows it: turns with leak spans cut out, the score explained, the pages seen.

Everything here is plain data for the templates, which escape it: nothing of a record is ever marked safe. What
an older run's record lacks (leak spans, per-turn screenshots, a task snapshot) becomes a note, not an error.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.runs import EpisodeRecord
from colbench.view.index import RunIndex
from colbench.view.summary import config_snapshot

MAX_TEXT = 200_000  # characters of one text shown; a longer one is cut (and said so): a 5 MB answer stays usable


@dataclass(frozen=True)
class Segment:
    text: str
    leak: bool = False


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


def segments(text: str, spans: Any) -> list[Segment]:
    """``text`` cut at the leak spans (``[[start, end], ...]``, character offsets); bad spans are ignored."""
    text = clip(text)
    cuts: list[tuple[int, int]] = []
    for span in spans if isinstance(spans, list) else []:
        if (
            isinstance(span, list | tuple)
            and len(span) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
            and 0 <= span[0] < span[1] <= len(text)
        ):
            cuts.append((span[0], span[1]))
    out: list[Segment] = []
    at = 0
    for start, end in sorted(cuts):
        start = max(start, at)
        if start >= end:
            continue
        if start > at:
            out.append(Segment(text[at:start]))
        out.append(Segment(text[start:end], True))
        at = end
    if at < len(text) or not out:
        out.append(Segment(text[at:]))
    return out


def _turns(record: EpisodeRecord, notes: list[str], index: RunIndex) -> list[Turn]:
    turns: list[Turn] = []
    number = 0
    spans_seen = shots_seen = False
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
        action = raw.get("leak_action") if isinstance(raw.get("leak_action"), str) else None
        withheld = raw.get("withheld") if isinstance(raw.get("withheld"), list) else []
        original = None
        if action in ("redacted", "resampled") and withheld:
            original = segments(str(withheld[0]), spans)
            shown = segments(text, None)
        else:
            shown = segments(text, spans)
        score = raw.get("leak_score")
        turns.append(
            Turn(
                role,
                shown,
                number,
                leak_score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
                leak=raw.get("leak") is True,
                leak_action=action,
                original=original,
            )
        )
    if any(t.role == "human" and t.leak_score is not None for t in turns) and not spans_seen:
        notes.append("this run's records have no leak spans: the flagged text is not highlighted")
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
