"""Old spellings that keep working: each prints one line on stderr, once per process, naming the new one.

"local" used to mean both the bubblewrap sandbox and the embedded model; they are now ``bwrap`` and ``llamacpp``.
"""

from __future__ import annotations

import os
import sys
import threading

_said: set[str] = set()
_lock = threading.Lock()


def renamed(old: str, new: str, what: str) -> None:
    """Say once that ``old`` (a spelling of ``what``) is now ``new``."""
    with _lock:
        if old in _said:
            return
        _said.add(old)
    print(f"colbench: deprecated: {what} {old!r} is now {new!r}; the old spelling will be removed", file=sys.stderr)


def environ(new: str, old: str) -> str | None:
    """``$new``, else the deprecated ``$old`` (saying so), else None."""
    value = os.environ.get(new)
    if value is not None:
        return value
    value = os.environ.get(old)
    if value is not None:
        renamed(old, new, "the environment variable")
    return value
