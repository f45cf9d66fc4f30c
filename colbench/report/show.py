"""``colbench show RUN``: one episode of a run directory as a readable dialogue (who said what, turn by turn, the
answer that was scored and its score), for a person reading a run rather than a program (``colbench report`` is
the leaderboard, its ``--html`` the full per-run page)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench.errors import ConfigError
from colbench.report.truth import false_claim_lines, simulator_label
from colbench.runs import ROLES, EpisodeRecord, Run, load_run
from colbench.types.chat import Usage
from colbench.types.dialogue import after_marker, is_answer

WIDTH = 100
_NAMES = {"agent": "AGENT", "human": "HUMAN"}


def pick_episode(run: Run, task: str | None = None, trial: int | None = None) -> EpisodeRecord:
    """The episode of ``task`` (an id or a unique prefix of one) and ``trial``; by default the first of the file."""
    episodes = run.ordered_episodes()
    if not episodes:
        raise ConfigError(f"{run.path}: no finished episode to show")
    if task is not None:
        ids = list(dict.fromkeys(e.task_id for e in episodes))
        matches = [i for i in ids if i == task] or [i for i in ids if i.startswith(task)]
        if len(matches) != 1:
            what = "no episode" if not matches else f"{len(matches)} tasks ({', '.join(matches[:5])})"
            raise ConfigError(f"{run.path}: task {task!r} matches {what}; tasks in the run: {', '.join(ids[:10])}")
        episodes = [e for e in episodes if e.task_id == matches[0]]
    if trial is not None:
        episodes = [e for e in episodes if e.trial == trial]
        if not episodes:
            raise ConfigError(f"{run.path}: no trial {trial} of task {task or 'any'}")
    return episodes[0]


def _block(text: str, width: int) -> str:
    """``text`` indented by four spaces, long prose lines wrapped, code lines kept as they are."""
    lines = []
    for line in (text.rstrip() or "(empty)").splitlines() or [""]:
        if len(line) + 4 <= width or line.startswith((" ", "\t")):
            lines.append("    " + line)
        else:
            lines += textwrap.wrap(line, width, initial_indent="    ", subsequent_indent="    ") or ["    "]
    return "\n".join(lines)


def _request(run: Run, task_id: str) -> str | None:
    """The task's request (its problem description), when the run's task source can still be read."""
    spec = run.tasks.spec
    if not spec:
        return None
    try:
        # task loaders only when the run's tasks must be read
        from colbench.tasks.sources import load

        tasks = {t.task_id: t for t in load(spec)}
    except Exception:  # a file moved, a hub split not cached: the dialogue is still worth showing
        return None
    task = tasks.get(task_id)
    return task.problem_description.strip() if task is not None else None


def _score_line(episode: EpisodeRecord) -> str:
    if not episode.ok:
        return f"not scored: infrastructure error: {episode.error}"
    return _score_parts(episode.reward, episode.success, episode.score)


def _score_parts(reward: Any, success: Any, score: Any) -> str:
    parts = [f"reward {float(reward or 0):.3f}"]
    details: Mapping[str, Any] = score if isinstance(score, dict) else {}
    if isinstance(details.get("tests_total"), int):
        parts.append(f"tests passed {details.get('tests_passed', 0)}/{details['tests_total']}")
    if isinstance(success, bool):
        parts.append("success" if success else "no success")
    return ", ".join(parts)


def _before_rescoring(episode: EpisodeRecord) -> list[str]:
    """The score a rescored record had under its run's earlier env id (``colbench rescore``)."""
    before = episode.rescored_from
    if before is None:
        return []
    score = _score_parts(before.get("reward"), before.get("success"), before.get("score"))
    return [f"BEFORE RESCORING ({before.get('env_id', '?')}): {score}"]


def render_episode(run: Run, episode: EpisodeRecord, *, width: int = WIDTH, request: bool = True) -> str:
    """One episode as text: a header, the request, each turn, the scored answer and the score."""
    agent = run.role_model("agent") or "?"
    human = simulator_label(run.role_model("simulator") or "?", run.config)
    count = "?" if episode.turns is None else episode.turns
    out = [
        f"{run.env_id}  task {episode.task_id}  trial {episode.trial}  ({run.path})",
        f"agent: {agent}   human: {human}   {count} agent turns, ended by {episode.termination or episode.status}",
    ]
    source = run.config.rescored_from
    if source is not None:
        out.append(f"rescored from the {source.get('env_id', '?')} run {source.get('run', '?')} (no model was called)")
    timings = episode.timings or {}
    if timings.get("duration_s") is not None:
        usage = episode.usage_by_role()
        tokens = ", ".join(f"{role} {usage.get(role, Usage()).completion_tokens}" for role in ROLES)
        out.append(f"{float(timings['duration_s']):.1f} s; tokens written: {tokens}")
    text = _request(run, episode.task_id) if request else None
    if text:
        out += ["", "REQUEST (what the agent is told)", _block(text, width)]
    number = 0
    for turn in episode.dialogue_turns:
        number += turn.role == "agent"
        label = f"{_NAMES[turn.role]} (turn {number})"
        if turn.role == "human" and turn.leak:
            label += f"  [leak flagged: {turn.leak_action or 'shown'}]"
        if turn.checked and turn.untrue:
            action = turn.truth_action  # resampled, or withheld by the leak policy: the agent saw another
            label += (
                f"  [false claim in the first draw: {action}]" if action not in (None, "shown") else "  [false claim]"
            )
        out += ["", label, _block(turn.text, width)]
        if turn.checked:
            out += [f"    ! false: {line}" for line in false_claim_lines(turn)]
    answer = episode.answer
    if answer is not None:
        how = "after the answer marker" if is_answer(answer) else "the last turn, at the turn cap"
        out += ["", f"ANSWER SCORED ({how})", _block(after_marker(answer).strip(), width)]
    out += ["", f"SCORE: {_score_line(episode)}", *_before_rescoring(episode)]
    return "\n".join(out) + "\n"


def show(path: str | Path, task: str | None = None, trial: int | None = None, *, width: int = WIDTH) -> str:
    """The text ``colbench show`` prints for the run directory ``path``."""
    run = load_run(path)
    return render_episode(run, pick_episode(run, task, trial), width=width)
