"""Names a package exports without importing them: each is imported from its module on first use.

A package's face can then list its whole API while ``import`` of the package (or of any of its submodules) stays
cheap: a scorer that needs only the ``Task`` record does not load the manifest's validation, a trainer that needs
only the envs does not load the report.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, home: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``: ``home`` maps each name to the module that
    defines it; a name once imported is kept in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *home])

    return __getattr__, __dir__
