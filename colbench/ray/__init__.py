"""ColBench on a Ray cluster (the ``ray`` extra; docs/scale.md).

* ``colbench eval --ray [ADDRESS]`` plays episodes in actors across the cluster (:mod:`colbench.ray.eval_actors`);
* ``colbench score ... --ray [ADDRESS]`` scores answers there (:mod:`colbench.ray.score_actors`);
* :class:`RayVectorEnv` is a vector env whose sub-envs step in actors on CPU nodes while the learner runs elsewhere.

Nodes offer ColBench work through the ``colbench_sandbox`` resource (:mod:`colbench.ray.cluster`); the driver
alone writes results, and work whose actor is lost runs again elsewhere (:mod:`colbench.ray.workers`). Importing
this package imports Ray; nothing else in colbench does.
"""

from __future__ import annotations

from colbench.ray.cluster import RESOURCE, connect
from colbench.ray.vector_env import RayVectorEnv

__all__ = ["RESOURCE", "RayVectorEnv", "connect"]
