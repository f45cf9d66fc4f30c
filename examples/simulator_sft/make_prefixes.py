"""Stage 1: dialogue prefixes where the human must reply, split by reference into train and held-out.

From run directories (``--runs DIR ...``: any ``colbench eval``'s episodes), or by playing an agent (any agent spec,
``--agent``: the embedded model by default; ``asker:Asker`` asks about the task's test calls, see asker.py) against
the human on ``--tasks``. Identical prefixes are folded (their ``weight`` counts them). The split groups prefixes by
reference content (whitespace aside) and task id: no task and no reference is on both sides
(:func:`colbench.simtrain.split_by_reference` checks it).

    python examples/simulator_sft/make_prefixes.py --workdir runs/simsft --tasks backend-test --limit 200
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sft_lib import ENV_ID, HELD_OUT_PREFIXES, METRICS, TRAIN_PREFIXES, Timer, log, save_json, simulator_options

from colbench._util.config_cli import parse_config


@dataclass
class PrefixConfig:
    """Make the train and held-out prefixes."""

    workdir: str = "runs/simulator_sft"
    runs: list[str] = field(default_factory=list)  # run directories to read; none: play --agent on --tasks
    max_per_episode: int | None = None
    tasks: str = "backend-test"  # a split name or a task JSONL file
    limit: int | None = None  # the first N tasks
    agent: str = "llamacpp"  # any agent spec; asker:Asker asks about test calls
    agent_option: list[str] = field(default_factory=list)  # KEY=JSON (a bare string is taken as a string)
    simulator: str = "llamacpp"  # the human that replies while playing
    temperature: float = 0.7
    env_id: str = ENV_ID
    max_turns: int = 3  # each played episode gives max_turns - 1 prefixes (the last turn gets no reply)
    concurrency: int = 4
    held_out: float = 0.4
    seed: int = 0


def options(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"make_prefixes: --agent-option {pair!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def main(config: PrefixConfig) -> dict[str, object]:
    from colbench.simtrain import prefixes_by_playing, prefixes_from_runs, split_by_reference, write_prefixes
    from colbench.tasks import load

    timer = Timer()
    work = Path(config.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if config.runs:
        prefixes = prefixes_from_runs([Path(r) for r in config.runs], max_per_episode=config.max_per_episode)
        source = {"runs": config.runs}
    else:
        tasks = load(config.tasks)[: config.limit]
        log("prefixes", f"playing {config.agent} against {config.simulator} on {len(tasks)} tasks")
        prefixes = prefixes_by_playing(
            tasks,
            env_id=config.env_id,
            agent=config.agent,
            agent_options=options(config.agent_option),
            simulator=config.simulator,
            simulator_options=simulator_options(config.temperature),
            max_turns=config.max_turns,
            seed=config.seed,
            concurrency=config.concurrency,
        )
        source = {"played": config.agent, "tasks": config.tasks, "limit": config.limit}
    train, held_out = split_by_reference(prefixes, held_out=config.held_out, seed=config.seed)
    write_prefixes(work / TRAIN_PREFIXES, train)
    write_prefixes(work / HELD_OUT_PREFIXES, held_out)
    metrics = {
        "config": asdict(config),
        "source": source,
        "prefixes": len(prefixes),
        "train": len(train),
        "held_out": len(held_out),
        "train_tasks": len({p.task.task_id for p in train}),
        "held_out_tasks": len({p.task.task_id for p in held_out}),
        "seconds": timer(),
    }
    save_json(work / METRICS["prefixes"], metrics)
    log("prefixes", f"{len(train)} train and {len(held_out)} held-out prefixes in {metrics['seconds']}s")
    return metrics


if __name__ == "__main__":
    main(parse_config(PrefixConfig))
