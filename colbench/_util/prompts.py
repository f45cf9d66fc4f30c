"""Prompt templates, the one way to read and fill them: ``envs/<domain>/prompts/<name>.txt``, ``string.Template``
syntax.

``$name`` markers rather than ``str.format`` braces: the templates are filled with code and HTML, full of braces.
Templates are read once per process; their SHA-256 goes into run.json so a changed prompt is a changed run.
"""

from __future__ import annotations

from functools import cache
from string import Template

from colbench._util.datafiles import data_path
from colbench.errors import ConfigError


@cache
def template_text(domain: str, name: str) -> str:
    """The template ``name`` (``agent``, ``simulator``) of ``domain``, as written."""
    path = data_path("envs", domain, "prompts", f"{name}.txt")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"prompt template {path} cannot be read: {exc.strerror or exc}") from exc


def fill(template: str, **values: object) -> str:
    """The template filled in; a ``$marker`` without a value is left as it is (it may be part of the data)."""
    return Template(template).safe_substitute({k: str(v) for k, v in values.items()})
