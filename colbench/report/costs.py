"""Tokens and cost per role, with an optional user-supplied price table (colbench ships no prices: they go stale).

A price file (JSON, or TOML when its name ends in ``.toml``) maps a model name to USD per million tokens::

    {"as_of": "2025-01-15",
     "gpt-4o": {"input": 2.50, "output": 10.00},
     "gpt-4o-mini": {"input": 0.15, "output": 0.60}}

``as_of`` (optional) is shown next to the costs. A role's model is looked up by run.json's ``name`` / ``model``,
then its ``spec`` (``openai:gpt-4o``); a model the table does not list costs "unknown", never 0 (price a local model
at 0 explicitly if that is what you mean). Cached-input discounts and batch pricing are not modelled.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from colbench.errors import DataError
from colbench.llm.client import Usage
from colbench.runs import ROLES, Run
from colbench.schema import validate


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / 1e6


@dataclass(frozen=True)
class Prices:
    models: dict[str, Price] = field(default_factory=dict)
    as_of: str | None = None
    source: str | None = None

    def find(self, names: list[str]) -> tuple[str, Price] | None:
        for name in names:
            if name in self.models:
                return name, self.models[name]
        return None


class _Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float
    output: float

    @field_validator("input", "output", mode="before")
    @classmethod
    def _price(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{value!r} is not a price >= 0 (USD per 1M)")
        return value


def load_prices(path: str | Path) -> Prices:
    """Read a price table; every problem is a ``DataError`` naming the file and the model."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read price table: {exc.strerror or exc}") from exc
    try:
        data: Any = tomllib.loads(raw.decode("utf-8")) if path.suffix == ".toml" else json.loads(raw)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: invalid TOML: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected an object mapping model name -> {{input, output}} (USD per 1M tokens)")
    as_of = data.pop("as_of", None)
    if as_of is not None and not isinstance(as_of, str):
        raise DataError(f"{path}: field 'as_of': expected a string such as '2025-01-15'")
    models = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise DataError(f'{path}: model {name!r}: expected {{"input": USD per 1M, "output": USD per 1M}}')
        unknown = sorted(set(entry) - {"input", "output"})
        if unknown:
            raise DataError(f"{path}: model {name!r}: unknown field {unknown[0]!r} (expected 'input' and 'output')")
        price = validate(_Price, entry, f"{path}: model {name!r}")
        models[name] = Price(price.input, price.output)
    return Prices(models, as_of, str(path))


@dataclass(frozen=True)
class RoleCost:
    """One role of one run: tokens over every attempt in episodes.jsonl, and their cost where the model is priced."""

    role: str
    model: str | None
    usage: Usage
    episodes: int  # distinct (task_id, trial) keys: the per-episode denominator
    cost: float | None  # None: no price for this model

    def per_episode(self, value: float | None) -> float | None:
        return None if value is None or not self.episodes else value / self.episodes


def role_costs(run: Run, prices: Prices | None) -> list[RoleCost]:
    """Agent and simulator (and any other role that episodes.jsonl reports), in that order."""
    roles = list(ROLES) + sorted(set(run.usage) - set(ROLES))
    out = []
    for role in roles:
        usage = run.usage.get(role, Usage())
        found = prices.find(run.role_names(role)) if prices else None
        cost = found[1].cost(usage) if found else None
        out.append(RoleCost(role, run.role_model(role), usage, len(run.episodes), cost))
    return out
