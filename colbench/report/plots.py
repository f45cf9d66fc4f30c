"""Plots for the HTML report: inline SVG drawn by matplotlib, an optional extra (``pip install 'colbench[report]'``).

Why SVG inlined in the page: the report is one file with a Content-Security-Policy that forbids scripts and remote
loads; an ``<svg>`` element needs neither, scales, and stays small (text is text, ``svg.fonttype='none'``).
Why matplotlib is imported only when the plots are drawn (:func:`plots_section`): ``colbench report`` must work
without it (the page then says in one line how to get the plots), and importing it costs a few hundred milliseconds.

The figures are drawn on ``matplotlib.figure.Figure`` objects, never through ``pyplot``: nothing touches the
process's backend (a notebook importing colbench keeps its own), and no GUI is ever needed. The output is
deterministic: default style whatever the user's matplotlibrc says, a fixed ``svg.hashsalt`` (clip-path and marker
ids), no date in the metadata. Everything drawn from the run directory (task ids, run labels) is untrusted: it
reaches the SVG as text that matplotlib escapes (``&``, ``<``, ``>``), mathtext parsing is off (a ``$`` in a task
id stays a ``$``), and control characters are replaced before drawing.

Screenshots (frontend) are not plots: ``html_report.gallery`` shows them, with or without matplotlib.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from colbench.report import stats
from colbench.report.columns import estimate_cell
from colbench.report.figure_data import Cell, human_replies, reply_stats, task_cells
from colbench.report.leaderboard import Report, Row, Table
from colbench.runs import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "plots need matplotlib: pip install 'colbench[report]'"

# The look of every figure, on top of matplotlib's defaults (see the module docstring for why each matters).
RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text stays text: small, selectable, escaped by matplotlib
    "svg.hashsalt": "colbench-report",  # deterministic ids
    "text.parse_math": False,  # a task id with "$" is not mathtext
    "text.usetex": False,
    "path.simplify": False,  # the outcome grid counts its cells in the path data
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # one name in every text's style attribute, not ten
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

CURRENT = "#3b6fd8"  # this report's run
OTHER = "#a9bde6"  # the other runs of its table
ROLE_COLOURS = {"agent": "#3b6fd8", "simulator": "#2f9e62"}
OUTCOME_COLOURS = {
    "success": "#2f9e62",
    "mixed": "#e9c46a",  # some trials succeeded, some not
    "fail": "#d04a3c",
    "infra": "#f08c00",  # no scored record, only infrastructure errors
    "not run": "#d0d4db",
}
SCALE_STEPS = 20  # the frontend grid's colour scale: reward bins of (high - low) / 20
GRID_NOTE_SUCCESS = (
    "a cell is the task's scored trials in that run: success = all succeeded, fail = none did, mixed = some did "
    "(their share is written); infra = no trial scored (only infrastructure errors); not run = no record"
)
GRID_NOTE_SCALE = (
    "a cell's colour is the task's mean score over its scored trials in that run (written in the cell when the grid "
    "is small); infra = no trial scored (only infrastructure errors); not run = no record"
)
MAX_LABELLED_TASKS = 60  # more tasks than this: the grid has no task labels (they would overlap)
MAX_ANNOTATED_CELLS = 400  # more cells than this: no value written in each cell
MAX_LABEL = 40  # characters of a run label or task id drawn in a figure
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ID = re.compile(r'\bid="([^"]*)"')


# -- rendering --------------------------------------------------------------------------------------------------
def matplotlib_available() -> bool:
    """Whether the optional extra is installed (the report then has plots)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib's defaults plus :data:`RC`, restored afterwards: the user's matplotlibrc changes nothing here."""
    import matplotlib

    with matplotlib.rc_context(), warnings.catch_warnings():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(cast("Any", RC))
        warnings.simplefilter("ignore")  # missing glyphs in odd task ids: the text is still written, as text
        yield


def new_figure(width: float, height: float) -> Figure:
    """A figure that belongs to no pyplot state (garbage collected like any object)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def to_svg(fig: Figure, name: str, title: str) -> str:
    """The figure as an ``<svg>`` element for inlining: no XML prologue, no metadata, every id prefixed with ``name``
    (several plots share one page, and ids must stay unique in it), labelled ``title`` for screen readers (``name``
    and ``title``: words of this module, never text of a run)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)

    def prefix(tag: re.Match[str]) -> str:
        # Only inside tags: text nodes may hold anything (escaped), and "<" never starts one there.
        out = _ID.sub(lambda m: f'id="{name}-{m.group(1)}"', tag.group(0))
        return out.replace("url(#", f"url(#{name}-").replace('href="#', f'href="#{name}-')

    text = re.sub(r"<[^>]+>", prefix, text)
    return text.replace("<svg ", f'<svg class="plot" role="img" aria-label="{title}" data-plot="{name}" ', 1).strip()


def label(text: Any) -> str:
    """Untrusted text made fit to draw: no control characters, at most :data:`MAX_LABEL` characters."""
    clean = _CONTROL.sub("?", str(text))
    return clean if len(clean) <= MAX_LABEL else clean[: MAX_LABEL - 1] + "…"


# -- the leaderboard with its intervals -------------------------------------------------------------------------
def _metrics(table: Table) -> list[tuple[str, str, Callable[[Row], stats.Estimate | None]]]:
    """(slug, axis title, estimate) of each score the table ranks by, as the leaderboard's columns name them."""
    metrics = table.rows[0].run.metrics
    if metrics.has_success:
        return [("success", "success %", lambda r: r.primary), ("reward", metrics.reward_label, lambda r: r.secondary)]
    out: list[tuple[str, str, Callable[[Row], stats.Estimate | None]]] = [
        ("reward", metrics.reward_label, lambda r: r.primary)
    ]
    if table.reference_label is not None:
        out.append(("win", f"win % vs {label(table.reference_label)}", lambda r: r.secondary))
    return out


