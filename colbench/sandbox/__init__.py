"""Sandboxes that run untrusted code (agent answers and task references).

``shared_sandbox(kind)`` hands out one pooled sandbox per kind and process, so every env and scorer in a process
shares its warm workers; it is closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading

from colbench.errors import ConfigError
from colbench.sandbox.base import ExecResult, Limits, Sandbox, TestOutcome

KINDS = ("auto", "local")

__all__ = ["KINDS", "ExecResult", "Limits", "Sandbox", "TestOutcome", "make_sandbox", "shared_sandbox"]

_shared: dict[str, Sandbox] = {}
_lock = threading.Lock()


def make_sandbox(kind: str = "auto", *, workers: int | None = None, limits: Limits | None = None) -> Sandbox:
    """A new sandbox of ``kind``; ``auto`` picks the strongest runtime this machine offers."""
    if kind in ("auto", "local"):
        from colbench.sandbox.local import LocalSandbox

        return LocalSandbox(workers=workers, limits=limits)
    raise ConfigError(f"unknown sandbox {kind!r}; expected one of: {', '.join(KINDS)}")


def shared_sandbox(kind: str = "auto") -> Sandbox:
    """The process-wide sandbox of ``kind`` (created on first use, closed at exit)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown sandbox {kind!r}; expected one of: {', '.join(KINDS)}")
    resolved = "local" if kind == "auto" else kind  # one pool per runtime, whatever name asked for it
    with _lock:
        if resolved not in _shared:
            _shared[resolved] = make_sandbox(resolved)
        return _shared[resolved]


@atexit.register
def _close_shared() -> None:
    with _lock:
        for sandbox in _shared.values():
            sandbox.close()
        _shared.clear()
