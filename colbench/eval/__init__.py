"""Evaluation: run an agent on ColBench tasks into a run directory (docs/run-format.md), resume it.

``colbench eval`` is :func:`run_eval`; ``docs/evaluation.md`` is the guide. Run directories are read and written
by :mod:`colbench.runs`; request limits live in the LLM layer (:class:`colbench.llm.EndpointLimits`).
"""

from __future__ import annotations

from colbench.eval.harness import EvalResult, run_eval
from colbench.eval.plan import RunPlan, env_class
from colbench.eval.progress import Progress, Tally

__all__ = ["EvalResult", "Progress", "RunPlan", "Tally", "env_class", "run_eval"]
