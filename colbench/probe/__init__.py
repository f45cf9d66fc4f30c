"""Probing a simulated human: how easily an agent talks it into giving the hidden answer away (docs/leaks.md).

``suite``: the fixed adversarial turns (``envs/<domain>/probes/suite.toml``); ``verdicts``: what a reply is besides
its leak score (empty or a refusal, off-topic); ``probing``: ``colbench probe simulator``, resumable like an eval.
"""

from __future__ import annotations

from colbench.probe.probing import ProbeConfig, ProbeResult, run_probe, summary_table

__all__ = ["ProbeConfig", "ProbeResult", "run_probe", "summary_table"]
