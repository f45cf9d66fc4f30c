"""The env options of an adapter whose framework makes its objects with no arguments (OpenRLHF's agent instances,
verl's agent loops): a JSON object in an environment variable, read when an episode starts."""

from __future__ import annotations

import json
import os
from typing import Any

from colbench.env.versions import newest_env
from colbench.errors import ConfigError


def env_options(variable: str, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``$variable`` as a dict (empty when unset and nothing is required); a one-line error names what is wrong."""
    raw = os.environ.get(variable)
    if not raw:
        if required:
            raise ConfigError(f"set {variable} to a JSON object of env options with {', '.join(required)}")
        return {}
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{variable}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    missing = [key for key in required if not isinstance(options, dict) or not isinstance(options.get(key), str)]
    if not isinstance(options, dict) or missing:
        raise ConfigError(f"{variable} must be a JSON object of env options with {', '.join(required) or 'them'}")
    return options


def default_env_id(domain: str = "backend") -> str:
    """The env id an adapter plays when its options name none: the domain's newest id, as ``colbench score`` and
    ``colbench serve`` default to (an out-of-date id would log Gymnasium's warning at every episode)."""
    newest = newest_env(domain)
    if newest is None:
        raise ConfigError(f"domain {domain!r} has no registered env id")
    return newest
