"""Fixtures of the viewer's tests (the run directories they write are made by ``view_runs``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colbench.view.site import Site


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def make_site(cache: Path) -> Iterator[Any]:
    made: list[Site] = []

    def make(*dirs: Path) -> Site:
        site = Site(list(dirs), cache)
        made.append(site)
        return site

    yield make
    for site in made:
        for index in site.indexes:
            index.close()
