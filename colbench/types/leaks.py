"""Leaks of the hidden information through the simulated human, and what an episode does about them.

Each domain scores a reply against its task's hidden information (``Domain.leak_score``, in [0, 1]) and flags it
at ``Domain.leak_threshold``. The detectors live with their domains (``domains/backend/leaks.py``,
``domains/frontend/leaks.py``); this module holds what every domain shares: the policy an env applies to
a flagged reply before the agent sees it, and the record of a labelled reply the detectors are measured on.

Policies (``--leak-policy``, env kwarg ``leak_policy``):

- ``off``: not measured;
- ``flag`` (default): measured and recorded, the agent sees the reply;
- ``redact``: a flagged reply is replaced by ``REDACTED``: the agent never sees the leaked text;
- ``resample:N``: the human is asked again, up to N times, with ``RESAMPLE_NOTE`` added to its instructions for
  this turn; a reply still flagged after N tries is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import ClassVar

from colbench.types.reply_policy import ReplyPolicy

REDACTED = "[The person's reply was withheld: it gave away the hidden answer. Ask about what they need instead.]"
RESAMPLE_NOTE = (
    "Your last answer gave away the solution itself (code or markup). Answer the same question again in plain "
    "everyday words: state facts and preferences, never code, markup, class names or formulas written as code."
)
POLICY_HELP = "off | flag (default: measure and record) | redact (withhold flagged replies) | resample:N"


@dataclass(frozen=True)
class LeakPolicy(ReplyPolicy):
    """What an env does with a simulated human's reply that leaks (see the module docstring): ``off``, ``flag``,
    ``redact`` or ``resample:N`` (N from 1 to 10); ``parse(None)`` is the default, ``flag``."""

    name: ClassVar[str] = "leak policy"
    modes: ClassVar[tuple[str, ...]] = ("off", "flag", "redact")

    @property
    def measured(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True)
class Labelled:
    """A reply with its label (``leak``) and how it was made (``kind``): one row of a detector's labelled set."""

    reply: str
    leak: bool
    kind: str


@dataclass(frozen=True)
class LeakCheck:
    """What the leak policy found and did for one human turn (kept in the dialogue and the run record).

    ``scores``: one per reply asked for (more than one under ``resample``); ``leak``: the first reply, the human's
    answer to what the agent said, was flagged; ``action``: ``shown`` (the agent saw the human's reply),
    ``resampled`` (a later reply was clean and shown) or ``redacted``; ``withheld``: the flagged replies the agent
    did not see; ``spans``: the character ranges of the first reply its score comes from (``Domain.leak_spans``),
    so a reader can see what was flagged without running the detector again.
    """

    scores: tuple[float, ...]
    leak: bool
    action: str
    withheld: tuple[str, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def score(self) -> float:
        return self.scores[0]

    def as_dict(self) -> dict[str, object]:
        return {
            "leak_score": self.score,
            "leak": self.leak,
            "leak_action": self.action,
            "leak_scores": list(self.scores),
            "withheld": list(self.withheld),
            "leak_spans": [list(span) for span in self.spans],
        }


_WORDS = re.compile(r"\w+")


def word_overlap(reply: str, hidden: str, public: str = "") -> float:
    """A domain-neutral leak score: the longest run of the hidden information's words that the reply repeats and
    the public text does not show, ``(words - 4) / 8`` clipped to [0, 1] (eight words in a row reach 0.5)."""
    longest, _ = _longest_run(reply, hidden, public)
    return round(min(1.0, max(0.0, (longest - 4) / 8)), 4)


def word_overlap_spans(reply: str, hidden: str, public: str = "") -> list[tuple[int, int]]:
    """The characters of ``reply`` that ``word_overlap`` scores: its longest private run, where it scores."""
    longest, span = _longest_run(reply, hidden, public)
    return [span] if longest > 4 and span is not None else []


def _longest_run(reply: str, hidden: str, public: str) -> tuple[int, tuple[int, int] | None]:
    found = list(_WORDS.finditer(reply))
    said = [w.group().lower() for w in found]
    secret = [w.lower() for w in _WORDS.findall(hidden)]
    shown = " ".join(w.lower() for w in _WORDS.findall(public))
    longest, span = 0, None
    for block in SequenceMatcher(None, said, secret, autojunk=False).get_matching_blocks():
        if block.size > longest and " ".join(secret[block.b : block.b + block.size]) not in shown:
            longest, span = block.size, (found[block.a].start(), found[block.a + block.size - 1].end())
    return longest, span


def weighted_runs(
    said: Sequence[str], tokens: Sequence[str], weights: Sequence[float], min_run: int
) -> tuple[float, float, list[tuple[int, int]]]:
    """What a reply's tokens ``said`` share with a reference's ``tokens`` (each of weight ``weights[i]``), as both
    code detectors score it: the weight of the heaviest shared run, the weight the runs of at least ``min_run``
    tokens cover, and the token ranges of ``said`` the score comes from (those runs where they weigh anything, then
    the heaviest where it scores: a weight over 3, the ``(weight - 3) / 6`` of the detectors)."""
    matcher = SequenceMatcher(None, said, list(tokens), autojunk=False)
    heaviest = covered = 0.0
    runs: list[tuple[int, int]] = []
    top: tuple[int, int] | None = None
    for block in matcher.get_matching_blocks():
        weight = sum(weights[block.b : block.b + block.size])
        if weight > heaviest:
            heaviest, top = weight, (block.a, block.a + block.size)
        if block.size >= min_run:
            covered += weight
            if weight:
                runs.append((block.a, block.a + block.size))
    if heaviest > 3 and top is not None:
        runs.append(top)
    return heaviest, covered, runs


def merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character ranges sorted, with those that overlap or touch made one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
