"""``run.json``: a run's whole configuration, written once before the first episode (docs/run-format.md).

What must be equal for ``--resume`` to continue a run is everything except :data:`NOT_COMPARED`; its hash is
``config_sha256``. Readers validate the fields they compute from and keep the rest as written.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from colbench._util.schema import validate
from colbench._util.storage import canonical_json, sha256_text, write_json_atomic
from colbench.errors import DataError
from colbench.runs.layout import RUN_JSON
from colbench.tasks.domain_registry import domain_names

FORMAT = 1

# Fields of run.json that describe a run without changing its results: a resume may differ in them. Task data is
# identified by content (the selected ids' hash, the source file's hash), so the path or name it was read from may
# change; both sandbox runtimes pass one conformance suite, so Docker and bwrap score alike; the simulator's
# Python class moves between colbench versions, while everything that determines its replies (model, endpoint,
# sampling, prompt hash, reply cap, image mode) is compared field by field.
NOT_COMPARED = frozenset(
    {
        "created",
        "colbench_version",
        "config_sha256",
        "runtime",
        "forecast",
        "tasks.spec",
        "tasks.source.path",
        "scoring.sandbox",
        "simulator.class",
    }
)


class RunConfig(BaseModel):
    """The fields of run.json that readers compute from; every other field is kept as written."""

    model_config = ConfigDict(extra="allow")

    format: int
    env_id: str = Field(min_length=1)
    domain: str
    trials: int = Field(default=1, ge=1, strict=True)
    tasks: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    simulator: dict[str, Any] | None = None

    @field_validator("format")
    @classmethod
    def _supported(cls, value: int) -> int:
        if value != FORMAT:
            raise ValueError(f"{value!r} is not supported (this colbench reads format {FORMAT})")
        return value

    @field_validator("domain")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in domain_names():
            raise ValueError(f"{value!r} is not a known domain ({', '.join(domain_names())})")
        return value


def read_run_json(path: Path) -> dict[str, Any]:
    """The run.json of the run directory ``path``, validated; a DataError naming the file (and line) otherwise."""
    where = path / RUN_JSON
    if not path.exists():
        raise DataError(f"{path}: no such run directory")
    if not path.is_dir():
        raise DataError(f"{path}: not a directory (expected a run directory written by colbench eval)")
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{where}: not found (is {path} a run directory written by colbench eval?)") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: cannot read: {exc}") from exc
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(config, dict):
        raise DataError(f"{where}: expected a JSON object")
    validate(RunConfig, config, str(where))
    return config


def write_run_json(path: Path, config: Mapping[str, Any]) -> None:
    """Write a run's configuration once, atomically and durably (never a half-written file)."""
    write_json_atomic(path / RUN_JSON, config, durable=True)


def compared_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` without the fields in ``NOT_COMPARED``: what must be equal for a resume."""
    view = copy.deepcopy(dict(run))
    for dotted in NOT_COMPARED:
        *parents, leaf = dotted.split(".")
        node: Any = view
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return view


def config_sha256(run: Mapping[str, Any]) -> str:
    return sha256_text(canonical_json(compared_view(run)))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


_ABSENT = object()


def first_difference(old: Any, new: Any, path: str = "") -> str | None:
    """The first field where two configurations differ, as ``path: old -> new`` (``None`` when equal)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            diff = first_difference(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}" if path else key)
            if diff is not None:
                return diff
        return None
    if old is _ABSENT or new is _ABSENT or old != new:
        before = "(absent)" if old is _ABSENT else _short(old)
        after = "(absent)" if new is _ABSENT else _short(new)
        return f"{path}: {before} -> {after}"
    return None
