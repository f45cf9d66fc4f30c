"""The per-run HTML report (``DIR/report.html``): one self-contained file, no scripts, no external assets.

The page is ``templates/report.html`` (``colbench.report.html_pages``: jinja2, autoescaped), the episodes' turns as
the viewer shows them (``colbench.report.transcript``); everything from the run directory (agent and simulator text
above all: it is untrusted) reaches it as data, and the page carries a Content-Security-Policy that forbids scripts
and remote loads, as a second line of defence. Frontend screenshots are linked by their path relative to the run
directory (``screens/...``), so the report shows them when opened from the run directory and stays small.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench._util.version import __version__
from colbench.errors import ConfigError
from colbench.report.columns import cost_columns, leaderboard_columns, legend
from colbench.report.costs import forecast_against_actual
from colbench.report.html_pages import render_page
from colbench.report.leaderboard import Report, Table
from colbench.report.plots import INSTALL_HINT, plots_section
from colbench.report.tables import TEXT_COLUMNS
from colbench.report.transcript import ShownTurn, TestRow, clip, shown_turns, test_rows
from colbench.report.truth import episode_truth, simulator_label, truth_config
from colbench.runs import EpisodeRecord, Run, reference_screenshot_name, safe_relative

REPORT_NAME = "report.html"
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|password|passwd|authori[sz]ation|credential|^token$|access[_-]?token)")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


def redact(value: Any) -> Any:
    """run.json never holds keys (docs/run-format.md); still, hide anything that looks like one before showing it."""
    if isinstance(value, dict):
        return {k: "[redacted]" if _SECRET_KEY.search(str(k).lower()) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _URL_USERINFO.sub(r"\1[redacted]@", value)
    return value


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _reward(episode: EpisodeRecord) -> str:
    return "-" if episode.reward is None else f"{episode.reward:.3f}"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Picture:
    """A screenshot the page links to by its ``path`` in the run directory: ``link`` None when that is not a plain
    relative path inside it; ``exists`` whether the file is there."""

    path: str | None
    link: str | None
    exists: bool


def _picture(run: Run, path: str | None) -> Picture:
    link = safe_relative(path)
    return Picture(path, link, link is not None and path is not None and (run.path / path).is_file())


def reference_path(run: Run, episode: EpisodeRecord) -> str | None:
    """The reference page's screenshot in the run directory: the record's ``reference_screenshot`` (``colbench eval``
    stores one per task), else ``screens/reference/<task id>.png`` if present (runs written before it did)."""
    if episode.reference_screenshot is not None:
        return episode.reference_screenshot
    candidate = reference_screenshot_name(episode.task_id)
    return candidate if (run.path / candidate).is_file() else None


def gallery(run: Run) -> list[tuple[EpisodeRecord, Picture, Picture]]:
    """Page domains: per scored episode, the reference page and the agent's final page, to be shown side by side
    with their cosine similarity (the reward), lowest first: the pages worth a look are the ones that scored low.
    Plain ``<img>`` links into the run directory, so it needs no plotting library."""
    episodes = sorted((ep for eps in run.scored().values() for ep in eps), key=lambda ep: ep.reward or 0.0)
    return [(ep, _picture(run, reference_path(run, ep)), _picture(run, ep.screenshot)) for ep in episodes]


@dataclass(frozen=True)
class EpisodeSection:
    """What the page shows of one episode: its line in the episode table, its facts, turns, answer and score."""

    record: EpisodeRecord
    untrue_cell: str
    facts: list[tuple[str, str]]  # before the error
    details: list[tuple[str, str]]  # after it
    turns: list[ShownTurn]
    answer: str | None
    tests: list[TestRow]
    score: str  # the score's other fields as JSON ("" without any)
    final: Picture | None  # page domains: the final page


def _section(run: Run, episode: EpisodeRecord) -> EpisodeSection:
    found = episode_truth(episode.dialogue_turns)
    facts = [
        ("reward", _reward(episode)),
        ("success", _text(episode.success)),
        ("turns", _text(episode.turns)),
        ("termination", _text(episode.termination)),
        ("leaks", "not measured" if episode.leaks is None else str(episode.leaks)),
        ("untrue replies", "not checked" if found is None else f"{found.untrue} of {found.checked} checked"),
        ("attempts", str(episode.attempts)),
        ("record", episode.where),
    ]
    details = []
    if episode.rescored_from is not None:  # colbench rescore: the score under the source run's env id
        before = {k: v for k, v in episode.rescored_from.items() if k != "score"}
        details.append(("before rescoring", json.dumps(before, ensure_ascii=False)))
    for name, value in (("timings", episode.timings), ("usage", episode.usage)):
        if value is not None:
            details.append((name, json.dumps(value, ensure_ascii=False)))
    score = episode.score if isinstance(episode.score, dict) else {}
    rest = {k: v for k, v in score.items() if k != "tests"}
    return EpisodeSection(
        episode,
        "-" if found is None else f"{found.untrue}/{found.checked}",
        facts,
        details,
        shown_turns(episode.dialogue_turns, run.path, run.domain.renders_pages)[0],
        None if episode.answer is None else clip(episode.answer),
        test_rows(score),
        _json(rest) if rest else "",
        _picture(run, episode.screenshot) if run.domain.renders_pages else None,
    )


def render_run(run: Run, report: Report) -> str:
    """The HTML text of one run's report."""
    row = report.row_of(run)
    label = row.label if row is not None else run.path.name
    config = run.config
    summary = None
    if row is not None:
        table = next(t for t in report.tables if row in t.rows)
        summary = leaderboard_columns(Table(table.domain, table.env_id, [row], table.reference_label))
    rescored = config.rescored_from
    header, body = cost_columns(report)
    return render_page(
        "report.html",
        label=label,
        meta=[
            run.env_id,
            *([f"rescored from the {rescored.get('env_id', '?')} run {rescored.get('run')}"] if rescored else []),
            f"{run.trials} trial(s)",
            f"human {simulator_label(run.role_model('simulator') or '?', config)}",
            f"truth policy {truth_config(config).policy or 'not recorded'}",
            f"created {config.created or '?'}",
            f"colbench {config.colbench_version or '?'}",
        ],
        version=__version__,
        summary=summary,
        legend=legend(report) if row is not None else [],
        warnings=run.warnings,
        costs=(header, [r for r in body if r[0] == label]),
        prices=report.prices.label,
        forecast=forecast_against_actual(run, report.prices),
        plots=plots_section(run, report),
        install_hint=INSTALL_HINT,
        gallery=gallery(run) if run.domain.renders_pages else None,
        config=_json(redact(config.as_json())),
        episodes=[_section(run, ep) for ep in run.ordered_episodes()],
        reward=_reward,
        text_columns=TEXT_COLUMNS,
    )


def write_run_report(run: Run, report: Report) -> Path:
    """Write ``DIR/report.html``; an unwritable directory is a ``ConfigError`` naming the file."""
    target = run.path / REPORT_NAME
    try:
        target.write_text(render_run(run, report), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    return target
