"""A probe suite: the fixed adversarial agent turns ``colbench probe simulator`` plays against a simulated human.

Each domain ships its suite beside its prompts (``envs/<domain>/probes/suite.toml``); ``--suite FILE`` gives another in
the same format. A probe is a short dialogue (the agent's turns, in order) with an id and a category; category
``control`` marks an honest question, which measures the human's baseline rather than its resistance. Turns may
use ``$signature``, ``$name`` (the function's signature and name, from the description's last line) and
``$problem_description``.

A probe of category ``truth`` asks what calls of the task's function return (docs/human-quality.md, "The probe"):
``$call``, ``$call2``, ... are literal calls from the task's tests (``calls = "tests"``), its ColBench+ tests
(``"plus"``) or either (``"any"``, the default), chosen by :mod:`colbench.probe.truth_calls`; ``$right`` is what the
reference returns for ``$call`` and ``$wrong`` a value it does not return. A probe whose task has too few such
calls does not apply to that task (no row is played).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

from colbench._util.datafiles import data_path
from colbench._util.prompts import fill
from colbench._util.schema import validate
from colbench._util.storage import sha256_text
from colbench.errors import DataError
from colbench.probe.truth_calls import literal, ordered_calls, wrong
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.task import Task

CONTROL = "control"
TRUTH = "truth"
HONEST = (CONTROL, TRUTH)
"""Categories of honest questions: they measure the human's baseline and its truthfulness, not its resistance, and
are left out of the adversarial rates."""
_CALL_SLOT = re.compile(r"call(\d*)")
VALUES = ("right", "wrong")
_SIGNATURE = re.compile(r"(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\([^\n]*\)(?:\s*->[^\n:]+)?")


class _Probe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(min_length=1)
    category: StrictStr = Field(min_length=1)
    turns: list[StrictStr] = Field(min_length=1, max_length=9)
    calls: Literal["tests", "plus", "any"] | None = None

    @field_validator("turns")
    @classmethod
    def _turns(cls, turns: list[str]) -> list[str]:
        for turn in turns:
            if not turn.strip():
                raise ValueError("a turn is empty")
            if ANSWER_MARKER in turn:
                raise ValueError(f"a turn holds the answer marker {ANSWER_MARKER!r}: it would end the episode")
        return turns

    @model_validator(mode="after")
    def _calls_named(self) -> _Probe:
        used = _placeholders(self.turns)
        slots = _slots(used)
        if self.calls is not None and not slots:
            raise ValueError(f"probe {self.id!r} sets calls but no turn uses $call")
        if used & set(VALUES) and 1 not in slots:
            raise ValueError(f"probe {self.id!r} states $right or $wrong: a turn must name its $call")
        if slots and slots != set(range(1, max(slots) + 1)):
            raise ValueError(f"probe {self.id!r} uses $call{max(slots)} without every call before it")
        return self


class _Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probe: list[_Probe] = Field(min_length=1)


class NotApplicable(Exception):
    """A probe that cannot be played on a task: it asks about calls or values the task does not have."""


def _placeholders(turns: Any) -> set[str]:
    return {name for turn in turns for name in Template(turn).get_identifiers()}


def _slots(used: set[str]) -> set[int]:
    return {int(m.group(1) or 1) for name in used if (m := _CALL_SLOT.fullmatch(name))}


@dataclass(frozen=True)
class Probe:
    """One adversarial (or, for ``control`` and ``truth``, honest) dialogue opening. ``calls``: where a truth
    probe's calls come from (``tests``, ``plus``, ``any``)."""

    id: str
    category: str
    turns: tuple[str, ...]
    calls: str = "any"

    @property
    def control(self) -> bool:
        return self.category == CONTROL

    @property
    def honest(self) -> bool:
        """An honest question (``control``, ``truth``): not counted in the adversarial rates."""
        return self.category in HONEST

    @property
    def slots(self) -> int:
        """How many calls of the task the turns name (``$call``, ``$call2``, ...)."""
        return max(_slots(_placeholders(self.turns)), default=0)

    @property
    def states_value(self) -> bool:
        """Whether a turn states the reference's value of ``$call`` or a wrong one (``$right``, ``$wrong``)."""
        return bool(_placeholders(self.turns) & set(VALUES))

    def call_order(self, task: Task) -> list[str]:
        """The task's calls this probe may ask about, in its own deterministic order
        (:mod:`colbench.probe.truth_calls`)."""
        return ordered_calls(task, self.id, self.calls) if self.slots else []

    def applies(self, task: Task) -> bool:
        """Whether the task has the calls the probe names (a probe naming none applies to every task)."""
        return not self.slots or len(self.call_order(task)) >= self.slots

    def turns_for(self, task: Task, values: Mapping[str, Any] | None = None) -> list[str]:
        """The turns with the task's placeholders filled in. A probe that states a value needs ``values`` (the
        reference's statable values by call, :func:`colbench.probe.truth_calls.stated_values`): its ``$call`` is the
        first call in its order that has one. ``NotApplicable`` when the task lacks what the probe asks about."""
        match = _SIGNATURE.search(task.problem_description.rpartition("signature")[2] or task.problem_description)
        signature = match.group(0).strip() if match else "def solution(*args)"
        name = match.group(1) if match else "the function"
        fields: dict[str, object] = {
            "signature": signature,
            "name": name,
            "problem_description": task.problem_description.strip(),
        }
        fields.update(self.call_fields(task, values))
        return [fill(t, **fields) for t in self.turns]

    def call_fields(self, task: Task, values: Mapping[str, Any] | None = None) -> dict[str, str]:
        """What a truth probe fills in: ``call1``.. (``call`` is ``call1``), and ``right`` / ``wrong`` for a probe
        stating a value (``turns_for`` says how they are chosen)."""
        if not self.slots:
            return {}
        order = self.call_order(task)
        if len(order) < self.slots:
            raise NotApplicable(
                f"the task has {len(order)} literal {self.calls} call(s), the probe asks about {self.slots}"
            )
        fields: dict[str, str] = {}
        if self.states_value:
            first = next((call for call in order if values is not None and call in values), None)
            if first is None or values is None:
                raise NotApplicable("the reference gives no value a probe can state on the task's calls")
            order = [first, *(call for call in order if call != first)]
            fields["right"] = literal(values[first]) or ""
            fields["wrong"] = literal(wrong(values[first])) or ""
        for slot in range(1, self.slots + 1):
            fields[f"call{slot}"] = order[slot - 1]
        fields["call"] = order[0]
        return fields


@dataclass(frozen=True)
class Suite:
    path: str
    sha256: str
    probes: tuple[Probe, ...]

    @property
    def categories(self) -> list[str]:
        """The suite's categories, in the order they first appear."""
        return list(dict.fromkeys(p.category for p in self.probes))

    def only(self, category: str) -> Suite:
        """The probes of one category (the same file and hash)."""
        return Suite(self.path, self.sha256, tuple(p for p in self.probes if p.category == category))


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
    probes = tuple(Probe(p.id, p.category, tuple(p.turns), p.calls or "any") for p in suite.probe)
    return Suite(str(where), sha256_text(text), probes)
