"""Stage 2: trajectory-level preferences, per task, by final reward (what the critic and multi-turn DPO train on).

The rule (the original's ``evaluate_code.py`` for code; its HTML rule for design):

- backend: only tasks where at least one of the k samples is fully successful (all tests pass); the best sample is
  chosen and every sample with a strictly lower reward is rejected against it (ties with the best are dropped);
- frontend: every pair of samples of a task whose CLIP similarities differ by at least ``min_gap`` (0.1), the more
  similar one chosen.

Output: one JSON per pair, ``{"task_id", "chosen": <trajectory>, "rejected": <trajectory>}``. ``--holdout-tasks N``
sets N tasks aside (seeded) in a second file, for measuring how well the critic ranks pairs of tasks it never saw.

    python examples/sweet_rl/preferences.py --trajectories DIR/trajectories.jsonl --out DIR/pairs.jsonl
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from sweet_lib import log, read_trajectories, save_json, trajectory_pairs, write_jsonl

from colbench._util.config_cli import parse_config


@dataclass
class PreferencesConfig:
    """Chosen/rejected trajectory pairs per task by final reward."""

    trajectories: str = "runs/sweet_rl/trajectories.jsonl"
    out: str = "runs/sweet_rl/pairs.jsonl"
    domain: str = "auto"  # auto: the trajectories' own domain
    min_gap: float = 0.1  # frontend: the least similarity gap of a pair
    success_reward: float = 1.0  # backend: the reward that counts as fully successful
    holdout_tasks: int = 0  # tasks set aside into <out stem>_heldout.jsonl
    seed: int = 0


def main(config: PreferencesConfig) -> dict[str, int]:
    trajectories = read_trajectories(config.trajectories)
    domains = {t.domain for t in trajectories}
    domain = config.domain if config.domain != "auto" else (domains.pop() if len(domains) == 1 else "")
    if not domain:
        raise SystemExit(f"preferences: trajectories of several domains {sorted(domains)}: give --domain")
    pairs = trajectory_pairs(
        [t for t in trajectories if t.domain == domain],
        domain=domain,
        min_gap=config.min_gap,
        success_reward=config.success_reward,
    )
    tasks = sorted({chosen.task_id for chosen, _ in pairs})
    held = set(random.Random(config.seed).sample(tasks, min(config.holdout_tasks, len(tasks))))
    rows = [{"task_id": c.task_id, "chosen": c.to_json(), "rejected": r.to_json()} for c, r in pairs]
    train = [row for row in rows if row["task_id"] not in held]
    heldout = [row for row in rows if row["task_id"] in held]
    write_jsonl(config.out, train)
    stats = {"trajectories": len(trajectories), "pairs": len(train), "tasks": len(tasks) - len(held)}
    if config.holdout_tasks:
        out = Path(config.out)
        write_jsonl(out.with_name(out.stem + "_heldout.jsonl"), heldout)
        stats.update(heldout_pairs=len(heldout), heldout_tasks=len(held))
    save_json(Path(config.out).with_suffix(".stats.json"), stats)
    log("preferences", f"{domain}: {stats}")
    return stats


if __name__ == "__main__":
    main(parse_config(PreferencesConfig))
