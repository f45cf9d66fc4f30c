"""The probe's ``summary.json`` and its terminal tables (docs/leaks.md; the truth and over-release figures are
defined in docs/human-quality.md, "The probe").

Per view, over the rows played (status ``ok``):

- ``adversarial`` / ``control`` / ``truth``: the rates of the attack probes, of the honest ``control`` questions,
  of the ``truth`` questions; ``by_category``: the leak rate of each attack category; ``categories``: every rate
  of every category in the suite;
- the view's truth figures over all its rows' replies: ``replies``, ``untrue_rate``, ``claims_checked``,
  ``over_release`` and, with ``draws`` > 1, ``unique_per_draws``;
- ``infra_errors`` (rows that failed) and ``skipped`` (probes that could not be built for a task).

Each rate block has ``probes``, ``leak_rate``, ``empty_or_refusal_rate``, ``off_topic_rate``, ``chars`` (over its
rows) and ``replies``, ``untrue_rate``, ``claims_checked``, ``over_release`` (over its rows' replies), and
``unique_per_draws`` with draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from colbench.env.domain import Domain
from colbench.probe.over_release import dialogue_revealed, over_release
from colbench.probe.suite import CONTROL, HONEST, TRUTH, Suite
from colbench.types.task import Task

Key = tuple[str, str, str]  # view, task_id, probe id
CHECKED = ("true", "false")
"""The verdicts of a checked claim (the reference settled it); ``unchecked`` ones do not count."""


def reply_figures(rows: Sequence[Mapping[str, Any]], tasks: Mapping[str, Task], draws: int = 1) -> dict[str, Any]:
    """The figures over every reply of ``rows`` (docs/human-quality.md):

    - ``replies``: how many;
    - ``untrue_rate``: replies with a false claim over replies with a checked claim (None when none has one);
    - ``claims_checked``: ``claims``, the checked claims, and ``replies``, the replies with at least one;
    - ``over_release``: ``mean`` tokens of the reference newly revealed per reply and ``share`` of replies newly
      revealing at least one (None without replies);
    - with ``draws`` > 1, ``unique_per_draws``: the mean over rows of their distinct replies among the K draws of
      the last turn (None when no row has draws).
    """
    replies = with_checked = untrue = checked = 0
    counts: list[int] = []
    for row in rows:
        texts = list(row.get("replies") or [])
        claims = list(row.get("claims") or [])
        for i in range(len(texts)):
            found = claims[i] if i < len(claims) else []
            settled = [c for c in found if c.get("verdict") in CHECKED]
            replies += 1
            checked += len(settled)
            with_checked += bool(settled)
            untrue += any(c.get("verdict") == "false" for c in settled)
        task = tasks.get(str(row.get("task_id")))
        if task is not None and texts:
            turns = list(row.get("turns") or [])
            counts += [len(r) for r in dialogue_revealed(task.ground_truth, task.problem_description, turns, texts)]
    figures: dict[str, Any] = {
        "replies": replies,
        "untrue_rate": untrue / with_checked if with_checked else None,
        "claims_checked": {"claims": checked, "replies": with_checked},
        "over_release": over_release(counts),
    }
    if draws > 1:
        drawn = [int(row["draws_unique"]) for row in rows if row.get("draws_unique") is not None]
        figures["unique_per_draws"] = sum(drawn) / len(drawn) if drawn else None
    return figures


def rates(rows: Sequence[Mapping[str, Any]], tasks: Mapping[str, Task], draws: int = 1) -> dict[str, Any]:
    """A rate block (module docstring): per row, then per reply (:func:`reply_figures`)."""
    n = len(rows)
    out: dict[str, Any] = {
        "probes": n,
        "leak_rate": sum(bool(r["leak"]) for r in rows) / n if n else None,
        "empty_or_refusal_rate": sum(bool(r["empty_or_refusal"]) for r in rows) / n if n else None,
        "off_topic_rate": sum(bool(r["off_topic"]) for r in rows) / n if n else None,
        "chars": round(sum(float(r["chars"]) for r in rows) / n, 1) if n else None,
    }
    out.update(reply_figures(rows, tasks, draws))
    return out


def summarize(
    rows: Mapping[Key, Mapping[str, Any]],
    domain: Domain,
    suite: Suite,
    views: Sequence[str],
    tasks: Sequence[Task],
    draws: int = 1,
) -> dict[str, Any]:
    """Per view: the rates over adversarial, control and truth probes, per category, and the view's truth figures
    over all its replies (module docstring)."""
    by_id = {t.task_id: t for t in tasks}
    attack_categories = [c for c in suite.categories if c not in HONEST]
    out: dict[str, Any] = {"domain": domain.name, "threshold": domain.leak_threshold, "draws": draws, "views": {}}
    for view in views:
        mine = [r for (v, _, _), r in rows.items() if v == view]
        ok = [r for r in mine if r.get("status") == "ok"]
        skipped = sum(r.get("status") == "skipped" for r in mine)
        attacks = [r for r in ok if r.get("category") not in HONEST]

        def of(category: str, among: Sequence[Mapping[str, Any]] = ok) -> list[Mapping[str, Any]]:
            return [r for r in among if r.get("category") == category]

        section: dict[str, Any] = {
            "adversarial": rates(attacks, by_id, draws),
            "control": rates(of(CONTROL), by_id, draws),
            "truth": rates(of(TRUTH), by_id, draws),
            "by_category": {c: rates(of(c, attacks), by_id)["leak_rate"] for c in attack_categories},
            "categories": {c: rates(of(c), by_id, draws) for c in suite.categories},
            **reply_figures(ok, by_id, draws),
            "infra_errors": len(mine) - len(ok) - skipped,
            "skipped": skipped,
        }
        specs = {r["task_id"]: r["spec_leak_score"] for r in ok if r.get("spec_leak_score") is not None}
        if view == "spec":
            section["specs"] = {
                "tasks": len(specs),
                "flagged": sum(score >= domain.leak_threshold for score in specs.values()),
            }
        out["views"][view] = section
    return out


# -- the tables -----------------------------------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _mean(value: Mapping[str, float] | None, key: str, pct: bool = False) -> str:
    if value is None:
        return "-"
    return _pct(value[key]) if pct else f"{value[key]:.2f}"


def _truth_cells(block: Mapping[str, Any], draws: int) -> list[str]:
    cells = [
        str(block["claims_checked"]["claims"]),
        str(block["claims_checked"]["replies"]),
        _pct(block["untrue_rate"]),
        _mean(block["over_release"], "mean"),
        _mean(block["over_release"], "share", pct=True),
    ]
    if draws > 1:
        unique = block.get("unique_per_draws")
        cells.append("-" if unique is None else f"{unique:.2f}/{draws}")
    return cells


def summary_table(summary: Mapping[str, Any], title: str) -> str:
    """The summary as terminal tables: leak rates per view, the truth and over-release figures per view, then every
    figure per probe category."""
    views = list(summary["views"])
    draws = int(summary.get("draws", 1))
    lines = [title, ""]
    header = ["view", "probes", "leak %", "empty/refusal %", "off-topic %", "reply chars", "control leak %", "infra"]
    body = []
    for view in views:
        section = summary["views"][view]
        attack, control = section["adversarial"], section["control"]
        body.append(
            [
                view,
                str(attack["probes"]),
                _pct(attack["leak_rate"]),
                _pct(attack["empty_or_refusal_rate"]),
                _pct(attack["off_topic_rate"]),
                "-" if attack["chars"] is None else f"{attack['chars']:.0f}",
                _pct(control["leak_rate"]),
                str(section["infra_errors"]),
            ]
        )
    lines += _table(header, body)

    truth_header = ["claims checked", "replies with one", "untrue %", "new tokens/reply", "revealing %"]
    truth_header += ["distinct/draws"] if draws > 1 else []
    lines += ["", "Truth and over-release, over every reply", ""]
    lines += _table(
        ["view", "replies", *truth_header],
        [[v, str(summary["views"][v]["replies"]), *_truth_cells(summary["views"][v], draws)] for v in views],
    )

    categories = list(summary["views"][views[0]]["categories"]) if views else []
    lines += ["", "By probe category", ""]
    lines += _table(
        ["category", "view", "probes", "leak %", *truth_header],
        [
            [c, v, str(block["probes"]), _pct(block["leak_rate"]), *_truth_cells(block, draws)]
            for c in categories
            for v in views
            for block in [summary["views"][v]["categories"][c]]
        ],
    )
    lines.append("")
    for view in views:
        spec = summary["views"][view].get("specs")
        if spec is not None:
            lines.append(
                f"{view} view: specs of {spec['tasks']} tasks, {spec['flagged']} flagged as leaking themselves"
            )
        skipped = summary["views"][view].get("skipped", 0)
        if skipped:
            lines.append(f"{view} view: {skipped} probe(s) skipped (the task lacks the calls or values they ask about)")
    lines.append(
        "leak, empty/refusal and off-topic rates over adversarial probes (control, truth: honest questions); a reply "
        f"leaks at leak score >= {summary['threshold']}; empty/refusal and off-topic are heuristics (docs/leaks.md)."
    )
    lines.append(
        "untrue %: replies with a false claim of those with a claim the reference settled; new tokens: the "
        "reference's names, numbers and strings a reply says first (docs/human-quality.md)."
    )
    return "\n".join(lines)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(row) for row in body)]
