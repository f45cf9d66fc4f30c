"""The leaderboard as the terminal shows it (``colbench report``) and as Markdown (``--markdown``)."""

from __future__ import annotations

from colbench.report.columns import (
    cost_columns,
    cost_title,
    leaderboard_columns,
    legend,
    parts_columns,
    pass_k_columns,
    title,
)
from colbench.report.leaderboard import Report
from colbench.report.tables import markdown_table, text_table

_TOKENS_NOTE = (
    "- tokens count every attempt in episodes.jsonl (retried infrastructure errors were paid for too); "
    "per episode = total / distinct (task, trial) episodes."
)


def render_text(report: Report) -> str:
    return _render(report, markdown=False)


def render_markdown(report: Report) -> str:
    return _render(report, markdown=True)


def _render(report: Report, *, markdown: bool) -> str:
    table = markdown_table if markdown else text_table
    parts = ["# colbench report"] if markdown else []

    def section(heading: str, level: int, text: str) -> None:
        parts.extend([f"{'#' * level} {heading}" if markdown else heading, text])

    for board in report.tables:
        section(title(board), 2, table(*leaderboard_columns(board)))
        reward_parts = parts_columns(board)
        if reward_parts is not None:
            section(f"parts of the reward: {board.env_id}", 3, table(*reward_parts))
        pass_k = pass_k_columns(board)
        if pass_k is not None:
            section(f"pass^k: {board.env_id}", 3, table(*pass_k))
    if not report.tables:
        parts.append("no runs")
    parts.append("\n".join(f"- {line}" if markdown else line for line in legend(report)))
    section(cost_title(report), 2, table(*cost_columns(report)))
    if markdown:
        parts.append(_TOKENS_NOTE)
    return "\n\n".join(parts) + "\n"
