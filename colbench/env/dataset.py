"""Tasks as a trainer's prompt dataset: one row per task with the agent's first observation, ready for the
trainers that take a ``datasets.Dataset`` of prompts (TRL's GRPO, RLOO and online DPO trainers among them).

The row keeps ``task_id`` (and ``domain``), so a rollout or reward function starts the matching episode with
``env.reset(options={"task_id": row["task_id"]})``. Needs ``datasets`` (the ``rl`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from colbench.env.domain import get_domain
from colbench.errors import ConfigError
from colbench.types.dialogue import MAX_TURNS
from colbench.types.task import Task

if TYPE_CHECKING:
    import datasets


def prompt_rows(
    tasks: str | Sequence[Task], *, max_turns: int = MAX_TURNS, conversational: bool = True
) -> list[dict[str, Any]]:
    """The rows of ``prompt_dataset`` as plain dicts (what a trainer that reads JSONL or parquet is given, OpenRLHF
    and verl among them). ``tasks``: a split name, a JSONL file, or tasks."""
    if max_turns < 1:
        raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
    rows = []
    for task in _tasks(tasks):
        text = get_domain(task.domain).agent_prompt(task, max_turns)
        prompt: Any = [{"role": "user", "content": text}] if conversational else text
        rows.append({"task_id": task.task_id, "domain": task.domain, "prompt": prompt})
    return rows


def _tasks(tasks: str | Sequence[Task]) -> list[Task]:
    """The tasks a split name or file names (read once per process), or the tasks given."""
    if isinstance(tasks, str):
        # task loaders (and the manifest's validation) only for tasks given by name
        from colbench.tasks.sources import load_shared

        return load_shared(tasks)
    return list(tasks)


def prompt_dataset(
    tasks: str | Sequence[Task], *, max_turns: int = MAX_TURNS, conversational: bool = True
) -> datasets.Dataset:
    """A ``datasets.Dataset`` with columns ``task_id``, ``domain`` and ``prompt``: the agent's first observation
    for an episode of at most ``max_turns`` turns, as a one-message chat (``conversational``, the format TRL takes)
    or as text. ``tasks``: a split name, a JSONL file, or tasks."""
    try:
        import datasets
    except ImportError as exc:
        raise ConfigError(f"prompt_dataset needs the datasets package (pip install 'colbench[rl]'): {exc}") from None
    return datasets.Dataset.from_list(prompt_rows(tasks, max_turns=max_turns, conversational=conversational))
