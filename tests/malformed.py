"""The check every loader's test of a malformed file shares: the refusal is one line that names the file and then says
what is wrong, so that a user with a bad file is told which file and why, with no traceback to read through.

``refused`` drives a loader on a file it writes; ``one_line_naming`` checks an error text already in hand (a CLI's
stderr), with the same rule."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from colbench.errors import DataError


def one_line_naming(error: str, place: str, message: str) -> str:
    """Assert that ``error`` is one line naming ``place`` (a file, or file:line) and, after it, saying ``message``."""
    assert len(error.splitlines()) == 1, error
    assert re.search(re.escape(place) + ".*" + re.escape(message), error), error
    return error


def refused(load: Callable[[Path], object], path: Path, content: str, message: str) -> str:
    """Write ``content`` to ``path``, and assert that ``load`` refuses it with a one-line DataError naming ``path``."""
    path.write_text(content)
    with pytest.raises(DataError) as caught:
        load(path)
    return one_line_naming(str(caught.value), str(path), message)
