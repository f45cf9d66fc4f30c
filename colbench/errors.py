"""One flat error hierarchy.

The split that matters to users is *whose fault* a failure is. ``InfraError`` and its subclasses mean the harness
could not judge the agent (Docker down, endpoint unreachable after retries): an evaluation must report these apart
and never turn them into a score of 0. Everything else under ``ColbenchError`` is bad input from the user.
"""

from __future__ import annotations


class ColbenchError(Exception):
    """Base of every error colbench raises on purpose."""


class ConfigError(ColbenchError, ValueError):
    """A bad argument, spec string or option (the message names which)."""


class DataError(ColbenchError, ValueError):
    """A malformed task or answer file; the message names file, line and field."""


class InfraError(ColbenchError):
    """The harness failed, not the agent: never scored, always reported as an infrastructure error."""


class SandboxError(InfraError):
    """The sandbox runtime could not run a job (missing tool, crashed worker, bad image)."""


class LLMError(InfraError):
    """An LLM endpoint kept failing after all retries."""
