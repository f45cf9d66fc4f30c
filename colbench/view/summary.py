"""One run's line in the runs index: progress, success and reward with confidence intervals, leaks, the human's false
claims, cost.

Computed from the index's rows (never the whole file), with the estimators of :mod:`colbench.report.stats`, and
cached until the index changes, so a page that polls does not bootstrap 10,000 tasks every few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from colbench.errors import DataError
from colbench.report import stats
from colbench.report.truth import simulator_label, truth_config
from colbench.runs.task_snapshot import snapshot_path
from colbench.view.index import RunIndex

NO_SNAPSHOT = "no task snapshot (tasks.jsonl): task, hidden information and reference are not shown"
"""What an older run directory lacks that newer ones hold (said on its pages, never an error)."""


@dataclass(frozen=True)
class Summary:
    env_id: str
    domain: str
    agent: str
    simulator: str
    leak_policy: str
    truth_policy: str
    done: int
    total: int | None
    infra: int
    success: stats.Estimate | None
    reward: stats.Estimate
    reward_name: str
    leak: stats.Estimate | None
    untrue: stats.Estimate | None  # share of checked human replies whose first draw held a false claim
    untrue_replies: int  # checked replies
    failed_untrue: tuple[int, int] | None  # (failed episodes with an untrue reply, failed episodes checked)
    pass_k: tuple[tuple[int, float | None], ...]
    cost: float | None
    tokens: int
    torn_line: str | None
    missing: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for name in ("success", "reward", "leak", "untrue"):
            value = out[name]
            out[name] = None if value is None else {"value": value.value, "low": value.low, "high": value.high}
        out["pass_k"] = [list(p) for p in self.pass_k]
        out["failed_untrue"] = None if self.failed_untrue is None else list(self.failed_untrue)
        out["stale"] = False  # True while a growing run's statistics wait for their next computation
        return out


def _name(section: Any, *fields: str) -> str:
    if section is None:
        return "?"
    for name in fields:
        value = getattr(section, name, None)
        if value:
            return str(value)
    return "?"


def summarize(index: RunIndex) -> Summary:
    """The run as it stands in the index now."""
    config = index.config
    rewards: dict[str, list[float]] = {}
    successes: dict[str, list[bool]] = {}
    leaks: dict[str, list[bool]] = {}
    truth: dict[str, list[tuple[int, int]]] = {}
    failed_checked = failed_untrue = 0
    done = infra = tokens = 0
    cost: float | None = 0.0
    for row in index.rows():
        done += 1
        tokens += row.tokens
        cost = None if cost is None or row.cost is None else cost + row.cost
        if row.status != "ok" or row.reward is None:
            infra += 1
            continue
        rewards.setdefault(row.task_id, []).append(row.reward)
        if row.failed is not None:
            successes.setdefault(row.task_id, []).append(not row.failed)
        if row.leaks is not None:
            leaks.setdefault(row.task_id, []).append(row.leaks > 0)
        if row.checked is not None and row.untrue is not None:
            truth.setdefault(row.task_id, []).append((row.untrue, row.checked))
            if row.failed:
                failed_checked += 1
                failed_untrue += row.untrue > 0
    tasks = config.tasks
    total = tasks.count * config.trials if tasks is not None and tasks.count is not None else None
    success = stats.success_estimate(successes) if index.has_success else None
    trials = max((len(v) for v in successes.values()), default=0)
    return Summary(
        env_id=config.env_id,
        domain=config.domain,
        agent=_name(config.agent, "name", "spec"),
        simulator=str(simulator_label(_name(config.simulator, "model", "spec"), config)),
        leak_policy=(config.leaks.policy if config.leaks is not None else None) or "?",
        truth_policy=truth_config(config).policy or "?",
        done=done,
        total=total,
        infra=infra,
        success=success,
        reward=stats.mean_estimate(rewards),
        reward_name=index.metrics.reward_name,
        leak=stats.success_estimate(leaks) if leaks else None,
        untrue=stats.ratio_estimate(truth) if truth else None,
        untrue_replies=sum(total for pairs in truth.values() for _, total in pairs),
        failed_untrue=(failed_untrue, failed_checked) if truth and index.has_success else None,
        pass_k=tuple((k, stats.pass_hat_k(successes, k).value) for k in range(1, trials + 1)) if trials > 1 else (),
        cost=cost,
        tokens=tokens,
        torn_line=index.torn_line,
        missing=() if config_snapshot(index) is not None else (NO_SNAPSHOT,),
    )


def config_snapshot(index: RunIndex) -> str | None:
    """The run's task snapshot file name (run.json ``tasks.snapshot``) when it exists in the run directory."""
    try:
        path = snapshot_path(index.run_dir, index.config)
    except DataError:  # a run.json naming no file of its own, or a missing one: shown as missing
        return None
    return path.name if path is not None else None
