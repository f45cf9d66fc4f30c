"""Stage 2: K replies per training prefix from the human model, sampled the way the env samples them.

The human is made by :func:`colbench.env.simulators.make_simulator` from ``--simulator`` and the same options the
env will get (``--temperature``: the same decoding; the spec's own defaults for the rest), and asked with the env's
own request (:func:`colbench.simtrain.sample_candidates`): same prompt, same view, draw ``d`` seeded ``seed + d``,
``--concurrency`` requests at once (the embedded server batches them in its slots; vLLM batches them all).

    python examples/simulator_sft/sample_candidates.py --workdir runs/simsft --k 8
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path

from sft_lib import CANDIDATES, ENV_ID, METRICS, TRAIN_PREFIXES, Timer, log, save_json, simulator_options, write_jsonl

from colbench._util.config_cli import parse_config


@dataclass
class SampleConfig:
    """Sample K candidate replies per training prefix."""

    workdir: str = "runs/simulator_sft"
    simulator: str = "llamacpp"  # the human being trained, as served (GPU: openai:NAME behind vLLM)
    temperature: float = 0.7
    env_id: str = ENV_ID
    k: int = 8
    seed: int = 0
    concurrency: int = 8


def main(config: SampleConfig) -> dict[str, object]:
    from colbench.simtrain import read_prefixes, sample_candidates

    timer = Timer()
    work = Path(config.workdir)
    prefixes = read_prefixes(work / TRAIN_PREFIXES)
    log("sample", f"{config.k} draws from {config.simulator} for each of {len(prefixes)} prefixes")
    candidates = asyncio.run(
        sample_candidates(
            prefixes,
            env_id=config.env_id,
            simulator=config.simulator,
            simulator_options=simulator_options(config.temperature),
            k=config.k,
            seed=config.seed,
            concurrency=config.concurrency,
        )
    )
    write_jsonl(work / CANDIDATES, [asdict(c) for c in candidates])
    metrics = {"config": asdict(config), "prefixes": len(prefixes), "candidates": len(candidates), "seconds": timer()}
    metrics["seconds_per_reply"] = round(metrics["seconds"] / max(1, len(candidates)), 2)
    save_json(work / METRICS["sample"], metrics)
    log("sample", f"{len(candidates)} candidates in {metrics['seconds']}s")
    return metrics


if __name__ == "__main__":
    main(parse_config(SampleConfig))
