"""The per-run HTML report (``DIR/report.html``): one self-contained file, no scripts, no external assets.

Everything that comes from the run directory (agent and simulator text above all: it is untrusted) is HTML-escaped;
the page carries a Content-Security-Policy that forbids scripts and remote loads, as a second line of defence.
Frontend screenshots are linked by their path relative to the run directory (``screens/...``), so the report shows
them when opened from the run directory and stays small.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from colbench._util.version import __version__
from colbench.errors import ConfigError
from colbench.report.columns import cost_columns, leaderboard_columns, legend
from colbench.report.costs import forecast_against_actual
from colbench.report.leaderboard import Report, Table
from colbench.report.plots import plots_section
from colbench.report.truth import claim_note, episode_truth, simulator_label, truth_config
from colbench.runs import DialogueTurn, EpisodeRecord, Run, reference_screenshot_name, safe_relative
from colbench.types.claims import Claim

REPORT_NAME = "report.html"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' file: data:; base-uri 'none'; form-action 'none'"
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|password|passwd|authori[sz]ation|credential|^token$|access[_-]?token)")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;
color:#1d2430}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #d8dde6}h3{margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d8dde6;padding:.25em .6em;text-align:left;
vertical-align:top}th{background:#f2f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f8fa;border:1px solid #e3e6ec;padding:.6em;margin:.3em 0}
.meta,.legend{color:#59616e}.turn{margin:.6em 0}.role{font-weight:600;font-size:.9em}
.agent pre{border-left:4px solid #3b6fd8}.human pre{border-left:4px solid #2f9e62}
.claims{margin:.2em 0 .2em 1.2em;padding:0;font-size:.9em}.claims .false{color:#b42318}.claims .true{color:#59616e}
.claims .unchecked{color:#8a8f98}.private{color:#6941c6;font-size:.9em}
.ok{color:#1d7a46}.bad{color:#b42318}.infra{color:#b54708;font-weight:600}.skip{color:#8a8f98}
section.episode{border-top:2px solid #d8dde6;margin-top:2em}img.shot{max-width:100%;border:1px solid #d8dde6}
a.top{font-size:.85em}
svg.plot{max-width:100%;height:auto}.plotbox{overflow-x:auto}
.gallery{display:flex;flex-wrap:wrap;gap:1em}figure.pair{margin:0;display:grid;grid-template-columns:1fr 1fr;gap:.4em;
width:520px;border:1px solid #d8dde6;padding:.4em}figure.pair figcaption{grid-column:1/3;font-size:.9em}
img.thumb{width:100%;border:1px solid #d8dde6}.noshot{color:#8a8f98;font-size:.85em;border:1px dashed #d8dde6;
padding:.5em;min-height:4em}
"""


def e(value: Any) -> str:
    """Escape anything for HTML text or a quoted attribute."""
    return escape("" if value is None else str(value), quote=True)


