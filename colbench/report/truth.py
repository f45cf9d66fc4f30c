"""The simulated human's claims as a run directory records them, read for the reports and the viewer.

Since the claims checker (``colbench.types.claims``, DESIGN.md section 9), every human turn of an episode's
dialogue carries what it found (read, leniently, as ``colbench.runs.turns.DialogueTurn``), and run.json has a
``truth`` section: ``{"policy", "checker", "human_grounding"}``. Runs written before have none of these: a turn
without ``claims`` was **not checked** (never "no false claim"), and a run without any checked reply has no figure
(``-``).

What counts (the figures of ``colbench report`` and ``colbench view``):

- a reply is *checked* when its turn carries a ``claims`` list (the policy was not ``off``);
- a checked reply is *untrue* when the human's first draw held a false claim (the record's ``untrue``; read from the
  first draw's claims where a hand-written record lacks it): what the human said before any resampling, as the leak
  rate counts what the human wrote whatever the leak policy then did;
- an episode is checked when at least one of its replies is, and untrue when at least one is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from colbench.runs.turns import DialogueTurn
from colbench.runs.turns import claims_of as claims_of  # read by the viewer's tests of hostile claims
from colbench.types.claims import Claim

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


@dataclass(frozen=True)
class EpisodeTruth:
    """One episode's checked human replies and how many of them were untrue."""

    checked: int
    untrue: int


def episode_truth(turns: Iterable[DialogueTurn]) -> EpisodeTruth | None:
    """The episode's counts; ``None`` when no reply of it was checked (an older run, or ``--truth-policy off``)."""
    replies = [turn for turn in turns if turn.checked]
    if not replies:
        return None
    return EpisodeTruth(len(replies), sum(turn.untrue for turn in replies))


def false_claim_lines(turn: DialogueTurn, limit: int = 200) -> list[str]:
    """One line per false claim of the reply the agent saw: ``CALL: said X, the reference gives Y (why)``."""
    return [_cut(claim_note(claim), limit) for claim in turn.claims or () if claim.verdict == "false"]


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
