"""Every stage of the SWEET-RL reference trainer, in order, each as its own process (as you would run them by hand):

    collect -> preferences -> train_critic -> train_policy   (SWEET-RL)
                           -> train_rft, train_mtdpo         (baselines, same data)

Presets:

- ``--preset gpu`` (default): the paper's recipe for Llama-3.1-8B-Instruct (see README.md). Collection needs the
  policy behind an OpenAI-compatible server (``--agent openai:NAME`` with ``COLBENCH_AGENT_BASE_URL``, e.g. vLLM)
  and a simulator (``--simulator openai:NAME``), or the released offline file (``--offline FILE``).
- ``--preset smoke``: minutes on two CPU cores with SmolLM2-135M-Instruct (``--model smollm2``): the ten shortest
  tasks of the bundled ``backend-sample``, a scripted agent whose rewards are known (``smoke_agent.NoisyOracle``) plus
  a couple of episodes of the real embedded model (``llamacpp``), the scripted simulator, a held-out set of tasks to
  measure the critic's ranking, large learning rates, only the top blocks trained, the critic trained on one core while
  the two baselines train one after the other on the other, then the policy step alone on both.

Every stage writes ``metrics.json`` (or ``*.stats.json``) under ``--workdir``; ``summary.json`` collects them.

    python examples/sweet_rl/run_all.py --preset smoke --workdir /tmp/sweet_smoke
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collect import CollectConfig
from preferences import PreferencesConfig
from sweet_lib import SMOLLM2, log, save_json
from train_critic import CriticConfig
from train_mtdpo import MTDPOConfig
from train_policy import PolicyConfig
from train_rft import RFTConfig

from colbench._util.config_cli import config_args, parse_config

HERE = Path(__file__).resolve().parent
STAGES = ["collect", "preferences", "critic", "policy", "rft", "mtdpo"]
COLLECTION = ("agent", "simulator", "offline", "tasks", "limit", "trials")
"""The collection fields of ``RunAllConfig`` (gpu preset): ``collect.py``'s own of the same name, passed on as they
are."""


@dataclass
class RunAllConfig:
    """Run every stage (or ``--stages``) of SWEET-RL and its baselines into one work directory."""

    workdir: str = "runs/sweet_rl"
    preset: str = "gpu"  # gpu | smoke
    model: str = "meta-llama/Llama-3.1-8B-Instruct"  # smoke: smollm2 (the default for --preset smoke)
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    # -- collection (gpu preset) -----------------------------------------------------------------------------------
    agent: str | None = None  # the policy as an eval agent spec, e.g. openai:llama-8b (served by vLLM)
    simulator: str = "llamacpp"  # the paper: openai:<Llama-3.1-70B-Instruct served by vLLM>
    offline: str | None = None  # colbench_code_offline_15k_llama8b.jsonl instead of (or on top of) --agent
    tasks: str = "backend-train"
    limit: int | None = None
    trials: int = 3
    # -- smoke preset ----------------------------------------------------------------------------------------------
    smoke_tasks: int = 10
    smoke_holdout_tasks: int = 4
    smoke_local_episodes: int = 2  # episodes of the real embedded model (0: none)
    parallel: bool | None = None  # the critic and the baselines side by side (None: yes for smoke, no for gpu)


def smoke_task_file(out: Path, count: int) -> Path:
    """The ``count`` shortest tasks of ``backend-sample`` (short conversations keep CPU steps cheap)."""
    from colbench.tasks import load

    tasks = sorted(load("backend-sample"), key=lambda t: len(t.ground_truth) + len(t.problem_description))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks[:count]), encoding="utf-8")
    return out


def stage_configs(config: RunAllConfig) -> dict[str, list[Any]]:
    """Each stage's config(s), from the preset; a stage may run several commands in order."""
    work = Path(config.workdir).resolve()
    trajectories, pairs = str(work / "trajectories.jsonl"), str(work / "pairs.jsonl")
    critic_dir = str(work / "critic")
    common: dict[str, Any] = {"model": config.model}
    if config.preset == "gpu":
        collection = {name: getattr(config, name) for name in COLLECTION}
        return {
            "collect": [CollectConfig(out=trajectories, **collection)],
            "preferences": [PreferencesConfig(trajectories=trajectories, out=pairs)],
            "critic": [CriticConfig(pairs=pairs, out=critic_dir, **common)],
            "policy": [PolicyConfig(trajectories=trajectories, critic=critic_dir, out=str(work / "policy"), **common)],
            "rft": [RFTConfig(trajectories=trajectories, out=str(work / "rft"), **common)],
            "mtdpo": [MTDPOConfig(pairs=pairs, out=str(work / "mtdpo"), **common)],
        }
    if config.preset != "smoke":
        raise SystemExit(f"run_all: unknown preset {config.preset!r} (gpu | smoke)")
    tasks = str(smoke_task_file(work / "smoke_tasks.jsonl", config.smoke_tasks))
    cpu: dict[str, Any] = {"train_last_layers": 4, "threads": 1, "device": "cpu"}
    collect = [
        CollectConfig(
            out=trajectories,
            agent="smoke_agent:NoisyOracle",
            agent_option=[f"tasks={json.dumps(tasks)}"],
            tasks=tasks,
            trials=3,
            simulator="scripted",
            max_turns=2,
            sandbox="auto",
            runs=[str(work / "run-local")] if config.smoke_local_episodes else [],
        )
    ]
    if config.smoke_local_episodes:
        local = CollectConfig(
            out=str(work / "trajectories_local.jsonl"),
            agent="llamacpp",
            tasks=tasks,
            limit=config.smoke_local_episodes,
            trials=1,
            simulator="scripted",
            max_turns=2,
            max_tokens=32,
            run_dir=str(work / "run-local"),
        )
        collect.insert(0, local)
    return {
        "collect": collect,
        "preferences": [
            PreferencesConfig(trajectories=trajectories, out=pairs, holdout_tasks=config.smoke_holdout_tasks)
        ],
        "critic": [
            CriticConfig(
                pairs=pairs,
                eval_pairs=str(work / "pairs_heldout.jsonl"),
                out=critic_dir,
                lr=1e-4,
                epochs=3,
                batch_size=2,
                max_len=2048,
                **common,
                **cpu,
            )
        ],
        "policy": [
            PolicyConfig(
                trajectories=trajectories,
                critic=critic_dir,
                out=str(work / "policy"),
                data_fraction=0.1,
                max_prompts=2,
                num_candidates=4,
                max_new_tokens=16,
                num_pairs=2,
                lr=1e-4,
                beta=0.5,
                batch_size=2,
                max_length=2048,
                lr_scheduler="constant",
                warmup_ratio=0.0,
                gradient_checkpointing=False,
                **common,
                **{**cpu, "threads": 2},  # alone on the machine (see main)
            )
        ],
        "rft": [RFTConfig(trajectories=trajectories, out=str(work / "rft"), lr=1e-4, batch_size=2, **common, **cpu)],
        "mtdpo": [
            MTDPOConfig(
                pairs=pairs, out=str(work / "mtdpo"), lr=1e-4, beta=0.5, epochs=2, batch_size=2, **common, **cpu
            )
        ],
    }