def leaderboard_figure(table: Table, current: Run) -> Figure:
    """One horizontal bar per run and score, best first (the table's order), with its 95% interval as an error bar
    and the leaderboard's cell as text: the intervals are what tells two runs apart, so they are drawn."""
    metrics = _metrics(table)
    rows = table.rows
    fig = new_figure(3.2 * len(metrics) + 1.5, 0.8 + 0.32 * len(rows))
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    ys = list(range(len(rows)))
    for ax, (slug, title, get) in zip(axes, metrics, strict=True):
        for y, row in zip(ys, rows, strict=True):
            est = get(row)
            if est is None or est.value is None:
                ax.text(1, y, "-", va="center", fontsize=7)
                continue
            colour = CURRENT if row.run is current else OTHER
            (bar,) = ax.barh([y], [100 * est.value], color=colour, height=0.6).patches
            bar.set_gid(f"{slug}-bar-{row.rank}")
            if est.has_ci:
                assert est.low is not None and est.high is not None
                errors = [[100 * (est.value - est.low)], [100 * (est.high - est.value)]]
                bars = ax.errorbar([100 * est.value], [y], xerr=errors, fmt="none", ecolor="#1d2430", capsize=3)
                for line in bars.lines[2]:
                    line.set_gid(f"{slug}-ci-{row.rank}")
            ax.text(103, y, estimate_cell(est), va="center", fontsize=7, gid=f"{slug}-value-{row.rank}")
        ax.set_xlim(0, 135)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.set_title(title)
    axes[0].set_yticks(ys, [f"{row.rank}. {label(row.label)}" for row in rows])
    axes[0].invert_yaxis()
    return fig


# -- per-task outcomes across runs ------------------------------------------------------------------------------
def _scale_bin(value: float, low: float, high: float) -> int:
    span = (high - low) or 1.0
    return min(SCALE_STEPS - 1, max(0, math.floor((value - low) / span * SCALE_STEPS)))


def _rect(x: int, y: int) -> list[tuple[float, float]]:
    return [(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1), (x, y)]


