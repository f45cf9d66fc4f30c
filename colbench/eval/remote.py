"""Episodes played somewhere else while the harness writes every record: what the harness asks of a remote player
(the Ray layer's actors, :mod:`colbench.ray.eval_actors`, implement it above this layer, so a run without ``--ray``
never imports Ray) and run.json's note of where the episodes ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from colbench.eval.plan import RunPlan
from colbench.eval.player import EpisodePlayer, Played
from colbench.types.task import Task


class RemoteEpisodes(Protocol):
    """Episodes played somewhere else (another process, a cluster), their records returned to the driver."""

    async def play(self, task: Task, trial: int) -> Played: ...

    def close(self) -> None: ...


RemoteFactory = Callable[[RunPlan, str, list[Task], EpisodePlayer], RemoteEpisodes]
"""Builds the remote players of a run: (config, domain name, the run's tasks, the driver's own player)."""


def ray_runtime(config: RunPlan) -> dict[str, Any]:
    """run.json's note of where episodes ran (never compared on resume: a run may go on with or without Ray)."""
    if config.ray is None:
        return {}
    return {"ray": config.ray or "default", "ray_workers": config.ray_workers}
