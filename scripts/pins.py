#!/usr/bin/env python3
"""Lists the exact pins (``==``) of pyproject.toml's extras that are behind the newest release, each with the reason
it is held.

The reasons live in one place, pyproject.toml itself: a requirement's own trailing comment, else the comment block
above its extra (a block speaks for the extras under it, up to a blank line). So a pin and why it is held are
changed together, and this script only reads them.

    python scripts/pins.py            # the pins behind the newest release (asks the index with `pip index versions`)
    python scripts/pins.py --all      # every pin, current or not
    python scripts/pins.py --offline  # the pins and their reasons, no index
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_EXTRA = re.compile(r"^(?P<extra>[\w-]+)\s*=\s*\[")


@dataclass(frozen=True)
class Pin:
    extra: str
    name: str
    version: str
    reason: str


def pins(text: str) -> list[Pin]:
    """Every ``name==version`` of ``[project.optional-dependencies]`` with its reason (see the module docstring)."""
    declared = tomllib.loads(text)["project"].get("optional-dependencies", {})
    found: list[Pin] = []
    comments: list[str] = []
    in_section, extra, extra_reason = False, "", ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_section = stripped == "[project.optional-dependencies]"
            comments = []
            continue
        if not in_section:
            continue
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("#").strip())
            continue
        if match := _EXTRA.match(stripped):  # a comment block speaks for the extras under it, to the next blank line
            extra, extra_reason, comments = match["extra"], " ".join(comments) or extra_reason, []
        for pin in _pins_on(line):
            name, version, own = pin
            found.append(Pin(extra, name, version, own or extra_reason or "(no reason written)"))
        if not stripped:
            comments, extra_reason = [], ""
    names = {(p.extra, p.name) for p in found}
    for extra_name, requirements in declared.items():  # a pin the line parser missed is a bug here, not silence
        for requirement in requirements:
            if "==" in requirement and (extra_name, requirement.split("==")[0]) not in names:
                raise ValueError(f"pyproject.toml: could not read the pin {requirement!r} of extra {extra_name!r}")
    return found


def _pins_on(line: str) -> Iterable[tuple[str, str, str]]:
    body, _, comment = line.partition("#")
    for item in re.finditer(r'"([A-Za-z0-9_.\-\[\]]+)==([^";\s]+)"', body):
        yield item[1], item[2], comment.strip()


def newest(name: str) -> str | None:
    """The newest release on the index, as pip sees it (None when the index cannot be asked)."""
    argv = [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    match = re.search(rf"^{re.escape(name)} \(([^)]+)\)", done.stdout, re.M | re.I)
    return match[1] if match else None


def report(found: list[Pin], lookup: Callable[[str], str | None] | None, show_all: bool) -> list[str]:
    """Table rows: extra, package, pinned, newest, reason (only the pins behind unless ``show_all``)."""
    names = sorted({p.name for p in found})
    latest: dict[str, str | None] = {n: None for n in names}
    if lookup is not None:
        with ThreadPoolExecutor(max_workers=4) as pool:
            latest = dict(zip(names, pool.map(lookup, names), strict=True))
    rows = ["| extra | package | pinned | newest | held because |", "| --- | --- | --- | --- | --- |"]
    for pin in found:
        top = latest[pin.name]
        behind = top is not None and top != pin.version
        if show_all or behind or lookup is None:
            rows.append(f"| {pin.extra} | {pin.name} | {pin.version} | {top or '?'} | {pin.reason} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list every pin, not only those behind")
    parser.add_argument("--offline", action="store_true", help="do not ask the index (pins and reasons only)")
    args = parser.parse_args(argv)
    found = pins(PYPROJECT.read_text())
    print("\n".join(report(found, None if args.offline else newest, args.all)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