def outcome_grid_figure(table: Table) -> tuple[Figure, int, int]:
    """Rows tasks (in the order they first appear), columns runs (the table's order): where a task fails everywhere,
    or only one run solves it, shows at a glance. Cells of one colour are one compound path (a 1,000-task run stays a
    small SVG); the path's id names the category, so each cell is one subpath. Returns the figure and its size."""
    from matplotlib.colors import Normalize
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    runs = [row.run for row in table.rows]
    per_run = [task_cells(run) for run in runs]
    tasks = list(dict.fromkeys(task for cells in per_run for task in cells))
    metrics = runs[0].metrics
    low, high = metrics.reward_range
    # The scale starts at 0 unless some score is below it: similarities below 0 are rare, and a scale from -1
    # would squeeze every real score into its top half.
    scored = [c.value for cells in per_run for c in cells.values() if c.value is not None]
    low = max(low, min([0.0, *scored]))
    cmap = _viridis()
    norm = Normalize(low, high)
    groups: dict[str, list[tuple[int, int]]] = {}
    annotate = len(tasks) * len(runs) <= MAX_ANNOTATED_CELLS
    cell_h = min(0.22, 10.0 / max(1, len(tasks)))
    fig = new_figure(1.8 + 1.1 * len(runs) + (0.9 if not metrics.has_success else 0), 1.2 + cell_h * len(tasks))
    ax = fig.add_subplot()
    for x, cells in enumerate(per_run):
        for y, task in enumerate(tasks):
            cell = cells.get(task, Cell("not run"))
            key = cell.category
            if cell.category == "scored" and cell.value is not None:
                key = f"scale-{_scale_bin(cell.value, low, high):02d}"
            groups.setdefault(key, []).append((x, y))
            if annotate and cell.value is not None and not metrics.has_success:
                ax.text(
                    x + 0.5,
                    y + 0.5,
                    f"{cell.value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if norm(cell.value) < 0.6 else "black",
                    gid=f"cell-{y}-{x}",
                )
            elif annotate and cell.category == "mixed" and cell.value is not None:
                ax.text(
                    x + 0.5, y + 0.5, f"{cell.value:.2f}", ha="center", va="center", fontsize=6, gid=f"cell-{y}-{x}"
                )
    for key in sorted(groups):
        vertices = [v for x, y in groups[key] for v in _rect(x, y)]
        codes = [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY] * len(groups[key])
        colour = cmap((int(key[6:]) + 0.5) / SCALE_STEPS) if key.startswith("scale-") else OUTCOME_COLOURS[key]
        patch = PathPatch(
            Path(vertices, codes),
            facecolor=colour,
            edgecolor="white",
            linewidth=0.5 if cell_h >= 0.1 else 0.0,  # thin rows: a white edge would hide the colour
            gid=f"cells-{key.replace(' ', '-')}",  # "not run": ids have no spaces
        )
        ax.add_patch(patch)
    ax.set_xlim(0, len(runs))
    ax.set_ylim(len(tasks), 0)
    ax.set_xticks(
        [x + 0.5 for x in range(len(runs))], [label(row.label) for row in table.rows], rotation=30, ha="right"
    )
    if len(tasks) <= MAX_LABELLED_TASKS:
        ax.set_yticks([y + 0.5 for y in range(len(tasks))], [label(t) for t in tasks])
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(tasks)} tasks, in order of first appearance")
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    shown = [k for k in OUTCOME_COLOURS if k in groups]
    if not metrics.has_success:
        from matplotlib.cm import ScalarMappable

        fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=metrics.reward_name, shrink=0.8)
    if shown:
        from matplotlib.patches import Patch

        handles = [Patch(facecolor=OUTCOME_COLOURS[k], label=k) for k in shown]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    return fig, len(tasks), len(runs)


def _viridis() -> Any:
    from matplotlib import colormaps

    return colormaps["viridis"]


