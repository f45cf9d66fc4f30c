"""The simulated human's claims as a run directory records them, read for the reports and the viewer.

Since the claims checker (``colbench.types.claims``, DESIGN.md section 9), every human turn of an episode's
``dialogue`` carries the keys of ``TruthCheck.as_dict()``: ``claims`` (the claims of the reply the agent saw, their
spans index the turn's ``text``), ``untrue`` (the human's *first* draw held a false claim), ``truth_action``
(``shown`` | ``resampled``), under ``resample`` ``truth_draws`` (every draw: ``{"reply", "claims"}``) and
``truth_shown``, and for a grounded human ``grounding`` (``[{"call", "result"}]``: what it was privately told).
run.json has a ``truth`` section: ``{"policy", "checker", "human_grounding"}``.

Runs written before have none of these: a turn without ``claims`` was **not checked** (never "no false claim"), and
a run without any checked reply has no figure (``-``). Everything is read leniently, since the records are
untrusted text: a claim that is not an object, has no known verdict or an unusable span is skipped or left
unplaced, never an error.

What counts (the figures of ``colbench report`` and ``colbench view``):

- a reply is *checked* when its turn carries a ``claims`` list (the policy was not ``off``);
- a checked reply is *untrue* when the human's first draw held a false claim (the record's ``untrue``; read from the
  first draw's claims where a hand-written record lacks it): what the human said before any resampling, as the leak
  rate counts what the human wrote whatever the leak policy then did;
- an episode is checked when at least one of its replies is, and untrue when at least one is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from colbench.types.claims import VERDICTS, Claim, untrue

GROUNDING_OFF = "off"


@dataclass(frozen=True)
class TruthConfig:
    """run.json's ``truth`` section (all ``None`` in runs written before it existed)."""

    policy: str | None = None
    checker: str | None = None
    grounding: str | None = None

    @property
    def grounded(self) -> bool:
        """Whether the human was told the reference's results (anything recorded other than ``off``)."""
        return self.grounding is not None and self.grounding != GROUNDING_OFF


def _field(section: Any, key: str) -> str | None:
    value = section.get(key) if isinstance(section, Mapping) else getattr(section, key, None)
    return value if isinstance(value, str) and value else None


def truth_config(config: Any) -> TruthConfig:
    """The ``truth`` section of a run's configuration (a ``RunConfig``, or anything with such attributes), read as
    a mapping or typed section alike; a grounding recorded on the simulator's section is read where ``truth`` has
    none."""
    section = getattr(config, "truth", None)
    grounding = _field(section, "human_grounding")
    if grounding is None:
        simulator = getattr(config, "simulator", None)
        grounding = _field(simulator, "human_grounding") if simulator is not None else None
    return TruthConfig(_field(section, "policy"), _field(section, "checker"), grounding)


def simulator_label(name: Any, config: Any) -> Any:
    """The simulated human's name with its grounding where it had one (``gpt-4o (grounding exec)``): runs with and
    without grounding are never shown, grouped or compared as one simulator. ``name`` unchanged otherwise."""
    truth = truth_config(config)
    if not truth.grounded:
        return name
    return f"{name if name is not None else '?'} (grounding {truth.grounding})"


# -- one turn ---------------------------------------------------------------------------------------------------
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


def _span(raw: Any) -> tuple[int, int]:
    """``[start, end)`` as written when it is two integers, else ``(0, 0)`` (not placed in the text). Whether it
    lies inside the text is for whoever cuts the text to decide (``colbench.view.episode``)."""
    if (
        isinstance(raw, list | tuple)
        and len(raw) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
    ):
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


def is_checked(turn: Any) -> bool:
    """Whether a dialogue turn is a human reply the claims checker saw."""
    return isinstance(turn, Mapping) and turn.get("role") == "human" and isinstance(turn.get("claims"), list)


def turn_untrue(turn: Mapping[str, Any]) -> bool:
    """Whether the human's first draw of a checked turn held a false claim (see the module docstring)."""
    flag = turn.get("untrue")
    if isinstance(flag, bool):
        return flag
    draws = turn.get("truth_draws")
    if isinstance(draws, list) and draws and isinstance(draws[0], Mapping):
        return untrue(claims_of(draws[0].get("claims")))
    return untrue(claims_of(turn.get("claims")))


@dataclass(frozen=True)
class EpisodeTruth:
    """One episode's checked human replies and how many of them were untrue."""

    checked: int
    untrue: int


def episode_truth(dialogue: Iterable[Any] | None) -> EpisodeTruth | None:
    """The episode's counts; ``None`` when no reply of it was checked (an older run, or ``--truth-policy off``)."""
    replies = [turn for turn in dialogue or [] if is_checked(turn)]
    if not replies:
        return None
    return EpisodeTruth(len(replies), sum(turn_untrue(turn) for turn in replies))


def false_claim_lines(turn: Mapping[str, Any], limit: int = 200) -> list[str]:
    """One line per false claim of the reply the agent saw: ``CALL: said X, the reference gives Y (why)``."""
    lines = []
    for claim in claims_of(turn.get("claims")):
        if claim.verdict == "false":
            lines.append(_cut(claim_note(claim), limit))
    return lines


def claim_note(claim: Claim) -> str:
    """A claim in words: what was said and what the reference gives."""
    call = f"{claim.call}: " if claim.call else ""
    why = f" ({claim.why})" if claim.why else ""
    if claim.verdict == "unchecked":
        return f"{call}said {claim.stated}; not checked{why}"
    actual = "nothing comparable" if claim.actual is None else claim.actual
    return f"{call}said {claim.stated}, the reference gives {actual}{why}"


def _cut(text: str, limit: int) -> str:
    text = text.replace("\x00", "\ufffd").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