def redact(value: Any) -> Any:
    """run.json never holds keys (docs/run-format.md); still, hide anything that looks like one before showing it."""
    if isinstance(value, dict):
        return {k: "[redacted]" if _SECRET_KEY.search(str(k).lower()) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _URL_USERINFO.sub(r"\1[redacted]@", value)
    return value


def _table(header: Sequence[str], body: Iterable[Sequence[str]], numeric: set[int] | None = None) -> str:
    """A table of already-escaped cells."""
    numeric = numeric or set()
    head = "".join(f"<th>{h}</th>" for h in header)
    rows = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in body
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _plain_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    right = {i for i, h in enumerate(header) if h not in {"run", "agent", "note", "role", "model"}}
    return _table([e(h) for h in header], [[e(c) for c in r] for r in body], right)


def _json(value: Any) -> str:
    return f"<pre>{e(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))}</pre>"


def _fmt_reward(episode: EpisodeRecord) -> str:
    return "-" if episode.reward is None else f"{episode.reward:.3f}"


def _status(episode: EpisodeRecord) -> str:
    if episode.ok:
        return '<span class="ok">ok</span>'
    return '<span class="infra">infra_error</span>'


def _anchor(index: int) -> str:
    return f"ep-{index}"


def _dialogue(turns: tuple[DialogueTurn, ...]) -> str:
    if not turns:
        return "<p class='meta'>no dialogue recorded</p>"
    out = []
    agent_turn = 0
    for turn in turns:
        css = "agent" if turn.role == "agent" else "human"
        agent_turn += turn.role == "agent"
        label = f"{turn.role} (turn {agent_turn})" if turn.role == "agent" else turn.role
        out.append(
            f'<div class="turn {css}"><div class="role">{e(label)}{_leak_mark(turn)}{_truth_mark(turn)}</div>'
            f"<pre>{e(turn.text)}</pre>{_claims(turn)}{_withheld(turn)}{_draws(turn)}{_grounding(turn)}</div>"
        )
    return "".join(out)


def _leak_mark(turn: DialogueTurn) -> str:
    """A human turn's leak verdict, beside its role (nothing when the run did not measure leaks)."""
    if turn.leak_score is None:
        return ""
    verdict = f"leak, {turn.leak_action or 'shown'}" if turn.leak else "no leak"
    css = "bad" if turn.leak else "meta"
    return f' <span class="{css}">({e(verdict)}; leak score {turn.leak_score:.2f})</span>'


def _truth_mark(turn: DialogueTurn) -> str:
    """A human turn's claims verdict beside its role: ``untrue`` (the first draw held a false claim) and what the
    truth policy did; nothing for a turn that was not checked."""
    if not turn.checked:
        return ""
    if not turn.untrue:
        return ' <span class="meta">(claims: nothing false)</span>'
    return f' <span class="bad">(false claim, {e(turn.truth_action or "shown")})</span>'


def _claim_items(claims: tuple[Claim, ...]) -> str:
    items = "".join(f'<li class="{c.verdict}">{e(c.verdict)}: {e(claim_note(c)[:500])}</li>' for c in claims)
    return f'<ul class="claims">{items}</ul>' if items else ""


def _claims(turn: DialogueTurn) -> str:
    """The claims of the reply the agent saw: what the human said and what the reference gives."""
    return _claim_items(turn.claims or ()) if turn.checked else ""


def _draws(turn: DialogueTurn) -> str:
    """Under ``--truth-policy resample``: the human's other draws (each with its claims), not shown to the agent."""
    if len(turn.truth_draws) < 2:
        return ""
    items = [
        f"<p class='meta'>draw {draw.number}{' (shown to the agent)' if draw.number - 1 == turn.truth_shown else ''}"
        f"</p><pre>{e(draw.reply)}</pre>{_claim_items(draw.claims)}"
        for draw in turn.truth_draws
    ]
    return f"<details><summary>{len(items)} draws (truth policy resample)</summary>{''.join(items)}</details>"


def _grounding(turn: DialogueTurn) -> str:
    """What a grounded human was privately told before replying (never shown to the agent)."""
    if not turn.grounding:
        return ""
    lines = [f"{e(told.call)} → {e(told.result)}" for told in turn.grounding]
    return (
        "<div class='private'>told privately to the human (grounding; the agent never saw it):<br>"
        + "<br>".join(lines)
        + "</div>"
    )


def _withheld(turn: DialogueTurn) -> str:
    if not turn.withheld:
        return ""
    items = "".join(f"<pre>{e(text)}</pre>" for text in turn.withheld)
    noun = "reply" if len(turn.withheld) == 1 else "replies"
    return f"<details><summary>{len(turn.withheld)} withheld {noun}</summary>{items}</details>"


def _tests(tests: Any) -> str:
    if not isinstance(tests, list) or not tests:
        return ""
    body = []
    for test in tests:
        if not isinstance(test, dict):
            body.append(["", e(json.dumps(test, ensure_ascii=False)), "", "", ""])
            continue
        if not test.get("judgeable", True):
            verdict = '<span class="skip">not judged</span>'
        elif test.get("passed"):
            verdict = '<span class="ok">passed</span>'
        else:
            verdict = '<span class="bad">failed</span>'
        body.append(
            [
                e(test.get("name")),
                f"<code>{e(test.get('expression'))}</code>",
                verdict,
                e(test.get("outcome")),
                e(test.get("detail")),
            ]
        )
    return "<h4>Tests</h4>" + _table(["test", "call", "result", "outcome", "detail"], body)


def _screenshot(run: Run, episode: EpisodeRecord) -> str:
    path = episode.screenshot
    if path is None:
        return "<p class='meta'>no screenshot recorded (no page, or the episode did not finish)</p>"
    link = safe_relative(path)
    if link is None:
        return f"<p class='bad'>screenshot path {e(path)} is not a relative path inside the run directory</p>"
    missing = "" if (run.path / str(path)).is_file() else " <span class='bad'>(file missing)</span>"
    return (
        f"<h4>Final page</h4><p class='meta'>{e(path)}{missing}; the reference page is not stored in the run "
        f'directory</p><img class="shot" src="{e(link)}" alt="final page of {e(episode.task_id)}">'
    )


def reference_path(run: Run, episode: EpisodeRecord) -> str | None:
    """The reference page's screenshot in the run directory: the record's ``reference_screenshot`` (``colbench eval``
    stores one per task), else ``screens/reference/<task id>.png`` if present (runs written before it did)."""
    if episode.reference_screenshot is not None:
        return episode.reference_screenshot
    candidate = reference_screenshot_name(episode.task_id)
    return candidate if (run.path / candidate).is_file() else None


def _thumb(run: Run, path: str | None, what: str, task: str) -> str:
    if path is None:
        return f"<div class='noshot'>{e(what)}: not stored in the run directory</div>"
    link = safe_relative(path)
    if link is None:
        return f"<div class='noshot bad'>{e(what)}: {e(path)} is not a path inside the run directory</div>"
    if not (run.path / path).is_file():
        return f"<div class='noshot bad'>{e(what)}: {e(path)} (file missing)</div>"
    return f'<img class="thumb" src="{e(link)}" alt="{e(what)} of {e(task)}" loading="lazy">'


def screenshot_gallery(run: Run) -> str:
    """Page domains: per scored episode, the reference page and the agent's final page side by side with their
    cosine similarity (the reward), lowest first: the pages worth a look are the ones that scored low. Plain
    ``<img>`` links into the run directory, so it needs no plotting library."""
    episodes = sorted((ep for eps in run.scored().values() for ep in eps), key=lambda ep: ep.reward or 0.0)
    if not episodes:
        return "<p class='meta'>no scored episode: no screenshots</p>"
    figures = []
    for episode in episodes:
        answer = episode.screenshot
        figures.append(
            '<figure class="pair">'
            + _thumb(run, reference_path(run, episode), "reference", episode.task_id)
            + _thumb(run, answer, "final page", episode.task_id)
            + f"<figcaption>task {e(episode.task_id)}, trial {e(episode.trial)}: cosine "
            + f"{e(_fmt_reward(episode))}</figcaption></figure>"
        )
    return "<div class='gallery'>" + "".join(figures) + "</div>"


def _untrue_text(episode: EpisodeRecord) -> str:
    found = episode_truth(episode.dialogue_turns)
    return "not checked" if found is None else f"{found.untrue} of {found.checked} checked"


def _untrue_cell(episode: EpisodeRecord) -> str:
    found = episode_truth(episode.dialogue_turns)
    return "-" if found is None else f"{found.untrue}/{found.checked}"


def _episode_section(run: Run, index: int, episode: EpisodeRecord) -> str:
    facts = [
        ("status", _status(episode)),
        ("reward", e(_fmt_reward(episode))),
        ("success", e(episode.success)),
        ("turns", e(episode.turns)),
        ("termination", e(episode.termination)),
        ("leaks", e(episode.leaks if episode.leaks is not None else "not measured")),
        ("untrue replies", e(_untrue_text(episode))),
        ("attempts", e(episode.attempts)),
        ("record", e(episode.where)),
    ]
    if episode.error:
        facts.append(("error", f"<span class='infra'>{e(episode.error)}</span>"))
    if episode.rescored_from is not None:  # colbench rescore: the score under the source run's env id
        before = {k: v for k, v in episode.rescored_from.items() if k != "score"}
        facts.append(("before rescoring", e(json.dumps(before, ensure_ascii=False))))
    if episode.timings is not None:
        facts.append(("timings", e(json.dumps(episode.timings, ensure_ascii=False))))
    if episode.usage is not None:
        facts.append(("usage", e(json.dumps(episode.usage, ensure_ascii=False))))
    parts = [
        f'<section class="episode" id="{_anchor(index)}">',
        f"<h3>task {e(episode.task_id)}, trial {e(episode.trial)}</h3>",
        '<a class="top" href="#episodes">back to the episode table</a>',
        _table(["field", "value"], [[e(k), v] for k, v in facts]),
        "<h4>Dialogue</h4>",
        _dialogue(episode.dialogue_turns),
        "<h4>Answer</h4>",
        f"<pre>{e(episode.answer)}</pre>" if episode.answer is not None else "<p class='meta'>no answer</p>",
    ]
    score = episode.score
    if isinstance(score, dict):
        parts.append(_tests(score.get("tests")))
        rest = {k: v for k, v in score.items() if k != "tests"}
        if rest:
            parts += ["<h4>Score details</h4>", _json(rest)]
    if run.domain.renders_pages:
        parts.append(_screenshot(run, episode))
    parts.append("</section>")
    return "\n".join(parts)


def render_run(run: Run, report: Report) -> str:
    """The HTML text of one run's report."""
    row = report.row_of(run)
    label = row.label if row is not None else run.path.name
    config = run.config
    meta = " · ".join(
        e(x)
        for x in (
            run.env_id,
            *(
                [f"rescored from the {config.rescored_from.get('env_id', '?')} run {config.rescored_from.get('run')}"]
                if config.rescored_from is not None
                else []
            ),
            f"{run.trials} trial(s)",
            f"human {simulator_label(run.role_model('simulator') or '?', config)}",
            f"truth policy {truth_config(config).policy or 'not recorded'}",
            f"created {config.created or '?'}",
            f"colbench {config.colbench_version or '?'}",
        )
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>colbench report: {e(label)}</title><style>{STYLE}</style></head><body>",
        f"<h1>colbench report: {e(label)}</h1>",
        f"<p class='meta'>{meta} · written by colbench {e(__version__)}</p>",
        "<h2>Summary</h2>",
    ]
    if row is not None:
        table = next(t for t in report.tables if row in t.rows)
        header, body = leaderboard_columns(Table(table.domain, table.env_id, [row], table.reference_label))
        parts.append(_plain_table(header, body))
        parts.append("<ul class='legend'>" + "".join(f"<li>{e(n)}</li>" for n in legend(report)) + "</ul>")
    for warning in run.warnings:
        parts.append(f"<p class='infra'>{e(warning)}</p>")
    header, body = cost_columns(report)
    mine = [r for r in body if r[0] == label]
    parts += ["<h2>Tokens and cost</h2>", _plain_table(header, mine)]
    parts.append(
        f"<p class='meta'>prices: {e(report.prices.label)}; a model the table does not "
        "list costs unknown (colbench report --prices FILE)</p>"
    )
    planned = forecast_against_actual(run, report.prices)
    if planned is not None:
        parts += ["<h2>Forecast and actual</h2>", _plain_table(*planned)]
        parts.append("<p class='meta'>the forecast colbench eval --dry-run prints, recorded when the run started</p>")
    parts.append(plots_section(run, report))
    if run.domain.renders_pages:
        parts += ["<h3>Reference and final pages</h3>", screenshot_gallery(run)]
    parts += ["<h2>Configuration (run.json)</h2>", _json(redact(config.as_json()))]
    episodes = run.ordered_episodes()
    parts.append(f'<h2 id="episodes">Episodes ({len(episodes)})</h2>')
    body_rows = [
        [
            f'<a href="#{_anchor(i)}">{e(ep.task_id)}</a>',
            e(ep.trial),
            e(_fmt_reward(ep)),
            e(ep.turns),
            e(ep.termination),
            e(ep.leaks if ep.leaks is not None else "-"),
            e(_untrue_cell(ep)),
            _status(ep),
        ]
        for i, ep in enumerate(episodes)
    ]
    header = ["task", "trial", "reward", "turns", "termination", "leaks", "untrue", "status"]
    parts.append(_table(header, body_rows, {1, 2, 3, 5, 6}))
    parts.append("<h2>Transcripts</h2>")
    parts += [_episode_section(run, i, ep) for i, ep in enumerate(episodes)]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_run_report(run: Run, report: Report) -> Path:
    """Write ``DIR/report.html``; an unwritable directory is a ``ConfigError`` naming the file."""
    target = run.path / REPORT_NAME
    try:
        target.write_text(render_run(run, report), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    return target
