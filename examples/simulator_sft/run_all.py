"""Every stage of the simulator fine-tuning recipe, in order, each as its own process (as you would run them by
hand), with each stage's wall time:

    make_prefixes -> sample_candidates -> select_replies -> train_sft -> evaluate

Presets (flags given after ``--preset`` override nothing: edit the stage configs or run the stages by hand):

- ``tiny``: a CI smoke run, a few minutes on two CPU cores: 4 bundled ``backend-sample`` tasks, the asker agent,
  K = 2, one SFT step, the probe's one-line question on one task.
- ``cpu``: the measured CPU run (README.md): the embedded SmolLM2-135M human, ``--limit`` tasks of ``--tasks``
  played by the asker agent, K = 5 to train and 4 to evaluate, about an hour on two shared cores.
- ``gpu``: an 8B human on a GPU (README.md): ``--simulator openai:NAME`` served by vLLM (or any OpenAI-compatible
  server, ``COLBENCH_SIMULATOR_BASE_URL``) for sampling, ``--model`` the same weights as a transformers directory
  or hub id for training; evaluation serves the trained directory the same way (``--trained openai:NAME``).

    python examples/simulator_sft/run_all.py --preset cpu --workdir runs/simsft_cpu \
        --tasks backend_test_sample.jsonl --limit 48
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluate import EvalConfig
from make_prefixes import PrefixConfig
from sample_candidates import SampleConfig
from select_replies import SelectConfig
from sft_lib import METRICS, SMOLLM2, log, save_json
from train_sft import TrainConfig

from colbench._util.config_cli import config_args, parse_config

HERE = Path(__file__).resolve().parent
STAGES = ["prefixes", "sample", "select", "train", "evaluate"]
SCRIPTS = {
    "prefixes": "make_prefixes.py",
    "sample": "sample_candidates.py",
    "select": "select_replies.py",
    "train": "train_sft.py",
    "evaluate": "evaluate.py",
}


@dataclass
class RunAllConfig:
    """Run every stage (or --stages) of simulator fine-tuning into one work directory."""

    workdir: str = "runs/simulator_sft"
    preset: str = "cpu"  # tiny | cpu | gpu
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    tasks: str | None = None  # None: backend-sample (tiny), backend-test (cpu, gpu)
    limit: int | None = None  # tasks played; None: the preset's
    agent: str | None = None  # None: the asker (tiny, cpu), the embedded model ... (gpu: pass one)
    simulator: str = "llamacpp"  # gpu: openai:NAME (the human being trained, served by vLLM)
    model: str = SMOLLM2  # the same human's weights for training (gpu: a directory or hub id)
    trained: str = ""  # gpu: openai:NAME serving WORKDIR/human; "": llamacpp:WORKDIR/human.gguf
    temperature: float = 0.7


PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "prefixes": {"tasks": "backend-sample", "limit": 4, "max_turns": 2, "held_out": 0.5},
        "sample": {"k": 2, "concurrency": 4},
        "select": {},
        "train": {"lr": 1e-4, "batch_size": 2, "micro_batch_size": 1, "max_length": 2048, "threads": 1},
        "evaluate": {
            "k": 2,
            "concurrency": 4,
            "n_boot": 200,
            "probe_limit": 1,
            "probe_category": "ask for one line",
            "probe_draws": 1,
        },
    },
    "cpu": {
        "prefixes": {"tasks": "backend-test", "limit": 80, "max_turns": 2, "held_out": 0.4},
        "sample": {"k": 5, "concurrency": 8},
        "select": {},
        "train": {"lr": 1e-4, "batch_size": 8, "micro_batch_size": 1, "max_length": 2048, "train_last_layers": 6},
        "evaluate": {"k": 4, "concurrency": 8, "probe_limit": 2, "probe_category": "truth", "probe_draws": 1},
    },
    "gpu": {
        "prefixes": {"tasks": "backend-test", "limit": 1000, "max_turns": 6, "held_out": 0.2, "concurrency": 64},
        "sample": {"k": 8, "concurrency": 256},
        "select": {},
        "train": {"lr": 1e-5, "batch_size": 32, "micro_batch_size": 4, "gradient_checkpointing": True},
        "evaluate": {"k": 8, "concurrency": 256, "probe_limit": 50, "probe_category": None, "probe_draws": 4},
    },
}


def stage_configs(config: RunAllConfig) -> dict[str, Any]:
    if config.preset not in PRESETS:
        raise SystemExit(f"run_all: unknown preset {config.preset!r} ({' | '.join(PRESETS)})")
    preset = PRESETS[config.preset]
    work = str(Path(config.workdir).resolve())
    common = {"workdir": work, "temperature": config.temperature}
    prefixes = {**preset["prefixes"], **common, "simulator": config.simulator}
    if config.tasks is not None:
        prefixes["tasks"] = config.tasks
    if config.limit is not None:
        prefixes["limit"] = config.limit
    if config.agent is not None:
        prefixes["agent"] = config.agent
    elif config.preset in ("tiny", "cpu"):
        prefixes["agent"] = "asker:Asker"
        prefixes["agent_option"] = [f"tasks={json.dumps(prefixes['tasks'])}"]
    evaluate = {**preset["evaluate"], **common, "trained": config.trained}
    if config.preset == "gpu":
        evaluate["base"] = config.simulator
    return {
        "prefixes": PrefixConfig(**prefixes),
        "sample": SampleConfig(**preset["sample"], **common, simulator=config.simulator),
        "select": SelectConfig(**preset["select"], **common, simulator=config.simulator),
        "train": TrainConfig(**preset["train"], workdir=work, model=config.model),
        "evaluate": EvalConfig(**evaluate),
    }


def main(config: RunAllConfig) -> dict[str, Any]:
    unknown = sorted(set(config.stages) - set(STAGES))
    if unknown:
        raise SystemExit(f"run_all: unknown stages {unknown}; known: {STAGES}")
    configs = stage_configs(config)
    work = Path(config.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    for stage in [s for s in STAGES if s in config.stages]:
        command = [sys.executable, str(HERE / SCRIPTS[stage]), *config_args(configs[stage])]
        log("run_all", " ".join(command[1:]))
        begun = time.monotonic()
        subprocess.run(command, check=True)
        seconds[stage] = round(time.monotonic() - begun, 1)
        log("run_all", f"{stage}: {seconds[stage]}s")
    summary: dict[str, Any] = {"preset": config.preset, "seconds": seconds}
    summary["seconds_total"] = round(time.monotonic() - started, 1)
    for name, file in METRICS.items():
        if (work / file).is_file():
            found = json.loads((work / file).read_text())
            summary[name] = {k: v for k, v in found.items() if k not in ("config", "per_prefix", "losses")}
    save_json(work / "summary.json", summary)
    log("run_all", f"done in {summary['seconds_total']}s: {json.dumps(seconds)}")
    return summary


if __name__ == "__main__":
    main(parse_config(RunAllConfig))
