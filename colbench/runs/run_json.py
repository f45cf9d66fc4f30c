"""``run.json``: a run's whole configuration, written once before the first episode (docs/run-format.md).

What must be equal for ``--resume`` to continue a run is everything except :data:`NOT_COMPARED`; its hash is
``config_sha256``. :class:`RunConfig` is the file: ``colbench eval`` writes it, every reader reads it back through
the same model (typed sections; a field this colbench does not know is kept as written).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

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
# sampling, prompt hash, reply cap, image mode) is compared field by field. The scorer's env id repeats the run's
# own ``env_id``, which is compared (runs written before scorers named it resume as they did).
NOT_COMPARED = frozenset(
    {
        "created",
        "colbench_version",
        "config_sha256",
        "runtime",
        "forecast",
        "tasks.spec",
        "tasks.source.path",
        "tasks.snapshot",
        "scoring.sandbox",
        "scoring.env_id",
        "simulator.class",
    }
)


class _Section(BaseModel):
    """A section of run.json: the fields colbench writes are typed; fields it does not know are kept as written."""

    model_config = ConfigDict(extra="allow")


class TasksSection(_Section):
    spec: str | None = None  # what the tasks were given as (a split or a file)
    count: StrictInt | None = None
    ids_sha256: str | None = None  # the selected ids, in order: what identifies the task set
    source: dict[str, Any] | None = None  # where the tasks came from (kind, name or path, the file's hash)
    snapshot: str | None = None  # the run directory's copy of the tasks (tasks.jsonl); absent in older runs


class RoleSection(_Section):
    """The agent or the simulated human: its model spec and everything that could change its replies."""

    spec: str | None = None
    name: str | None = None
    model: str | None = None
    base_url: str | None = None
    temperature: int | float | None = None  # as given: 0 stays 0
    max_tokens: int | None = None
    extra_body: dict[str, Any] | None = None
    # the simulated human's
    prompt_sha256: str | None = None
    max_chars: int | None = None
    image_mode: str | None = None
    view: str | None = None
    spec_writer: dict[str, Any] | None = None
    # the agent's
    system_prompt_sha256: str | None = None
    answer: dict[str, Any] | None = None
    options: dict[str, Any] | None = None


class LeaksSection(_Section):
    policy: str | None = None
    detector: str | None = None
    threshold: int | float | None = None


class TruthSection(_Section):
    """What was done about the human's claims: the truth policy, the checker that settled them, and whether the
    human was grounded (``exec``: told the reference's results on the agent's literal calls; a human option, shown
    with the simulator: runs with and without it are different humans)."""

    policy: str | None = None
    checker: str | None = None
    human_grounding: str | None = None


class RunConfig(BaseModel):
    """``run.json``: one run's whole configuration, written by ``colbench eval`` and read back by resume, report,
    show and compare through this one model. ``scoring``, ``runtime`` and ``forecast`` are each domain's or tool's
    own description (a mapping as written); a field this colbench does not know is kept as written."""

    model_config = ConfigDict(extra="allow")

    format: int
    colbench_version: str | None = None
    created: str | None = None
    env_id: str = Field(min_length=1)
    domain: str
    max_turns: int | None = None
    agent_prompt_sha256: str | None = None
    trials: int = Field(default=1, ge=1, strict=True)
    limit: int | None = None
    tasks: TasksSection | None = None
    agent: RoleSection | None = None
    simulator: RoleSection | None = None
    scoring: dict[str, Any] | None = None
    leaks: LeaksSection | None = None
    truth: TruthSection | None = None
    runtime: dict[str, Any] | None = None
    forecast: dict[str, Any] | None = None
    rescored_from: dict[str, Any] | None = None  # ``colbench rescore``: the run whose answers this one scored again
    config_sha256: str | None = None

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

    def as_json(self) -> dict[str, Any]:
        """The file's JSON object: the fields that were given (or read), in order, extras included."""
        return self.model_dump(mode="json", exclude_unset=True)

    def compared_view(self) -> dict[str, Any]:
        """Without the fields in ``NOT_COMPARED``: what must be equal for a resume."""
        view = copy.deepcopy(self.as_json())
        for dotted in NOT_COMPARED:
            *parents, leaf = dotted.split(".")
            node: Any = view
            for name in parents:
                node = node.get(name) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(leaf, None)
        return view

    def sealed(self) -> RunConfig:
        """This configuration with its ``config_sha256`` (the hash of what a resume compares)."""
        return self.model_copy(update={"config_sha256": sha256_text(canonical_json(self.compared_view()))})

    def difference(self, other: RunConfig) -> str | None:
        """The first compared field where ``other`` differs from this one, as ``path: this -> other``."""
        return first_difference(self.compared_view(), other.compared_view())

    def write(self, path: Path) -> None:
        """Write ``path/run.json`` once, atomically and durably (never a half-written file)."""
        write_json_atomic(path / RUN_JSON, self.as_json(), durable=True)

    @classmethod
    def read(cls, path: Path) -> RunConfig:
        """The run.json of the run directory ``path``, validated; a DataError naming the file (and line)
        otherwise."""
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
        return validate(cls, config, str(where))


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
