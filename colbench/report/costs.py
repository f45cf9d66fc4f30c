"""Tokens and cost per role, priced by a user-supplied table, and the dated list prices ``--dry-run`` forecasts with.

A price file (JSON, or TOML when its name ends in ``.toml``) maps a model name to USD per million tokens::

    {"as_of": "2025-01-15",
     "gpt-4o": {"input": 2.50, "output": 10.00},
     "gpt-4o-mini": {"input": 0.15, "output": 0.60}}

``as_of`` (optional) is shown next to the costs. A role's model is looked up by run.json's ``name`` / ``model``,
then the spec's model and the spec (``openai:gpt-4o``), then, for the embedded model, ``llamacpp`` (the list prices
give it 0: it runs on this machine); a model the table does not list costs "unknown", never 0 (price a model behind
your own server at 0 explicitly if that is what you mean). Cached-input discounts and batch pricing are not modelled.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from colbench._util.schema import validate
from colbench.errors import ConfigError, DataError
from colbench.llm.specs import ModelSpec, parse_spec
from colbench.runs import ROLES, RoleSection, Run
from colbench.types.chat import Usage


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

    @property
    def label(self) -> str:
        """Where the prices come from and their date, as every report and forecast names them."""
        return (self.source or "a price table") + (f", as of {self.as_of}" if self.as_of else "")

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


def price_names(section: RoleSection | None, role: str, parsed: ModelSpec | None = None) -> list[str]:
    """Every name a price table may list a role's model under (``section``: the role in run.json), most specific
    first. ``parsed``: the section's spec, already parsed (a run being written has it; a stored run is read)."""
    if section is None:
        return []
    names = [section.name, section.model]
    spec = section.spec
    if spec is not None:
        if parsed is None:
            try:
                parsed = parse_spec(spec, role)
            except ConfigError:  # a plug-in agent given with a name of its own
                parsed = None
        if parsed is not None:
            names.append(parsed.value)
        names.append(spec)
        if parsed is not None and parsed.is_embedded:
            names.append(parsed.kind)
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def role_costs(run: Run, prices: Prices) -> list[RoleCost]:
    """Agent and simulator (and any other role that episodes.jsonl reports), in that order."""
    roles = list(ROLES) + sorted(set(run.usage) - set(ROLES))
    out = []
    for role in roles:
        usage = run.usage.get(role, Usage())
        found = prices.find(price_names(run.role(role), role))
        cost = found[1].cost(usage) if found else None
        out.append(RoleCost(role, run.role_model(role), usage, len(run.episodes), cost))
    return out


# List prices of a few API models in USD per 1M tokens (input, output), for ``colbench eval --dry-run`` forecasts
# when no --prices table is given. Prices change: the date says how old these are; a price file overrides them.
LIST_PRICES = Prices(
    models={
        "gpt-4o": Price(2.50, 10.00),
        "gpt-4o-2024-08-06": Price(2.50, 10.00),
        "gpt-4o-mini": Price(0.15, 0.60),
        "gpt-4.1": Price(2.00, 8.00),
        "gpt-4.1-mini": Price(0.40, 1.60),
        "gpt-4.1-nano": Price(0.10, 0.40),
        "o3-mini": Price(1.10, 4.40),
        "o4-mini": Price(1.10, 4.40),
        "llamacpp": Price(0.0, 0.0),  # the embedded model: it runs on this machine
    },
    as_of="2025-06-01",
    source="colbench's list prices",
)


def forecast_against_actual(run: Run, prices: Prices) -> tuple[list[str], list[list[str]]] | None:
    """run.json's forecast (the typical scenario ``--dry-run`` prints) beside what the run spent; None without one."""
    forecast = run.config.forecast
    if not isinstance(forecast, dict) or not isinstance(forecast.get("roles"), list):
        return None
    header = ["", "episodes", "agent tokens in / out", "simulator tokens in / out", "cost", "wall time"]
    planned: dict[str, dict[str, Any]] = {str(r.get("role")): r for r in forecast["roles"] if isinstance(r, dict)}

    def tokens(role: str, source: str) -> str:
        if source == "forecast":
            r = planned.get(role, {})
            return f"{int(r.get('prompt_tokens') or 0):,} / {int(r.get('completion_tokens') or 0):,}"
        usage = run.usage.get(role, Usage())
        return f"{usage.prompt_tokens:,} / {usage.completion_tokens:,}"

    cost = forecast.get("cost_usd")
    costs = [c.cost for c in role_costs(run, prices) if c.usage.calls]
    spent = None if any(c is None for c in costs) else math.fsum(c for c in costs if c is not None)
    wall = forecast.get("wall_s")
    body = [
        [
            f"forecast ({forecast.get('turns')} turns per episode)",
            str(forecast.get("episodes")),
            tokens("agent", "forecast"),
            tokens("simulator", "forecast"),
            "unknown" if cost is None else f"${cost:,.2f}",
            "-" if not isinstance(wall, int | float) else f"{wall / 60:.1f} min",
        ],
        [
            "actual",
            str(len(run.episodes)),
            tokens("agent", "actual"),
            tokens("simulator", "actual"),
            "unknown" if spent is None else f"${spent:,.2f}",
            _span_minutes(run),
        ],
    ]
    return header, body


def _span_minutes(run: Run) -> str:
    """From the first episode's start to the last one's end (sessions of a resumed run and the gaps between them)."""
    spans = []
    for record in run.episodes.values():
        timings = record.timings or {}
        try:
            start = datetime.fromisoformat(str(timings["started"])).timestamp()
            spans.append((start, start + float(timings["duration_s"])))
        except (KeyError, TypeError, ValueError):
            continue
    if not spans:
        return "-"
    return f"{(max(end for _, end in spans) - min(start for start, _ in spans)) / 60:.1f} min"
