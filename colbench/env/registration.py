"""Gymnasium registration from the env specs in ``envs/<domain>/*.toml``: versioned ids, string entry points.

Registering imports nothing heavy: an entry point is a ``module:Class`` string that Gymnasium imports on the first
``gym.make``; ``vector_entry_point`` names the env's ColBench vector env, which ``gym.make_vec`` uses by default
(docs/rl.md). ``gym.make`` returns the env itself, not wrapped: the env enforces reset-before-step itself, every id
passes ``check_env`` in the tests, and a wrapper would hide ``astep`` / ``areset``, which asyncio trainers call.
The turn cap is part of the task and ends the episode with ``terminated=True`` (the final answer is
scored), so the envs get no ``TimeLimit`` wrapper: ``max_episode_steps`` would report it as truncation.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import gymnasium as gym

from colbench._util.datafiles import data_path
from colbench.errors import DataError


@dataclass(frozen=True)
class EnvDefinition:
    """One env id as its spec file declares it."""

    id: str
    domain: str
    entry_point: str
    vector_entry_point: str | None = None
    description: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def _parse(raw: dict[str, Any], where: str) -> EnvDefinition:
    for name in ("id", "domain", "entry_point"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise DataError(f"{where}: field '{name}': expected a non-empty string")
    for name in ("entry_point", "vector_entry_point"):
        if name in raw and (not isinstance(raw[name], str) or ":" not in raw[name]):
            raise DataError(f"{where}: field '{name}': expected 'module.path:Class', got {raw[name]!r}")
    kwargs = raw.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise DataError(f"{where}: field 'kwargs': expected a table")
    unknown = sorted(set(raw) - {"id", "domain", "entry_point", "vector_entry_point", "description", "kwargs"})
    if unknown:
        raise DataError(f"{where}: unknown field {unknown[0]!r}")
    return EnvDefinition(
        raw["id"],
        raw["domain"],
        raw["entry_point"],
        raw.get("vector_entry_point"),
        str(raw.get("description", "")),
        kwargs,
        where,
    )


@cache
def env_definitions() -> tuple[EnvDefinition, ...]:
    """Every env spec shipped with colbench, in id order; a malformed file is a DataError naming it."""
    specs: dict[str, EnvDefinition] = {}
    for path in sorted(data_path("envs").glob("*/*.toml")):
        where = str(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise DataError(f"{where}: unreadable env spec: {exc}") from exc
        spec = _parse(raw, where)
        if spec.id in specs:
            raise DataError(f"{where}: env id {spec.id!r} is declared twice (also in {specs[spec.id].source})")
        specs[spec.id] = spec
    return tuple(specs[k] for k in sorted(specs))


def env_ids() -> list[str]:
    return [spec.id for spec in env_definitions()]


def register_envs() -> None:
    for spec in env_definitions():
        if spec.id not in gym.registry:
            gym.register(
                id=spec.id,
                entry_point=spec.entry_point,
                vector_entry_point=spec.vector_entry_point,
                kwargs=dict(spec.kwargs),
                order_enforce=False,
                disable_env_checker=True,
            )
