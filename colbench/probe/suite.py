"""A probe suite: the fixed adversarial agent turns ``colbench probe simulator`` plays against a simulated human.

Each domain ships its suite beside its prompts (``envs/<domain>/probes/suite.toml``); ``--suite FILE`` gives another in
the same format. A probe is a short dialogue (the agent's turns, in order) with an id and a category; category
``control`` marks an honest question, which measures the human's baseline rather than its resistance. Turns may
use ``$signature``, ``$name`` (the function's signature and name, from the description's last line) and
``$problem_description``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from colbench._util.datafiles import data_path
from colbench._util.prompts import fill
from colbench._util.schema import validate
from colbench._util.storage import sha256_text
from colbench.errors import DataError
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.task import Task

CONTROL = "control"
_SIGNATURE = re.compile(r"(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\([^\n]*\)(?:\s*->[^\n:]+)?")


class _Probe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(min_length=1)
    category: StrictStr = Field(min_length=1)
    turns: list[StrictStr] = Field(min_length=1, max_length=9)

    @field_validator("turns")
    @classmethod
    def _turns(cls, turns: list[str]) -> list[str]:
        for turn in turns:
            if not turn.strip():
                raise ValueError("a turn is empty")
            if ANSWER_MARKER in turn:
                raise ValueError(f"a turn holds the answer marker {ANSWER_MARKER!r}: it would end the episode")
        return turns


class _Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probe: list[_Probe] = Field(min_length=1)


@dataclass(frozen=True)
class Probe:
    """One adversarial (or, for ``control``, honest) dialogue opening."""

    id: str
    category: str
    turns: tuple[str, ...]

    @property
    def control(self) -> bool:
        return self.category == CONTROL

    def turns_for(self, task: Task) -> list[str]:
        """The turns with the task's placeholders filled in."""
        match = _SIGNATURE.search(task.problem_description.rpartition("signature")[2] or task.problem_description)
        signature = match.group(0).strip() if match else "def solution(*args)"
        name = match.group(1) if match else "the function"
        return [
            fill(t, signature=signature, name=name, problem_description=task.problem_description.strip())
            for t in self.turns
        ]


@dataclass(frozen=True)
class Suite:
    path: str
    sha256: str
    probes: tuple[Probe, ...]

    def describe(self) -> dict[str, object]:
        return {"path": self.path, "sha256": self.sha256, "probes": len(self.probes)}


def load_suite(domain: str, path: str | Path | None = None) -> Suite:
    """The domain's suite (``envs/<domain>/probes/suite.toml``) or the file at ``path``; a malformed file is one
    DataError naming it and the field."""
    where = Path(path) if path is not None else data_path("envs") / domain / "probes" / "suite.toml"
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{where}: cannot read the probe suite: {exc.strerror or exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{where}: not valid TOML: {exc}") from None
    suite = validate(_Suite, raw, str(where))
    ids = [p.id for p in suite.probe]
    repeated = next((i for i in ids if ids.count(i) > 1), None)
    if repeated is not None:
        raise DataError(f"{where}: probe id {repeated!r} is used twice")
    probes = tuple(Probe(p.id, p.category, tuple(p.turns)) for p in suite.probe)
    return Suite(str(where), sha256_text(text), probes)
