"""Adapters for the RL frameworks people train with: one module per framework, each needing only its own optional
extra (``pip install 'colbench[trl]'``), pinned to the version its tests run against (docs/integrations.md).

Every adapter keeps the same promises: the simulated human's tokens are never trained on (only the policy's turns
carry a loss mask of 1), the simulated human runs on its own endpoint (never the policy's), an infrastructure failure
is dropped rather than scored, and episodes share the process's scorer and reference cache.
"""
