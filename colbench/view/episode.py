"""One episode as its page shows it: its turns (``colbench.report.transcript``, as the HTML report shows them), the
score explained, the pages seen.

Everything here is plain data for the templates, which escape it: nothing of a record is ever marked safe. What
an older run's record lacks (leak spans, claim checks, per-turn screenshots, a task snapshot) becomes a note, not an
error.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.report.transcript import MAX_TEXT as MAX_TEXT  # the names the viewer's tests of hostile text read
from colbench.report.transcript import Segment as Segment
from colbench.report.transcript import ShownTurn, TestRow, clip, shown_turns, test_rows
from colbench.report.transcript import place_claims as place_claims
from colbench.report.transcript import segments as segments
from colbench.runs import EpisodeRecord, safe_relative
from colbench.view.index import RunIndex
from colbench.view.summary import config_snapshot


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
    turns: list[ShownTurn]
    tests: list[TestRow]
    score_fields: list[tuple[str, str]]
    subscores: list[tuple[str, float]]
    screenshot: str | None
    reference_screenshot: str | None
    overlays: list[Overlay]
    task: dict[str, str] | None
    answer: str
    notes: list[str] = field(default_factory=list)


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
    turns, notes = shown_turns(record.dialogue_turns, index.run_dir, index.domain.renders_pages)
    score = record.score if isinstance(record.score, dict) else {}
    tests = test_rows(score)
    plain = [(str(k), clip(json.dumps(v, ensure_ascii=False))) for k, v in score.items() if k not in SCORE_PARTS]
    subs = score.get("subscores")
    subscores = [
        (str(k), float(v))
        for k, v in (subs.items() if isinstance(subs, dict) else [])
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    shot = record.screenshot if safe_relative(record.screenshot, index.run_dir) else None
    ref = record.reference_screenshot if safe_relative(record.reference_screenshot, index.run_dir) else None
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
