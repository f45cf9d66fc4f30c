"""The domain registry: name -> :class:`~colbench.domains.base.Domain`, loaded from a ``module:attr`` string.

Entry points are strings (as Gymnasium's are) so that the registry imports no domain until one is asked for, and
so that domains, which build on the rest of colbench, never form an import circle with it: this module imports
nothing of colbench's but its errors, so the lowest layers (tasks, run directories) can ask it. A third-party
package registers its domain with :func:`register_domain`, or through the ``colbench.domains`` entry-point group
of its distribution metadata (loaded on first lookup).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from colbench.errors import ConfigError

if TYPE_CHECKING:
    from colbench.domains.base import Domain

__all__ = [
    "all_domains",
    "detect_domain",
    "domain_names",
    "get_domain",
    "register_domain",
]

ENTRY_POINT_GROUP = "colbench.domains"

_entry_points: dict[str, str] = {
    "backend": "colbench.domains.backend:DOMAIN",
    "frontend": "colbench.domains.frontend:DOMAIN",
}
_loaded: dict[str, Domain] = {}
_lock = threading.RLock()
_plugins_read = False


def register_domain(name: str, entry_point: str) -> None:
    """Make ``name`` resolve to the :class:`Domain` at ``entry_point`` (``module.path:attr``)."""
    module, sep, attr = entry_point.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"domain entry point {entry_point!r}: expected 'module.path:attr'")
    with _lock:
        if _entry_points.get(name, entry_point) != entry_point:
            raise ConfigError(f"domain {name!r} is already registered as {_entry_points[name]}")
        _entry_points[name] = entry_point


def _read_plugins() -> None:
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        _entry_points.setdefault(point.name, point.value)


def domain_names() -> list[str]:
    """Every registered domain, built-in ones first."""
    with _lock:
        _read_plugins()
        return list(_entry_points)


def get_domain(name: str | Domain) -> Domain:
    """The domain called ``name`` (a Domain is returned as it is); unknown names are a ConfigError listing the
    known ones."""
    from colbench.domains.base import Domain

    if isinstance(name, Domain):
        return name
    with _lock:
        if name in _loaded:
            return _loaded[name]
        _read_plugins()
        if name not in _entry_points:
            raise ConfigError(f"unknown domain {name!r}; expected one of {', '.join(_entry_points)}")
        module, _, attr = _entry_points[name].partition(":")
        try:
            target: Any = importlib.import_module(module)
            for part in attr.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"domain {name!r}: cannot load {_entry_points[name]}: {exc}") from exc
        if not isinstance(target, Domain) or target.name != name:
            raise ConfigError(f"domain {name!r}: {_entry_points[name]} is not a Domain named {name!r}")
        _loaded[name] = target
        return target


def all_domains() -> list[Domain]:
    return [get_domain(name) for name in domain_names()]


def detect_domain(row: Mapping[str, Any]) -> Domain:
    """The domain of a task row: its ``domain`` field, else the one domain whose schema it has."""
    named = row.get("domain")
    if named is not None:
        if not isinstance(named, str):
            raise ConfigError(f"field 'domain': expected a string, got {type(named).__name__}")
        return get_domain(named)
    claims = [domain for domain in all_domains() if domain.claims(row)]
    if len(claims) != 1:
        which = ", ".join(d.name for d in claims) or "none"
        raise ConfigError(f"cannot tell the row's domain (schemas that fit: {which}); give it a 'domain' field")
    return claims[0]
