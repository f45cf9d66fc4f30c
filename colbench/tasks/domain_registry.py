"""The domain registry: name -> the domain object at a ``module:attr`` entry point, loaded on first lookup.

The task layer reads rows through it (:func:`task_schema`, :func:`detect_schema`) and sees only a
:class:`~colbench.types.task.TaskSchema`; the env layer asks the same registry for the whole
:class:`~colbench.env.domain.Domain` (``colbench.env.domain.get_domain``). A third-party package registers its
domain with :func:`register_domain`, or through the ``colbench.domains`` entry-point group of its distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colbench._util.plugins import Registry
from colbench.errors import ConfigError
from colbench.types.task import TaskSchema

ENTRY_POINT_GROUP = "colbench.domains"

DOMAINS = Registry(
    "domain",
    ENTRY_POINT_GROUP,
    {"backend": "colbench.domains.backend:DOMAIN", "frontend": "colbench.domains.frontend:DOMAIN"},
)


def register_domain(name: str, entry_point: str) -> None:
    """Make ``name`` resolve to the domain at ``entry_point`` (``module.path:attr``)."""
    DOMAINS.register(name, entry_point)


def domain_names() -> list[str]:
    """Every registered domain, built-in ones first."""
    return DOMAINS.names()


def task_schema(name: str) -> TaskSchema:
    """The domain called ``name``, as far as its task rows go; unknown names are a ConfigError listing the known
    ones, and an entry point that is not a domain of that name is one too."""
    target = DOMAINS.load(name)
    if not isinstance(target, TaskSchema) or getattr(target, "name", None) != name:
        raise ConfigError(f"domain {name!r}: {DOMAINS.entry_point(name)} is not a Domain named {name!r}")
    return target


def detect_schema(row: Mapping[str, Any]) -> TaskSchema:
    """The domain of a task row: its ``domain`` field, else the one domain whose schema it has."""
    named = row.get("domain")
    if named is not None:
        if not isinstance(named, str):
            raise ConfigError(f"field 'domain': expected a string, got {type(named).__name__}")
        return task_schema(named)
    claims = [schema for schema in map(task_schema, domain_names()) if schema.claims(row)]
    if len(claims) != 1:
        which = ", ".join(s.name for s in claims) or "none"
        raise ConfigError(f"cannot tell the row's domain (schemas that fit: {which}); give it a 'domain' field")
    return claims[0]
