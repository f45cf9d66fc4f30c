"""Selection: each candidate reply judged by the checks colbench trusts, the best kept, every drop explained.

:class:`Judge` scores candidates, nothing more (``kept`` is False on every one):

- **leak**: the domain's own detector (``Domain.leak_score``, the env's leak policy's) at its threshold (or one
  given);
- **claims**: the domain's claims checker (``Domain.claim_checker`` through :func:`colbench.env.claim_check.
  check_rows`: one reference run per task for all of a prefix's candidates), the agent's turn as the question;
  ``false_claims`` / ``true_claims`` count the verdicts the reference settled;
- **over-release**: the reference's tokens the reply newly reveals (:mod:`colbench.probe.over_release`: not in
  the description nor in any turn of the prefix);
- **empty**: blank, or only whitespace and punctuation (no letter or digit);
- **off-topic**, conservatively (a reply that is merely brief or unsure is never off-topic): not empty, not a
  refusal (:func:`colbench.probe.verdicts.empty_or_refusal`), no question mark, no digit, no answer or preference
  word (yes, no, sure, fine, whatever, either, maybe, prefer, ...), and no content word (four letters or more,
  not filler) shared with the task's description, its hidden information or any turn of the prefix
  (:func:`colbench.probe.verdicts.off_topic`'s words);
- **refusal** (recorded, not vetoed: "I'm not sure" is an honest answer): ``empty_or_refusal`` of a reply that has
  a letter (the probe's rule, whose "no letter is empty" would call "42" a refusal).

:func:`select` then keeps, per prefix, in this order: veto a leak; veto a false claim; veto an empty or off-topic
reply; where any survivor makes a checked true claim, prefer those; then the lowest over-release. Every candidate
tied at the best is kept (not only one); each dropped one says why (``dropped``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from colbench.env.claim_check import ClaimChecker, check_rows
from colbench.env.domain import Domain, Scorer
from colbench.env.versions import scoring_options
from colbench.errors import ConfigError
from colbench.humans.simulator import Simulator
from colbench.probe.over_release import reference_tokens, revealed
from colbench.probe.verdicts import empty_or_refusal, off_topic
from colbench.simtrain.prefixes import Prefix, env_domain
from colbench.simtrain.sampling import Candidate, human_chat
from colbench.types.claims import Claim

LEAK, FALSE_CLAIM, EMPTY, OFF_TOPIC = "leak", "false claim", "empty", "off-topic"
MORE_OVER_RELEASE = "more over-release than the best"
NO_TRUE_CLAIM = "no checked true claim while another has one"
DROP_REASONS = (LEAK, FALSE_CLAIM, EMPTY, OFF_TOPIC, NO_TRUE_CLAIM, MORE_OVER_RELEASE)
"""Why a candidate is dropped, in the order the checks apply."""
_CONTENT = re.compile(r"[^\W_]")
_ANSWER_WORD = re.compile(
    r"\b(?:yes|yeah|yep|no|nope|not|sure|correct|right|wrong|exactly|ok(?:ay)?|fine|whatever|either|neither|both|"
    r"none|any|maybe|probably|prefer|default|depends)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Judged:
    """A candidate and what the checks found (module docstring); ``kept`` and ``dropped`` are :func:`select`'s
    (``dropped`` is "" when kept, else one of ``DROP_REASONS``). Added beside the interface's fields: ``empty``,
    ``off_topic``, ``refusal`` (the parts of ``empty_or_off_topic``, and the refusal evaluation counts),
    ``leak_score``, ``claims`` (the verdicts) and ``revealed`` (the tokens over-release counts)."""

    candidate: Candidate
    leaked: bool
    false_claims: int
    true_claims: int
    over_release: int
    empty_or_off_topic: bool
    kept: bool = False
    dropped: str = ""
    empty: bool = False
    off_topic: bool = False
    refusal: bool = False
    leak_score: float = 0.0
    claims: tuple[Claim, ...] = ()
    revealed: tuple[str, ...] = ()

    @property
    def veto(self) -> str:
        """The first veto that applies ("" when none does)."""
        if self.leaked:
            return LEAK
        if self.false_claims:
            return FALSE_CLAIM
        if self.empty:
            return EMPTY
        if self.off_topic or self.empty_or_off_topic:
            return OFF_TOPIC
        return ""


def is_empty(text: str) -> bool:
    """Blank, or only whitespace and punctuation: no letter or digit."""
    return not _CONTENT.search(text)


def is_refusal(text: str) -> bool:
    """The probe's refusal (the human cannot, will not or does not know), for a reply with a letter."""
    return bool(re.search(r"[A-Za-z]", text)) and empty_or_refusal(text)


def is_off_topic(text: str, prefix: Prefix) -> bool:
    """The conservative off-topic rule of the module docstring."""
    if is_empty(text) or is_refusal(text) or "?" in text or re.search(r"\d", text) or _ANSWER_WORD.search(text):
        return False
    said = "\n".join([prefix.task.problem_description, *(t.text for t in prefix.dialogue)])
    return off_topic(text, replace(prefix.task, problem_description=said))


