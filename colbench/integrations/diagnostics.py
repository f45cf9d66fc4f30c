"""Per-step training diagnostics for any trainer: the signals that show a ColBench RL run collapsing before its
reward does.

The published ColBench RL run collapsed after the simulated human started dictating the answer, and the policy's
per-turn entropy rose 20-26x first. So each step logs, over the step's episodes: mean reward and success (lost
episodes left out, and counted apart), the leak rate, turns per episode, answer length, and the policy's mean token
entropy at sampling time per turn bucket (turn 1, turn 2, turns 3+). ``step_metrics`` is a plain function (any
trainer's loop); ``colbench.integrations.trl.DiagnosticsCallback`` logs it from TRL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from colbench.env.core import Transcript
from colbench.types.dialogue import after_marker
from colbench.types.sampled import SampledText

PREFIX = "colbench/"
ENTROPY_BUCKETS = ("turn_1", "turn_2", "turn_3+")


@dataclass(frozen=True)
class EpisodeOutcome:
    """One episode as the diagnostics see it. ``error`` (an infrastructure failure) makes it lost: it says nothing
    about the policy, so it is counted, never averaged in. ``turn_entropy[k]``: the policy's mean token entropy
    over agent turn k+1 as sampled (None where not measured)."""

    reward: float | None
    success: bool | None
    leaks: int
    turns: int
    answer_chars: int
    turn_entropy: tuple[float | None, ...] = ()
    error: str | None = None

    @property
    def lost(self) -> bool:
        return self.error is not None or self.reward is None


def outcome_of(transcript: Transcript, reward: float | None, *, error: str | None = None) -> EpisodeOutcome:
    """The outcome of a finished episode from its transcript (``vector_env.finished(i)``) and reward; the
    entropies come from its ``SampledText`` actions."""
    agent = [m["content"] for m in transcript.messages if m.get("role") == "assistant"]
    last = transcript.step_infos[-1] if transcript.step_infos else {}
    success = last.get("success")
    return EpisodeOutcome(
        reward=reward,
        success=None if success is None else bool(success),
        leaks=int(last.get("leaks") or 0),
        turns=len(agent),
        answer_chars=len(after_marker(str(agent[-1]))) if agent else 0,
        turn_entropy=tuple(a.entropy if isinstance(a, SampledText) else None for a in agent),
        error=error,
    )


def step_metrics(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float]:
    """One training step's diagnostics as flat ``colbench/...`` floats: ``episodes`` and ``lost`` (counts),
    ``reward``, ``success``, ``leak_rate`` (episodes with at least one leaked reply), ``turns``, ``answer_chars``
    over the scored episodes, and ``entropy/turn_1``, ``entropy/turn_2``, ``entropy/turn_3+`` over every measured
    agent turn of them. A mean with nothing to average is left out, never logged as 0."""
    scored = [o for o in outcomes if not o.lost]
    metrics = {f"{PREFIX}episodes": float(len(outcomes)), f"{PREFIX}lost": float(len(outcomes) - len(scored))}
    columns: dict[str, list[float]] = {
        "reward": [float(o.reward) for o in scored if o.reward is not None],
        "success": [float(o.success) for o in scored if o.success is not None],
        "leak_rate": [float(o.leaks > 0) for o in scored],
        "turns": [float(o.turns) for o in scored],
        "answer_chars": [float(o.answer_chars) for o in scored],
        **{f"entropy/{bucket}": [] for bucket in ENTROPY_BUCKETS},
    }
    for o in scored:
        for k, entropy in enumerate(o.turn_entropy):
            if entropy is not None and math.isfinite(entropy):
                columns[f"entropy/{ENTROPY_BUCKETS[min(k, 2)]}"].append(entropy)
    metrics.update({f"{PREFIX}{name}": sum(v) / len(v) for name, v in columns.items() if v})
    return metrics
