"""Run directories: the one place that reads and writes them (docs/run-format.md), for ``colbench eval`` (writing,
resuming) and ``colbench report`` (reading) alike.

- ``run.json``: :class:`RunConfig` (``RunConfig.read``, ``.write``; what a resume compares: ``.compared_view``).
- ``episodes.jsonl``: :func:`read_episode_log`, :class:`EpisodeWriter`; which record counts: :func:`final_records`.
- a whole directory: :func:`load_run` -> :class:`Run`.
- a run's answers scored again under another env id, into a new directory: ``colbench.runs.rescore`` (imported on
  its own: it loads the scorers' layer below, which reading runs does not need).
"""

from __future__ import annotations

from colbench.runs.directory import ROLES, Run, load_run
from colbench.runs.episodes import (
    EpisodeKey,
    EpisodeLog,
    EpisodeRecord,
    EpisodeWriter,
    counted,
    final_records,
    parse_record,
    read_episode_log,
)
from colbench.runs.layout import (
    CACHE,
    EPISODES,
    LOCK,
    LOG_FILE,
    RUN_JSON,
    SCREENS,
    TASKS_SNAPSHOT,
    check_out_dir,
    lock_run_dir,
    reference_screenshot_name,
    safe_relative,
    screenshot_name,
    turn_screenshot_name,
)
from colbench.runs.run_json import (
    FORMAT,
    NOT_COMPARED,
    LeaksSection,
    RoleSection,
    RunConfig,
    TasksSection,
    TruthSection,
    first_difference,
)
from colbench.runs.task_snapshot import read_task_snapshot, write_task_snapshot
from colbench.runs.turns import DialogueTurn

__all__ = [
    "CACHE",
    "EPISODES",
    "FORMAT",
    "LOCK",
    "LOG_FILE",
    "NOT_COMPARED",
    "ROLES",
    "RUN_JSON",
    "SCREENS",
    "TASKS_SNAPSHOT",
    "DialogueTurn",
    "EpisodeKey",
    "EpisodeLog",
    "EpisodeRecord",
    "EpisodeWriter",
    "LeaksSection",
    "RoleSection",
    "Run",
    "RunConfig",
    "TasksSection",
    "TruthSection",
    "check_out_dir",
    "counted",
    "final_records",
    "first_difference",
    "load_run",
    "lock_run_dir",
    "parse_record",
    "read_episode_log",
    "read_task_snapshot",
    "reference_screenshot_name",
    "safe_relative",
    "screenshot_name",
    "turn_screenshot_name",
    "write_task_snapshot",
]
