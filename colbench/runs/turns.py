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
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, model_validator

from colbench._util.schema import validate
from colbench.types.claims import VERDICTS, Claim, untrue


@dataclass(frozen=True)
class Draw:
    """One of the human's draws for a turn (``truth_draws``), numbered from 1 in the order they were drawn."""

    number: int
    reply: str
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class Told:
    """A call of the agent's turn and its result, privately told to a grounded human (``grounding``)."""

    call: str
    result: str


def _as_text(value: Any) -> str:
    """A recorded value as text: a string as it is, anything else as JSON (``str`` where JSON cannot say it)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _text(value: Any) -> str:
    return "" if value is None else _as_text(value)


def _integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping)


def _span(raw: Any) -> tuple[int, int]:
    """``[start, end)`` as written when it is two integers, else ``(0, 0)`` (not placed in the text). Whether it
    lies inside the text is for whoever cuts the text to decide (``colbench.report.transcript``)."""
    if isinstance(raw, list | tuple) and len(raw) == 2 and all(map(_integer, raw)):
        return int(raw[0]), int(raw[1])
    return 0, 0


def claims_of(raw: Any) -> list[Claim]:
    """The claims of a recorded list (``claims``, or a draw's), skipping what is not a claim."""
    out = []
    for item in _list(raw):
        if not _object(item) or item.get("verdict") not in VERDICTS:
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
    untrue: bool = False
    grounding: tuple[Told, ...] = ()

    @property
    def checked(self) -> bool:
        """Whether this is a human reply the claims checker saw."""
        return self.role == "human" and self.claims is not None

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        claims = claims_of(raw["claims"]) if isinstance(raw.get("claims"), list) else None
        drawn = enumerate(_list(raw.get("truth_draws")), start=1)
        draws = [Draw(i, _text(d.get("reply")), tuple(claims_of(d.get("claims")))) for i, d in drawn if _object(d)]
        spans = [_span(span) for span in raw["leak_spans"]] if isinstance(raw.get("leak_spans"), list) else None
        score, shown, flag = raw.get("leak_score"), raw.get("truth_shown"), raw.get("untrue")
        first = draws[0].claims if draws and draws[0].number == 1 else claims or ()
        return {
            "role": raw.get("role"),
            "text": _text(raw.get("text")),
            "screenshot": _string(raw.get("screenshot")),
            "leak_score": score if isinstance(score, int | float) and not isinstance(score, bool) else None,
            "leak": raw.get("leak") is True,
            "leak_action": _string(raw.get("leak_action")),
            "withheld": [text for text in _list(raw.get("withheld")) if isinstance(text, str)],
            "leak_spans": None if spans is None else [(start, end) for start, end in spans if 0 <= start < end],
            "claims": claims,
            "truth_action": _string(raw.get("truth_action")),
            "truth_draws": draws,
            "truth_shown": shown if _integer(shown) and any(d.number == shown + 1 for d in draws) else None,
            "untrue": flag if isinstance(flag, bool) else untrue(first),
            "grounding": [
                Told(_as_text(item["call"]), _as_text(item.get("result")))
                for item in _list(raw.get("grounding"))
                if _object(item) and item.get("call") is not None
            ],
        }


class _Dialogue(BaseModel):
    dialogue: tuple[DialogueTurn, ...]


def read_turns(dialogue: list[dict[str, Any]] | None, where: str) -> tuple[DialogueTurn, ...]:
    """The turns of a record's ``dialogue``; a turn of no known role is a DataError naming ``where`` and the turn."""
    return validate(_Dialogue, {"dialogue": dialogue or []}, where).dialogue
