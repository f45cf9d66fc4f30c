"""What the report's figures show, computed from run directories without any plotting library: each task's outcome
in a run, the simulated human's replies and their statistics. :mod:`colbench.report.plots` draws them."""

from __future__ import annotations

from dataclasses import dataclass

from colbench.probe.verdicts import empty_or_refusal
from colbench.report import stats
from colbench.runs import DialogueTurn, Run


@dataclass(frozen=True)
class Cell:
    """One task in one run: its category (see :data:`OUTCOME_COLOURS`) and, where scored, its mean reward."""

    category: str
    value: float | None = None


def task_cells(run: Run) -> dict[str, Cell]:
    """Per task: success / mixed / fail (domains with success), or the mean reward (the others); ``infra`` where no
    trial was scored. Trials are averaged within the task, as every score of the leaderboard is."""
    domain = run.domain
    scored = run.scored()
    cells = {}
    for task in dict.fromkeys(episode.task_id for episode in run.ordered_episodes()):
        rewards = [(e.reward, e.success) for e in scored.get(task, []) if e.reward is not None]
        if not rewards:
            cells[task] = Cell("infra")
        elif run.metrics.has_success:
            wins = [domain.success_of(r, s, run.env_id) for r, s in rewards]
            category = "success" if all(wins) else "fail" if not any(wins) else "mixed"
            cells[task] = Cell(category, sum(wins) / len(wins))
        else:
            cells[task] = Cell("scored", stats.mean([r for r, _ in rewards]))
    return cells


def human_replies(run: Run) -> list[DialogueTurn]:
    """The simulated human's turns of the run's scored episodes, as recorded (the text the agent saw)."""
    return [t for episodes in run.scored().values() for e in episodes for t in e.dialogue_turns if t.role == "human"]


@dataclass(frozen=True)
class ReplyStats:
    """The human's replies of one run: how many, their mean length, the share empty or refusing (the heuristic of
    ``colbench probe``, docs/leaks.md), and the share flagged as leaks (None: the run did not measure leaks)."""

    replies: int
    mean_chars: float | None
    empty_or_refusal: float | None
    leaked: float | None


def reply_stats(run: Run) -> ReplyStats:
    replies = human_replies(run)
    if not replies:
        return ReplyStats(0, None, None, None)
    texts = [t.text for t in replies]
    measured = [t.leak for t in replies if t.leak_score is not None]
    return ReplyStats(
        len(texts),
        stats.mean([len(t) for t in texts]),
        sum(empty_or_refusal(t) for t in texts) / len(texts),
        sum(measured) / len(measured) if measured else None,
    )
