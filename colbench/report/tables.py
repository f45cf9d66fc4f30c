"""Tables as text and as Markdown (the leaderboard's and ``colbench compare``'s). rich lays the text out: a cell is
as wide as a terminal shows it (a wide character takes two columns, where ``len`` counts one), and what a cell holds
is only text (no rich markup, no emoji codes)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.box import Box
from rich.console import Console
from rich.table import Table
from rich.text import Text

TEXT_COLUMNS = frozenset({"run", "agent", "note", "role", "model"})
"""Columns of names and notes, aligned left; the others hold figures, aligned right."""

_RULE = Box("    \n    \n -  \n    \n    \n    \n    \n    \n")
"""No lines but a rule of dashes under the header."""


def text_table(header: Sequence[str], body: Sequence[Sequence[str]], *, left: Collection[str] = TEXT_COLUMNS) -> str:
    """Columns two spaces apart, the ones named in ``left`` aligned left, never wrapped; no trailing spaces."""
    table = Table(box=_RULE, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for name in header:
        table.add_column(Text(name), justify="left" if name in left else "right", no_wrap=True)
    for row in body:
        table.add_row(*map(Text, row))
    console = Console(width=1_000_000, color_system=None, legacy_windows=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def _markdown_cell(text: str) -> str:
    # Names come from run.json: keep them text (no table breaks, no inline HTML in renderers that allow it).
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def markdown_table(
    header: Sequence[str], body: Sequence[Sequence[str]], *, left: Collection[str] = TEXT_COLUMNS
) -> str:
    align = ["---" if name in left else "--:" for name in header]
    return "\n".join("| " + " | ".join(map(_markdown_cell, row)) + " |" for row in [header, align, *body])
