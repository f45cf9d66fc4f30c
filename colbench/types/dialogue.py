"""The dialogue of an episode: its turns, the answer marker and the turn cap, shared by envs, agents, simulators
and scorers (the episode contract of docs/episode.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from colbench.types.sampled import turn_record

if TYPE_CHECKING:
    from colbench.types.claims import TruthCheck
    from colbench.types.leaks import LeakCheck

MAX_TURNS = 10
ANSWER_MARKER = "I WANT TO ANSWER:"
"""Case-sensitive, as in the original release: the agent's turn that contains it ends the episode."""


@dataclass(frozen=True)
class Turn:
    """One message of the dialogue. ``image`` is the PNG of the page an agent turn produced (frontend only);
    ``leak`` is what the leak policy found and did on a human turn (None when not measured); ``truth``, what the
    claims checker found in it and what the truth policy did (None when not checked)."""

    role: Literal["agent", "human"]
    text: str
    image: bytes | None = field(default=None, repr=False)
    leak: LeakCheck | None = None
    truth: TruthCheck | None = None

    def row(self) -> dict[str, Any]:
        """The turn as a run's records keep it (docs/run-format.md): role, text, the ids an agent sampled
        (``types.sampled.turn_text`` reads them back), what the leak and truth checks found."""
        leak, truth = self.leak.as_dict() if self.leak else {}, self.truth.as_dict() if self.truth else {}
        return {"role": self.role, "text": self.text, **turn_record(self.text), **leak, **truth}


def is_answer(text: str) -> bool:
    """Whether an agent's turn delivers its final answer."""
    return ANSWER_MARKER in text


def after_marker(text: str) -> str:
    """The text after the first answer marker; the whole text when there is none (an answer at the turn cap)."""
    return text.split(ANSWER_MARKER, 1)[1] if ANSWER_MARKER in text else text
