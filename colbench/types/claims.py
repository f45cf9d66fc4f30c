"""What the simulated human claims, whether it is true, and what an episode does about a false claim.

A *claim* is something the human said that running the reference can settle: backend, a call of the task's
function with literal arguments and a stated value (``f(2, 3) should return 5``, or "It should be 3." answering
"What should f(1, 2) return?"); frontend, text the human quotes as shown on the page it wants. Each domain finds
and settles its claims (``Domain.claim_checker``); this module holds the records every domain shares and the
policy an env applies to a reply holding a false claim.

A verdict comes only from running the reference (or reading the reference page), never from a model's opinion:

- ``true``: the reference gives the stated value (by the scorer's own equality);
- ``false``: it gives another value;
- ``unchecked``: the reference raised, timed out or is nondeterministic there, the call is not literal, or the
  stated value cannot be read: never ``false``.

Policies (``--truth-policy``, env kwarg ``truth_policy``):

- ``off``: not checked;
- ``flag`` (default): checked and recorded, the agent sees the reply;
- ``resample`` / ``resample:N``: while a reply holds a false claim, the human is asked again (``RESAMPLE_NOTE``
  added to its instructions for this turn), up to N more draws (default 3); every draw is recorded, and the agent
  sees the first draw without a false claim, else the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from colbench.errors import ConfigError
from colbench.types.reply_policy import ReplyPolicy

Verdict = Literal["true", "false", "unchecked"]
VERDICTS: tuple[Verdict, ...] = ("true", "false", "unchecked")
TRUTH_HELP = "off | flag (default: check and record) | resample[:N] (ask again while a reply says something false)"
GROUNDING = ("off", "exec")
GROUNDING_HELP = "off (default) | exec (the human is told the reference's results for a few calls of the agent's turn)"
GROUNDED_CALLS = 3
"""Calls of one agent turn a grounded human is told the results of: a human answers a few examples, not a table
an agent could fit."""
DEFAULT_RESAMPLES = 3
RESAMPLE_NOTE = (
    "In your last answer you stated what the function returns for a call, and that is not what it returns: {wrong}. "
    "Answer the same message again: say only what you are sure of from the code, or say you are not sure."
)


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a reply: ``span`` (``[start, end)`` in the reply) is where it was said, ``call``
    the call it is about (backend) or the page it is about (frontend: ``page``), ``stated`` what the human said it
    gives (as written, or as read: a value's ``repr``), ``actual`` what the reference gives (``repr``, cut; None when
    it gave nothing comparable), ``verdict`` ``true`` | ``false`` | ``unchecked``, ``why`` in a few words."""

    span: tuple[int, int]
    call: str
    stated: str
    actual: str | None
    verdict: Verdict
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "span": list(self.span),
            "call": self.call,
            "stated": self.stated,
            "actual": self.actual,
            "verdict": self.verdict,
            "why": self.why,
        }


def untrue(claims: Sequence[Claim]) -> bool:
    """Whether any claim is false (an unchecked claim is never held against the human)."""
    return any(c.verdict == "false" for c in claims)


def checked(claims: Sequence[Claim]) -> int:
    """Claims the reference settled (true or false)."""
    return sum(c.verdict != "unchecked" for c in claims)


def claims_json(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    return [c.as_dict() for c in claims]


@dataclass(frozen=True)
class TruthPolicy(ReplyPolicy):
    """What an env does with a human reply that holds a false claim (see the module docstring): ``off``, ``flag``,
    ``resample`` (``DEFAULT_RESAMPLES`` draws) or ``resample:N`` (N from 1 to 10); ``parse(None)`` is the default,
    ``flag``."""

    name: ClassVar[str] = "truth policy"
    modes: ClassVar[tuple[str, ...]] = ("off", "flag")
    default_retries: ClassVar[int | None] = DEFAULT_RESAMPLES

    @property
    def checked(self) -> bool:
        return self.mode != "off"


def parse_grounding(value: object, where: str = "human_grounding") -> str:
    """``off`` or ``exec`` (None is ``off``): a ConfigError naming ``where`` otherwise."""
    if value is None:
        return "off"
    if isinstance(value, str) and value.strip().lower() in GROUNDING:
        return value.strip().lower()
    raise ConfigError(f"{where} {value!r}: expected one of {', '.join(GROUNDING)}")


@dataclass(frozen=True)
class Grounded:
    """One call of the agent's turn run on the reference for a grounded human: what the human was privately told.
    ``result``: what the call gives ("returns 5", "raises an error: ..."); ``said`` and ``right``: where the agent
    stated what the call gives, that value and whether the reference agrees (None where it stated none)."""

    call: str
    result: str
    said: str = ""
    right: bool | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"call": self.call, "result": self.result}
        if self.right is not None:
            out.update(said=self.said, right=self.right)
        return out

    def told(self) -> str:
        """The line the human reads."""
        line = f"{self.call} {self.result}"
        if self.right is not None:
            line += f" (the assistant's value {self.said} is {'right' if self.right else 'WRONG'})"
        return line


@dataclass(frozen=True)
class TruthCheck:
    """What the truth policy found and did for one human turn (kept in the dialogue and the run record).

    ``draws``: each reply asked for, in order, with its claims (more than one under ``resample``); ``untrue``: the
    first draw, the human's answer to what the agent said, held a false claim; ``claims``: those of the draw the
    agent saw (its spans index the turn's text); ``shown``: the index of that draw (None: the leak policy withheld
    it); ``action``: ``shown`` (the first draw), ``resampled`` (a later one) or ``withheld``; ``grounding``: what a
    grounded human was told before replying (never shown to the agent)."""

    draws: tuple[tuple[str, tuple[Claim, ...]], ...]
    shown: int | None = 0
    grounding: tuple[Grounded, ...] = ()

    @property
    def claims(self) -> tuple[Claim, ...]:
        """The claims of the reply the agent saw (none when the leak policy withheld every draw)."""
        return () if self.shown is None else self.draws[self.shown][1]

    @property
    def untrue(self) -> bool:
        return untrue(self.draws[0][1])

    @property
    def action(self) -> str:
        return "withheld" if self.shown is None else "resampled" if self.shown else "shown"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "claims": claims_json(self.claims),
            "untrue": self.untrue,
            "truth_action": self.action,
        }
        if len(self.draws) > 1:
            out["truth_draws"] = [{"reply": text, "claims": claims_json(claims)} for text, claims in self.draws]
            out["truth_shown"] = self.shown
        if self.grounding:
            out["grounding"] = [g.as_dict() for g in self.grounding]
        return out
