"""The one plug-in loader: objects named by ``module.path:attr`` strings, and registries of them by name.

Entry points are strings (as Gymnasium's are) so that a registry imports nothing until an entry is asked for, and
so that plug-ins, which build on the rest of colbench, never form an import circle with the layer that looks them
up. A registry also reads the entry points of a distribution's metadata group on first lookup.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from typing import Any

from colbench.errors import ConfigError


def split_entry_point(entry_point: str, what: str) -> tuple[str, str]:
    """``module.path:attr`` as its two parts; anything else is a ConfigError naming ``what``."""
    module, sep, attr = entry_point.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"{what} {entry_point!r}: expected 'module.path:attr'")
    return module, attr


def load_object(entry_point: str, what: str) -> Any:
    """The object at ``module.path:attr`` (dotted attributes allowed); a ConfigError naming ``what`` otherwise."""
    module, attr = split_entry_point(entry_point, what)
    try:
        target: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot load {entry_point}: cannot import module {module!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{what}: cannot load {entry_point}: module {module!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


class Registry:
    """Names -> entry points, built-in ones first, then a metadata ``group``'s; each object loaded once."""

    def __init__(self, kind: str, group: str, builtin: dict[str, str]) -> None:
        self.kind = kind
        self.group = group
        self._entry_points = dict(builtin)
        self._loaded: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._plugins_read = False

    def register(self, name: str, entry_point: str) -> None:
        split_entry_point(entry_point, f"{self.kind} entry point")
        with self._lock:
            if self._entry_points.get(name, entry_point) != entry_point:
                raise ConfigError(f"{self.kind} {name!r} is already registered as {self._entry_points[name]}")
            self._entry_points[name] = entry_point

    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        self._plugins_read = True
        for point in importlib.metadata.entry_points(group=self.group):
            self._entry_points.setdefault(point.name, point.value)

    def names(self) -> list[str]:
        with self._lock:
            self._read_plugins()
            return list(self._entry_points)

    def load(self, name: str) -> Any:
        """The object registered as ``name``; unknown names are a ConfigError listing the known ones."""
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            self._read_plugins()
            if name not in self._entry_points:
                raise ConfigError(f"unknown {self.kind} {name!r}; expected one of {', '.join(self._entry_points)}")
            target = load_object(self._entry_points[name], f"{self.kind} {name!r}")
            self._loaded[name] = target
            return target

    def entry_point(self, name: str) -> str:
        with self._lock:
            return self._entry_points[name]