# -- one run's distributions ------------------------------------------------------------------------------------
def _histogram(ax: Axes, values: Sequence[float], title: str, xlabel: str, gid: str, *, integer: bool) -> None:
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel(xlabel)
    ax.set_ylabel("episodes" if gid != "reply-chars" else "replies")
    if not values:
        ax.set_title(title)
        ax.text(0.5, 0.5, "nothing recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    if integer:
        edges = np.arange(min(values) - 0.5, max(values) + 1.5)
    else:
        edges = np.histogram_bin_edges(values, bins=min(30, max(1, len(set(values)))))
    counts, edges = np.histogram(values, bins=edges)
    bars = ax.bar(
        edges[:-1], counts, width=np.diff(edges), align="edge", color=CURRENT, edgecolor="white", linewidth=0.5
    )
    for index, patch in enumerate(bars.patches):
        patch.set_gid(f"{gid}-bin-{index}")
    if integer:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_title(f"{title}\nn = {len(values)}, median {float(np.median(values)):g}")


def distributions_figure(run: Run) -> Figure:
    """This run's turns to answer, answer length and human reply length: a run whose agent always answers at once,
    or whose human replies are empty, looks different here long before its scores say why."""
    scored = [e for eps in run.scored().values() for e in eps]
    turns = [e.turns for e in scored if e.turns is not None]
    answers = [len(e.answer) for e in scored if e.answer is not None]
    replies = [len(t.text) for t in human_replies(run)]
    fig = new_figure(9.5, 2.6)
    axes = fig.subplots(1, 3)
    _histogram(axes[0], turns, "turns to answer", "agent turns", "turns", integer=True)
    _histogram(axes[1], answers, "answer length", "characters", "answer-chars", integer=False)
    _histogram(axes[2], replies, "simulated human reply length", "characters", "reply-chars", integer=False)
    return fig


# -- the simulated human across runs ----------------------------------------------------------------------------
def _run_bars(
    ax: Axes,
    values: Sequence[float | None],
    texts: Sequence[str],
    slug: str,
    rows: Sequence[Row],
    current: Run,
    top: float | None = None,
) -> None:
    """One bar per run with its value written beside it; ``top``: the axis end (100 for a percentage)."""
    top = top or max([v for v in values if v is not None] + [1.0])
    for y, (value, text, row) in enumerate(zip(values, texts, rows, strict=True)):
        if value is not None:
            (bar,) = ax.barh([y], [value], color=CURRENT if row.run is current else OTHER, height=0.6).patches
            bar.set_gid(f"{slug}-bar-{y}")
        ax.text((value or 0) + top * 0.02, y, text, va="center", fontsize=7, gid=f"{slug}-value-{y}")
    ax.set_xlim(0, top * 1.45)
    if top == 100:
        ax.set_xticks([0, 25, 50, 75, 100])


def human_figure(table: Table, current: Run) -> Figure:
    """Per run of the table: mean reply length, empty-or-refusal %, leaked replies %. The scores of runs under a
    human that says nothing, refuses, or dictates the answer measure that human as much as the agent."""
    rows = table.rows
    found = [reply_stats(row.run) for row in rows]
    fig = new_figure(9.5, 0.9 + 0.32 * len(rows))
    axes = fig.subplots(1, 3, sharey=True)
    chars = [s.mean_chars for s in found]
    refusals = [None if s.empty_or_refusal is None else 100 * s.empty_or_refusal for s in found]
    leaks = [None if s.leaked is None else 100 * s.leaked for s in found]
    _run_bars(
        axes[0],
        chars,
        ["-" if c is None else f"{c:.0f} ({s.replies})" for c, s in zip(chars, found, strict=True)],
        "reply-chars",
        rows,
        current,
    )
    _run_bars(axes[1], refusals, ["-" if v is None else f"{v:.1f}" for v in refusals], "refusal", rows, current, 100)
    _run_bars(
        axes[2], leaks, ["not measured" if v is None else f"{v:.1f}" for v in leaks], "leaked", rows, current, 100
    )
    axes[0].set_title("mean reply chars (replies)")
    axes[1].set_title("empty or refusal %")
    axes[2].set_title("leaked replies %")
    axes[0].set_yticks(range(len(rows)), [label(row.label) for row in rows])
    axes[0].invert_yaxis()
    return fig


def parts_figure(table: Table, current: Run) -> Figure | None:
    """Per part of the reward (ColBench-Frontend-v1: block-match, text, position, colour, CLIP), one bar per run of
    the table: which part a run loses its reward on. None when the env id's reward has no parts."""
    names = table.rows[0].run.metrics.subscores
    if not names:
        return None
    rows = table.rows
    fig = new_figure(2.2 * len(names), 0.9 + 0.32 * len(rows))
    axes = fig.subplots(1, len(names), sharey=True)
    for ax, name in zip(axes, names, strict=True):
        values = [row.parts[name].value if name in row.parts else None for row in rows]
        texts = ["-" if v is None else f"{v:.3f}" for v in values]
        _run_bars(ax, values, texts, f"part-{name}", rows, current, 1.0)
        ax.set_title(name)
        ax.set_xticks([0, 0.5, 1])
    axes[0].set_yticks(range(len(rows)), [label(row.label) for row in rows])
    axes[0].invert_yaxis()
    return fig


# -- cost -------------------------------------------------------------------------------------------------------
def cost_figure(report: Report, current_label: str | None) -> tuple[Figure, str]:
    """Cost per run, stacked by role, from the price table; without one (or with a model it does not list), tokens
    instead, because a cost colbench cannot know is never drawn as $0. Returns the figure and what it shows."""
    priced = all(c.cost is not None for _, costs in report.costs for c in costs)
    unit = "cost (USD)" if priced else "tokens (input + output)"
    labels = [lbl for lbl, _ in report.costs]
    fig = new_figure(7.5, 0.9 + 0.32 * len(labels))
    ax = fig.add_subplot()
    totals = [0.0] * len(labels)
    roles = list(dict.fromkeys(c.role for _, costs in report.costs for c in costs))
    for role in roles:
        widths = []
        for _, costs in report.costs:
            found = [c for c in costs if c.role == role]
            if not found:
                widths.append(0.0)
            elif priced:
                widths.append(found[0].cost or 0.0)
            else:
                widths.append(float(found[0].usage.prompt_tokens + found[0].usage.completion_tokens))
        bars = ax.barh(
            range(len(labels)), widths, left=totals, height=0.6, label=role, color=ROLE_COLOURS.get(role, "#8a8f98")
        )
        for y, patch in enumerate(bars.patches):
            patch.set_gid(f"{role}-bar-{y}")
        totals = [t + w for t, w in zip(totals, widths, strict=True)]
    top = max([*totals, 0.0]) or 1.0
    for y, ((lbl, costs), total) in enumerate(zip(report.costs, totals, strict=True)):
        episodes = max((c.episodes for c in costs), default=0)
        if not any(c.usage.calls or c.usage.prompt_tokens or c.usage.completion_tokens for c in costs):
            text = "no usage recorded"
        elif priced:
            text = f"${total:,.2f}" + (f" (${total / episodes:,.4f}/ep)" if episodes else "")
        else:
            text = f"{total:,.0f}" + (f" ({total / episodes:,.0f}/ep)" if episodes else "")
        weight = "bold" if lbl == current_label else "normal"
        ax.text(total + top * 0.02, y, text, va="center", fontsize=7, fontweight=weight, gid=f"cost-value-{y}")
    ax.set_xlim(0, top * 1.5)
    if not any(totals):
        ax.set_xticks([])
    ax.set_yticks(range(len(labels)), [label(lbl) for lbl in labels])
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.legend(loc="lower right", frameon=False)
    if not priced:
        return fig, "tokens per run (a model is not in the price table: cost unknown)"
    as_of = f", prices as of {report.prices.as_of}" if report.prices.as_of else ""
    return fig, f"cost per run in USD{as_of}"


# -- the section ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plot:
    """One figure of the report's "Plots" section: its heading, a line about it, and the ``<svg>`` (matplotlib's
    markup: every text in it escaped by matplotlib; None where there is nothing to draw, the note says why)."""

    heading: str
    note: str
    svg: str | None = None


def plots_section(run: Run, report: Report) -> list[Plot] | None:
    """The figures across the runs of ``run``'s leaderboard table and this run's distributions; None without
    matplotlib (the page then says how to get them: :data:`INSTALL_HINT`)."""
    if not matplotlib_available():
        return None
    row = report.row_of(run)
    table = next((t for t in report.tables if row is not None and row in t.rows), None)
    with _style():
        return _figures(run, report, row, table)


def _figures(run: Run, report: Report, row: Row | None, table: Table | None) -> list[Plot]:
    plots = []
    if table is not None:
        fig = leaderboard_figure(table, run)
        runs = f"{len(table.rows)} run{'s' if len(table.rows) != 1 else ''}"
        plots.append(
            Plot(
                f"Leaderboard ({table.env_id}, {runs})",
                "bars: the score x100; lines: its 95% interval; this run in dark blue",
                to_svg(fig, "leaderboard", "leaderboard"),
            )
        )
        fig, n_tasks, n_runs = outcome_grid_figure(table)
        if n_tasks:
            plots.append(
                Plot(
                    f"Outcome per task ({n_tasks} tasks x {n_runs} runs)",
                    GRID_NOTE_SUCCESS if table.rows[0].run.metrics.has_success else GRID_NOTE_SCALE,
                    to_svg(fig, "grid", "outcome per task and run"),
                )
            )
        else:
            plots.append(Plot("Outcome per task", "no episode recorded: no grid"))
        fig_parts = parts_figure(table, run)
        if fig_parts is not None:
            plots.append(
                Plot(
                    f"Parts of the reward ({table.env_id})",
                    "mean of each part over tasks (0 to 1); the reward is their mean; this run in dark blue",
                    to_svg(fig_parts, "parts", "parts of the reward"),
                )
            )
        fig = human_figure(table, run)
        plots.append(
            Plot(
                "Simulated human replies",
                "scored episodes; text as the agent saw it; empty or refusal is the heuristic of "
                "colbench probe; leaked = flagged by the leak detector",
                to_svg(fig, "human", "simulated human replies"),
            )
        )
    if run.scored():
        fig = distributions_figure(run)
        plots.append(Plot("This run's distributions", "scored episodes only", to_svg(fig, "dist", "distributions")))
    else:
        plots.append(Plot("This run's distributions", "no scored episode: no histograms"))
    label_of = row.label if row is not None else None
    fig, what = cost_figure(report, label_of)
    plots.append(Plot("Cost", what, to_svg(fig, "cost", "cost per run")))
    return plots
