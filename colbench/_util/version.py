"""colbench's version, at the bottom of the layers: every layer may name it (run.json, reports, the CLI), and the
wheel's metadata reads it from here (``[tool.hatch.version]`` in pyproject.toml), so there is one place to bump."""

__version__ = "0.1.0"
