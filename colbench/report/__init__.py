"""``colbench report``: leaderboards, token costs and per-run HTML reports from run directories.

``load_run`` reads a run directory (docs/run-format.md), ``build_report`` turns runs into leaderboard tables
(``render_text`` / ``render_markdown``), ``write_run_report`` writes ``DIR/report.html``. docs/report.md says
how to read the numbers.
"""

from __future__ import annotations

from colbench.report.costs import LIST_PRICES, Price, Prices, RoleCost, load_prices, role_costs
from colbench.report.html_report import render_run, write_run_report
from colbench.report.leaderboard import Report, Row, Table, build_report
from colbench.report.leaderboard_text import render_markdown, render_text
from colbench.report.stats import Estimate, WinRate, win_rate
from colbench.runs import EpisodeRecord, Run, load_run
from colbench.types.chat import Usage

__all__ = [
    "LIST_PRICES",
    "EpisodeRecord",
    "Estimate",
    "Price",
    "Prices",
    "Report",
    "RoleCost",
    "Row",
    "Run",
    "Table",
    "Usage",
    "WinRate",
    "build_report",
    "load_prices",
    "load_run",
    "render_markdown",
    "render_run",
    "render_text",
    "role_costs",
    "win_rate",
    "write_run_report",
]
