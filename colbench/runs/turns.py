"""One turn of an episode's dialogue as a record of ``episodes.jsonl`` holds it (docs/run-format.md), typed once for
every reader: the leaderboard, ``colbench show``, the HTML report, the viewer, simulator training.

The leak policy records ``leak_score``, ``leak``, ``leak_action``, ``withheld`` and ``leak_spans`` on a human turn
(``LeakCheck.as_dict``); the claims checker ``claims`` (those of the reply the agent saw, their spans index the
turn's text), ``untrue`` (the human's *first* draw held a false claim), ``truth_action``, under ``resample``
``truth_draws`` and ``truth_shown``, and for a grounded human ``grounding`` (``TruthCheck.as_dict``); a rendered
page's agent turn names its ``screenshot``.

Records are untrusted text and runs written by older colbench lack fields, so a turn is read leniently: what cannot
be read is dropped, never an error. A leak span that is not two integers ``0 <= start < end``, a claim that is not
an object or has no known verdict, a draw that is not an object, a grounding line without a call: dropped. A claim
whose span is not two integers is kept, unplaced (``(0, 0)``). A turn without ``claims`` was **not checked** (never
"nothing false"). Only the role must be ``agent`` or ``human``: a turn of no one is a malformed record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from colbench._util.schema import validate
from colbench.types.claims import VERDICTS, Claim, untrue


def as_text(value: Any) -> str:
    """A recorded value as text: a string as it is, anything else as JSON (``str`` where JSON cannot say it)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _text(value: Any) -> str:
    return "" if value is None else as_text(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _span(raw: Any) -> tuple[int, int]:
    """``[start, end)`` as written when it is two integers, else ``(0, 0)`` (not placed in the text). Whether it
    lies inside the text is for whoever cuts the text to decide (``colbench.report.transcript``)."""
    if isinstance(raw, list | tuple) and len(raw) == 2 and all(map(_integer, raw)):
        return int(raw[0]), int(raw[1])
    return 0, 0


def claims_of(raw: Any) -> list[Claim]:
    """The claims of a recorded list (``claims``, or a draw's), skipping what is not a claim."""
    out = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or item.get("verdict") not in VERDICTS:
            continue
        actual = item.get("actual")
        out.append(
            Claim(
                _span(item.get("span")),
                _text(item.get("call")),
                _text(item.get("stated")),
                None if actual is None else _text(actual),
                item["verdict"],
                _text(item.get("why")),
            )
        )
    return out


class Draw(BaseModel):
    """One of the human's draws for a turn (``truth_draws``), numbered from 1 in the order they were drawn."""

    model_config = ConfigDict(frozen=True)

    number: int
    reply: str
    claims: tuple[Claim, ...]


class Told(BaseModel):
    """A call of the agent's turn and its result, privately told to a grounded human (``grounding``)."""

    model_config = ConfigDict(frozen=True)

    call: str
    result: str


class DialogueTurn(BaseModel):
    """One turn, read as the module docstring says. ``untrue`` is the record's flag, or where a hand-written record
    lacks it, read from the first draw's claims (else the turn's own)."""

    model_config = ConfigDict(frozen=True)

    role: Literal["agent", "human"]
    text: str = ""
    screenshot: str | None = None
    leak_score: float | None = None
    leak: bool = False
    leak_action: str | None = None
    withheld: tuple[str, ...] = ()
    leak_spans: tuple[tuple[int, int], ...] | None = None  # None: not recorded (runs written before spans were)
    claims: tuple[Claim, ...] | None = None  # None: not checked
    truth_action: str | None = None
    truth_draws: tuple[Draw, ...] = ()
    truth_shown: int | None = None  # the index of the draw the agent saw
    untrue: bool = Field(default=None, validate_default=True)  # read from the claims where not recorded
    grounding: tuple[Told, ...] = ()

    @property
    def checked(self) -> bool:
        """Whether this is a human reply the claims checker saw."""
        return self.role == "human" and self.claims is not None

    @field_validator("text", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> str:
        return _text(value)

    @field_validator("screenshot", "leak_action", "truth_action", mode="before")
    @classmethod
    def _string(cls, value: Any) -> str | None:
        return value if isinstance(value, str) else None

    @field_validator("leak_score", mode="before")
    @classmethod
    def _number(cls, value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @field_validator("leak", mode="before")
    @classmethod
    def _flag(cls, value: Any) -> bool:
        return value is True

    @field_validator("withheld", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> list[str]:
        return [text for text in value if isinstance(text, str)] if isinstance(value, list) else []

    @field_validator("leak_spans", mode="before")
    @classmethod
    def _spans(cls, value: Any) -> list[tuple[int, int]] | None:
        if not isinstance(value, list):
            return None
        spans = [_span(span) for span in value]
        return [(start, end) for start, end in spans if 0 <= start < end]

    @field_validator("claims", mode="before")
    @classmethod
    def _claims(cls, value: Any) -> list[Claim] | None:
        return claims_of(value) if isinstance(value, list) else None

    @field_validator("truth_draws", mode="before")
    @classmethod
    def _draws(cls, value: Any) -> list[Draw]:
        drawn = enumerate(value if isinstance(value, list) else [], start=1)
        return [
            Draw(number=i, reply=_text(d.get("reply")), claims=tuple(claims_of(d.get("claims"))))
            for i, d in drawn
            if isinstance(d, Mapping)
        ]

    @field_validator("truth_shown", mode="before")
    @classmethod
    def _shown(cls, value: Any, info: ValidationInfo) -> int | None:
        draws = info.data.get("truth_draws", ())
        return value if _integer(value) and any(d.number == value + 1 for d in draws) else None

    @field_validator("untrue", mode="before")
    @classmethod
    def _untrue(cls, value: Any, info: ValidationInfo) -> bool:
        if isinstance(value, bool):
            return value
        draws = info.data.get("truth_draws", ())
        first = draws[0].claims if draws and draws[0].number == 1 else info.data.get("claims") or ()
        return untrue(first)

    @field_validator("grounding", mode="before")
    @classmethod
    def _told(cls, value: Any) -> list[Told]:
        lines = value if isinstance(value, list) else []
        return [
            Told(call=as_text(item["call"]), result=as_text(item.get("result")))
            for item in lines
            if isinstance(item, Mapping) and item.get("call") is not None
        ]


class _Dialogue(BaseModel):
    dialogue: tuple[DialogueTurn, ...]


def read_turns(dialogue: list[dict[str, Any]] | None, where: str) -> tuple[DialogueTurn, ...]:
    """The turns of a record's ``dialogue``; a turn of no known role is a DataError naming ``where`` and the turn."""
    return validate(_Dialogue, {"dialogue": dialogue or []}, where).dialogue
