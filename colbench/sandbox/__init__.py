"""Sandboxes that run untrusted code (agent answers and task references).

Two runtimes behind one protocol (:class:`~colbench.sandbox.contract.Sandbox`): ``docker`` (containers from the sandbox
image) and ``bwrap`` (bubblewrap namespaces on this machine); ``auto`` picks Docker when its daemon answers and the
image is built. ``shared_sandbox(kind)`` hands out one pooled sandbox per runtime and process, so every env and
scorer in a process shares its warm workers; it is closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import threading

from colbench.errors import ConfigError, SandboxError
from colbench.sandbox.contract import ExecResult, Limits, Sandbox, TestOutcome

KINDS = ("auto", "docker", "bwrap")

__all__ = ["KINDS", "ExecResult", "Limits", "Sandbox", "TestOutcome", "make_sandbox", "resolve_kind", "shared_sandbox"]

log = logging.getLogger(__name__)
_shared: dict[str, Sandbox] = {}
_lock = threading.Lock()


def resolve_kind(kind: str) -> str:
    """``auto`` is Docker when its daemon answers and the sandbox image is there, else bwrap (with a warning)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown sandbox {kind!r}; expected one of: {', '.join(KINDS)}")
    if kind != "auto":
        return kind
    # a runtime's module (and the Docker SDK) only when that runtime is used
    from colbench.sandbox.image import docker_client, image_present

    try:
        if image_present(docker_client(timeout=5.0)):
            return "docker"
        why = "the sandbox image is not built (colbench sandbox build)"
    except (SandboxError, ConfigError) as exc:
        why = str(exc)
    log.warning("sandbox 'auto': using the bubblewrap runtime (bwrap), not Docker: %s", why)
    return "bwrap"


def make_sandbox(kind: str = "auto", *, workers: int | None = None, limits: Limits | None = None) -> Sandbox:
    """A new sandbox of ``kind``; ``auto`` picks the strongest runtime this machine offers."""
    kind = resolve_kind(kind)
    if kind == "docker":
        # a runtime's module (and the Docker SDK) only when that runtime is used
        from colbench.sandbox.docker import DockerSandbox

        return DockerSandbox(workers=workers, limits=limits)
    # a runtime's module (and the Docker SDK) only when that runtime is used
    from colbench.sandbox.bwrap import BwrapSandbox

    return BwrapSandbox(workers=workers, limits=limits)


def shared_sandbox(kind: str = "auto") -> Sandbox:
    """The process-wide sandbox of ``kind`` (created on first use, closed at exit)."""
    resolved = resolve_kind(kind)  # one pool per runtime, whatever name asked for it
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
