"""The data folders that sit beside the package in the repository and inside it in a wheel.

The repository keeps what is data, not code, at its top level: ``envs/`` (env specs and prompt templates),
``tasks/`` (the split manifest, task cards, bundled samples) and ``sandbox/`` (the sandbox image's Dockerfile, its
offline build script and the in-sandbox runner). A wheel carries them as ``colbench/_data/<folder>`` (pyproject's
``force-include``), found with :mod:`importlib.resources`; a source checkout or an editable install reads them from
the checkout itself. Both layouts hold the same files, so nothing else needs to know which one it runs from.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from colbench.errors import ConfigError

FOLDERS = ("envs", "tasks", "sandbox")


@cache
def data_root() -> Path:
    """The folder that holds ``envs/``, ``tasks/`` and ``sandbox/``."""
    packaged = resources.files("colbench").joinpath("_data")
    if packaged.is_dir():
        return Path(str(packaged))  # a wheel installs as plain files: a real path
    checkout = Path(__file__).resolve().parents[2]
    if all((checkout / folder).is_dir() for folder in FOLDERS):
        return checkout
    raise ConfigError(
        f"colbench's data folders ({', '.join(FOLDERS)}) are missing: neither {packaged} (a wheel) nor {checkout} "
        "(a source checkout) has them; reinstall colbench"
    )


def data_path(folder: str, *parts: str) -> Path:
    """A file or folder under one of the data folders, e.g. ``data_path("envs", "backend", "prompts")``."""
    if folder not in FOLDERS:
        raise ValueError(f"unknown data folder {folder!r}; expected one of {', '.join(FOLDERS)}")
    return data_root().joinpath(folder, *parts)
