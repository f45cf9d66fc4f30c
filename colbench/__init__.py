"""colbench: ColBench as Gymnasium environments with sandboxed, unhackable scoring.

Importing the package registers the environments, so ``gym.make("ColBench-Backend-v0")`` works after
``import colbench`` and ``gym.make("colbench:ColBench-Backend-v0")`` works without it.
"""

from __future__ import annotations

from colbench.env.registration import register_envs

__version__ = "0.1.0"

register_envs()
