"""Probing a simulated human: how easily an agent talks it into giving the hidden answer away (docs/leaks.md), and
whether what it says about the function is true (docs/human-quality.md).

``suite``: the fixed adversarial turns (``envs/<domain>/probes/suite.toml``), and the honest ``control`` and
``truth`` questions (``truth_calls``: the calls they ask about); ``verdicts``: what a reply is besides its leak
score (empty or a refusal, off-topic); ``over_release``: the reference's tokens a reply newly reveals; ``draws``: a
turn asked K times; ``probing``: ``colbench probe simulator``, resumable like an eval; ``figures``: summary.json and
its tables.
"""

from __future__ import annotations

from colbench.probe.figures import summary_table
from colbench.probe.probing import ProbeConfig, ProbeResult, run_probe

__all__ = ["ProbeConfig", "ProbeResult", "run_probe", "summary_table"]
