"""Adapters for the RL frameworks people train with, each needing only its own optional extra (``pip install
'colbench[trl]'``), pinned to the version its tests run against (docs/integrations.md): one module per framework
(TRL has two, ``trl`` for ``rollout_func`` and ``trl_environment`` for ``environment_factory``, and
``chatml_tools`` gives a local ChatML model tool calls), and ``diagnostics`` for any trainer's loop;
``inspect_tasks`` makes the benchmark an evaluation of Inspect's (``inspect eval colbench/backend``).

Every adapter keeps the same promises: the simulated human's tokens are never trained on (only the policy's turns
carry a loss mask of 1), the simulated human runs on its own endpoint (never the policy's), an infrastructure failure
is never scored as the policy's failure (how each framework lets it be left out: docs/integrations.md), and
episodes share the process's scorer and reference cache.
"""
