"""An agent's turn as the policy sampled it: still the text the env takes as its action, plus the token ids (and
log-probs) the policy drew, so that a trainer trains on exactly those and not on a re-tokenization of the text
(which can differ: ``]`` and ``*`` sampled as two tokens come back as one ``]*``).

``SampledText`` is a ``str``: Gymnasium's text spaces, ``check_env`` and every wrapper pass it through ``step``
untouched, and the env keeps it in the transcript and the run records, from which ``colbench.env.tokens`` reads
the ids back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from colbench.errors import ConfigError


class SampledText(str):
    """``text`` with the ``token_ids`` the policy sampled for it (its end-of-turn token last, when it emitted
    one), their ``logprobs`` under the sampling distribution when known, ``truncated`` when the turn was cut at
    the token limit (no end-of-turn token among the ids) and ``entropy``, the policy's mean token entropy while it
    sampled the turn (for diagnostics; None when not measured)."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    truncated: bool
    entropy: float | None

    def __new__(
        cls,
        text: str,
        token_ids: Sequence[int],
        logprobs: Sequence[float] | None = None,
        *,
        truncated: bool = False,
        entropy: float | None = None,
    ) -> SampledText:
        ids = tuple(int(t) for t in token_ids)
        if not ids:
            raise ConfigError("SampledText: token_ids is empty (a sampled turn has at least one token)")
        logps = None if logprobs is None else tuple(float(x) for x in logprobs)
        if logps is not None and len(logps) != len(ids):
            raise ConfigError(f"SampledText: {len(logps)} logprobs for {len(ids)} token_ids")
        if entropy is not None and not math.isfinite(entropy):
            raise ConfigError(f"SampledText: entropy {entropy} is not a finite number")
        made = super().__new__(cls, text)
        made.token_ids, made.logprobs, made.truncated, made.entropy = ids, logps, bool(truncated), entropy
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        # str's own pickling would call __new__ with the text alone (vector env workers, Ray ship actions)
        return (SampledText.from_record, (str(self), self.as_record()))

    def as_record(self) -> dict[str, Any]:
        """What a run record or a JSON transcript keeps beside the turn's text (``from_record`` reads it back)."""
        return {
            "token_ids": list(self.token_ids),
            "logprobs": None if self.logprobs is None else list(self.logprobs),
            "truncated": self.truncated,
            "entropy": self.entropy,
        }

    @classmethod
    def from_record(cls, text: str, record: Mapping[str, Any]) -> SampledText:
        """The turn ``as_record`` wrote beside ``text``."""
        try:
            return cls(
                text,
                record["token_ids"],
                record.get("logprobs"),
                truncated=bool(record.get("truncated", False)),
                entropy=record.get("entropy"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a sampled turn's record is malformed ({exc!r}): {dict(record)!r:.200}") from exc


def turn_record(text: str) -> dict[str, Any]:
    """The ``sampled`` entry a dialogue record carries for a turn the policy sampled (nothing for plain text)."""
    return {"sampled": text.as_record()} if isinstance(text, SampledText) else {}


def turn_text(entry: Mapping[str, Any]) -> str:
    """A dialogue record's turn text (``{"text": ..., "sampled": ...}``), as a ``SampledText`` when it has ids."""
    text = str(entry.get("text", ""))
    sampled = entry.get("sampled")
    return SampledText.from_record(text, sampled) if isinstance(sampled, Mapping) else text