class Judge:
    """The checks of one env id's domain, made once: its leak detector (``leak_threshold``: None, the domain's),
    its claims checker over the env id's scorer (``sandbox``: the runtime, None for ``auto``; the process's shared
    scorer, made only when a claim needs running) and the reference vocabulary of over-release."""

    def __init__(self, env_id: str, *, sandbox: str | None = None, leak_threshold: float | None = None) -> None:
        self.env_id = env_id
        self.domain: Domain = env_domain(env_id)
        self.leak_threshold = self.domain.leak_threshold if leak_threshold is None else float(leak_threshold)
        if not 0 < self.leak_threshold <= 1:
            raise ConfigError(f"leak_threshold must be in (0, 1], got {leak_threshold}")
        options: dict[str, Any] = {**scoring_options(env_id), "sandbox": sandbox or "auto"}
        self._scorer: Scorer | None = None

        def scorer() -> Scorer:
            if self._scorer is None:
                self._scorer = self.domain.shared_scorer(options)
            return self._scorer

        self.checker: ClaimChecker = self.domain.claim_checker(scorer)

    def judge(self, prefix: Prefix, texts: Sequence[str | Candidate]) -> list[Judged]:
        """Every candidate of ``prefix`` scored (``kept`` False on all: :func:`select` decides). A text is taken as
        draw ``i`` of the prefix; a :class:`Candidate` must be of this prefix."""
        key = prefix.key()
        candidates = [t if isinstance(t, Candidate) else Candidate(key, i, t) for i, t in enumerate(texts)]
        other = next((c for c in candidates if c.prefix != key), None)
        if other is not None:
            raise ConfigError(f"candidate of prefix {other.prefix} judged against prefix {key} ({prefix.source})")
        task = prefix.task
        if task.domain != self.domain.name:
            raise ConfigError(f"prefix {prefix.source} is a {task.domain} task; the judge is {self.env_id}'s")
        verdicts = check_rows(self.checker, [(task, c.text, prefix.question) for c in candidates])
        vocabulary = reference_tokens(task.ground_truth)
        context = [task.problem_description, *(t.text for t in prefix.dialogue)]
        out = []
        for candidate, claims in zip(candidates, verdicts, strict=True):
            text = candidate.text
            score = self.domain.leak_score(task, text)
            empty, stray = is_empty(text), is_off_topic(text, prefix)
            shown = tuple(revealed(vocabulary, text, context))
            out.append(
                Judged(
                    candidate=candidate,
                    leaked=score >= self.leak_threshold,
                    false_claims=sum(c.verdict == "false" for c in claims),
                    true_claims=sum(c.verdict == "true" for c in claims),
                    over_release=len(shown),
                    empty_or_off_topic=empty or stray,
                    empty=empty,
                    off_topic=stray,
                    refusal=is_refusal(text),
                    leak_score=score,
                    claims=tuple(claims),
                    revealed=shown,
                )
            )
        return out


def select(judged: Sequence[Judged]) -> list[Judged]:
    """``judged`` in order with ``kept`` and ``dropped`` set, each prefix's candidates decided together (module
    docstring): the vetoes, then a checked true claim preferred, then the lowest over-release; all ties kept."""
    decided: dict[int, Judged] = {}
    groups: dict[str, list[int]] = {}
    for i, j in enumerate(judged):
        groups.setdefault(j.candidate.prefix, []).append(i)
    for indices in groups.values():
        alive = []
        for i in indices:
            veto = judged[i].veto
            if veto:
                decided[i] = replace(judged[i], kept=False, dropped=veto)
            else:
                alive.append(i)
        if any(judged[i].true_claims for i in alive):
            for i in [i for i in alive if not judged[i].true_claims]:
                decided[i] = replace(judged[i], kept=False, dropped=NO_TRUE_CLAIM)
            alive = [i for i in alive if judged[i].true_claims]
        best = min((judged[i].over_release for i in alive), default=0)
        for i in alive:
            if judged[i].over_release > best:
                decided[i] = replace(judged[i], kept=False, dropped=MORE_OVER_RELEASE)
            else:
                decided[i] = replace(judged[i], kept=True, dropped="")
    return [decided[i] for i in range(len(judged))]


def sft_rows(prefix: Prefix, kept: Sequence[Judged], simulator: Simulator) -> list[dict[str, Any]]:
    """One TRL SFT row per kept candidate of ``prefix`` (those not kept are skipped): the human's request
    (:func:`~colbench.simtrain.sampling.human_chat`) and the reply as the assistant turn, so a trainer with
    assistant-only loss learns the reply alone, on the very prompt the env will send."""
    key = prefix.key()
    chosen = [j for j in kept if j.kept]
    other = next((j for j in chosen if j.candidate.prefix != key), None)
    if other is not None:
        raise ConfigError(f"kept candidate of prefix {other.candidate.prefix} given for prefix {key} ({prefix.source})")
    if not chosen:
        return []
    chat = [dict(m) for m in human_chat(prefix, simulator)]
    return [{"messages": [*chat, {"role": "assistant", "content": j.candidate.text}]} for j in chosen]
