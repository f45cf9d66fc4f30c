"""Evaluation: run an agent on ColBench tasks into a run directory (docs/run-format.md), resume it, read it.

``colbench eval`` is :func:`run_eval`; ``docs/evaluation.md`` is the guide.
"""

from __future__ import annotations

from colbench.eval.progress import Tally
from colbench.eval.ratelimit import EndpointLimits, Gate, TokenBucket
from colbench.eval.records import EPISODES, RUN_JSON, latest, read_episodes, read_run_json
from colbench.eval.runner import EvalConfig, EvalResult, run_eval

__all__ = [
    "EPISODES",
    "RUN_JSON",
    "EndpointLimits",
    "EvalConfig",
    "EvalResult",
    "Gate",
    "Tally",
    "TokenBucket",
    "latest",
    "read_episodes",
    "read_run_json",
    "run_eval",
]
