"""The launch lines docs/integrations.md shows, read from the page itself.

The docs are where a user copies a launch from, so the tests feed the frameworks' own parsers exactly those lines:
a block marked `<!-- launch: NAME -->` on the line before its fence. Nothing is kept twice, so the page and what is
tested cannot drift apart.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
_MARK = re.compile(r"^<!-- launch: (?P<name>[\w.-]+) -->\n```[\w-]*\n(?P<body>.*?)^```$", re.M | re.S)


def launches(path: Path = DOCS) -> dict[str, str]:
    """Every marked block of the page by name; a name used twice is an error in the page."""
    found: dict[str, str] = {}
    for match in _MARK.finditer(path.read_text()):
        name = match["name"]
        if name in found:
            raise ValueError(f"{path}: launch {name!r} is marked twice")
        found[name] = match["body"]
    return found


def launch(name: str, path: Path = DOCS) -> str:
    """The text of the block marked `name`."""
    blocks = launches(path)
    if name not in blocks:
        raise KeyError(f"{path}: no block marked <!-- launch: {name} --> (marked: {sorted(blocks)})")
    return blocks[name]


def shell_words(block: str) -> list[str]:
    """A shell block's command as argv words: continuation lines joined, comments dropped."""
    lines = [
        line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    return shlex.split(" ".join(lines), comments=True)
