"""colbench's version, at the bottom of the layers: every layer may name it (run.json, reports, the CLI), and the
wheel's metadata reads it from here (``[tool.hatch.version]`` in pyproject.toml), so there is one place to bump."""

__version__ = "0.1.0"

RESOLVED_AT = "2026-11-28T00:00:00Z"
"""When the package index was read for ``constraints.txt``, the versions the test suite passed with (written by
``scripts/lock.sh`` with that file). Environments that a framework resolves at run time are bounded by it too
(``UV_EXCLUDE_NEWER`` for verifiers' chat harness, a uv script)."""
