"""Joining a Ray cluster and placing ColBench's actors on it.

A node offers ColBench work by declaring the custom resource ``colbench_sandbox`` (``ray start
--resources='{"colbench_sandbox": 1}'``): each unit is one actor with its own sandbox pool, browser and model
clients. A cluster that declares none gets one actor per node, spread, each reserving one CPU. The learner's GPU
node of an RL run declares no unit, so rollouts and scoring stay off it.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from colbench.errors import ConfigError, InfraError

RESOURCE = "colbench_sandbox"

log = logging.getLogger(__name__)


def connect(address: str | None) -> Any:
    """Join the cluster at ``address`` (``None`` or ``""``: what ``ray.init()`` picks: RAY_ADDRESS, a cluster
    already running on this machine, else a new one here). A process already connected stays on its cluster."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'colbench[ray]'") from None
    if ray.is_initialized():
        return ray
    _reachable(address)
    try:
        ray.init(address=address or None, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise InfraError(f"cannot join the Ray cluster at {address or 'the default address'}: {exc}") from exc
    return ray


def _reachable(address: str | None, timeout_s: float = 10.0) -> None:
    """A one-line error for a cluster that is not there (``ray.init`` would wait for it without end)."""
    if not address or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InfraError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def actor_options(ray: Any, *, max_concurrency: int) -> dict[str, Any]:
    """Where an actor goes: on a ``colbench_sandbox`` unit when the cluster has any, else one CPU, spread."""
    options: dict[str, Any] = {"max_concurrency": max_concurrency, "max_restarts": 0}
    if ray.cluster_resources().get(RESOURCE, 0) >= 1:
        options.update(num_cpus=0, resources={RESOURCE: 1})
    else:
        options.update(num_cpus=1, scheduling_strategy="SPREAD")
    return options


def default_workers(ray: Any) -> int:
    """One actor per ``colbench_sandbox`` unit, else one per live node with a CPU."""
    units = int(ray.cluster_resources().get(RESOURCE, 0))
    if units:
        return units
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    return max(1, len(nodes))


def lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors that mean an actor (its process, its node) is gone, not that the work failed."""
    exceptions = ray.exceptions
    names = ("RayActorError", "ActorUnavailableError", "ObjectLostError", "OwnerDiedError", "NodeDiedError")
    return tuple(getattr(exceptions, name) for name in names if hasattr(exceptions, name))


class NodeActor:
    """What every ColBench actor answers once it is up: ``ready()``, the id of the node it runs on."""

    def ready(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())