SCRIPTS = {
    "collect": "collect.py",
    "preferences": "preferences.py",
    "critic": "train_critic.py",
    "policy": "train_policy.py",
    "rft": "train_rft.py",
    "mtdpo": "train_mtdpo.py",
}


def command(stage: str, stage_config: Any) -> list[str]:
    return [sys.executable, str(HERE / SCRIPTS[stage]), *config_args(stage_config)]


def run_group(lanes: list[list[str]], configs: dict[str, list[Any]], parallel: bool) -> dict[str, float]:
    """Run the stages of each lane one after the other and, with ``parallel``, the lanes side by side (else the
    lanes one after the other too); any failure stops the run."""
    seconds: dict[str, float] = {}

    def run_lane(lane: list[str]) -> None:
        for stage in lane:
            started = time.monotonic()
            for stage_config in configs[stage]:
                log("run_all", f"{stage}: {' '.join(command(stage, stage_config)[1:])}")
                subprocess.run(command(stage, stage_config), check=True)
            seconds[stage] = time.monotonic() - started

    lanes = [lane for lane in lanes if lane]
    if not parallel or len(lanes) < 2:
        for lane in lanes:
            run_lane(lane)
        return seconds
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(lanes)) as pool:
        for future in [pool.submit(run_lane, lane) for lane in lanes]:
            future.result()
    return seconds


def main(config: RunAllConfig) -> dict[str, Any]:
    if config.preset == "smoke" and config.model == RunAllConfig.model:
        config = replace(config, model=SMOLLM2)
    parallel = config.preset == "smoke" if config.parallel is None else config.parallel
    unknown = sorted(set(config.stages) - set(STAGES))
    if unknown:
        raise SystemExit(f"run_all: unknown stages {unknown}; known: {STAGES}")
    if {"critic", "policy", "rft", "mtdpo"} & set(config.stages):
        from sweet_lib import resolve_model

        resolve_model(config.model)  # convert a GGUF once, before stages that load it run side by side
    configs = stage_configs(config)
    wanted = [s for s in STAGES if s in config.stages]
    started = time.monotonic()
    seconds: dict[str, float] = {}
    seconds |= run_group([[s for s in wanted if s in ("collect", "preferences")]], configs, parallel=False)
    # two lanes, one per core: the critic beside the two baselines one after the other (the critic takes about as
    # long as both), then the policy step, which needs the critic, alone
    lanes = [[s for s in wanted if s == "critic"], [s for s in wanted if s in ("rft", "mtdpo")]]
    seconds |= run_group(lanes, configs, parallel=parallel)
    seconds |= run_group([[s for s in wanted if s == "policy"]], configs, parallel=False)

    work = Path(config.workdir).resolve()
    summary: dict[str, Any] = {"preset": config.preset, "model": config.model, "seconds": seconds}
    summary["seconds_total"] = time.monotonic() - started
    for name, path in {
        "collect": work / "trajectories.stats.json",
        "preferences": work / "pairs.stats.json",
        "critic": work / "critic" / "metrics.json",
        "policy": work / "policy" / "metrics.json",
        "rft": work / "rft" / "metrics.json",
        "mtdpo": work / "mtdpo" / "metrics.json",
    }.items():
        if path.is_file():
            summary[name] = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("config",)}
    save_json(work / "summary.json", summary)
    log("run_all", f"done in {summary['seconds_total']:.0f}s: {json.dumps(seconds)}")
    return summary


if __name__ == "__main__":
    main(parse_config(RunAllConfig))
