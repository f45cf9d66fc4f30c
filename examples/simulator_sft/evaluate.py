"""Stage 5: the static evaluation on held-out prefixes, base human against trained human.

K draws per held-out prefix from each human, through its own server and exactly as the env asks it
(:func:`colbench.simtrain.sample_candidates`, the same seeds for both), each judged by the same checks as the
selection. Per prefix: leak rate, untrue rate (a draw with a false claim, the claims checker's verdict), mean
over-release, empty-or-refusal rate, unique replies per K (:func:`colbench.simtrain.draw_metrics`); over prefixes,
weighted by how often each occurs, the trained minus base difference with a percentile bootstrap interval that
resamples groups of prefixes sharing a task or a reference (:func:`colbench.simtrain.compare`). Then
``colbench probe simulator`` on both, on the held-out tasks.

The base is by default the start point as train_sft.py wrote it (``base.gguf``: the same weights as the embedded
model, at the trained model's precision), so the difference is the training's alone, not a quantisation change.

    python examples/simulator_sft/evaluate.py --workdir runs/simsft --k 8
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sft_lib import (
    BASE_GGUF,
    ENV_ID,
    HELD_OUT_PREFIXES,
    HUMAN_DIR,
    METRICS,
    Timer,
    judged_row,
    log,
    save_json,
    simulator_options,
    write_jsonl,
)

from colbench._util.config_cli import parse_config


@dataclass
class EvalConfig:
    """Compare the base and the trained human on the held-out prefixes (and with colbench probe simulator)."""

    workdir: str = "runs/simulator_sft"
    base: str = ""  # the base human's spec; "": llamacpp:WORKDIR/base.gguf if train_sft wrote it, else llamacpp
    trained: str = ""  # the trained human's spec; "": llamacpp:WORKDIR/human.gguf (GPU: openai:NAME behind vLLM)
    temperature: float = 0.7
    env_id: str = ENV_ID
    k: int = 8
    seed: int = 1000  # not the sampling stage's seeds: other draws
    concurrency: int = 8
    sandbox: str = "auto"  # the claims checker's runtime
    n_boot: int = 2000
    probe: bool = True  # also colbench probe simulator on both
    probe_limit: int = 4  # held-out tasks probed
    probe_category: str | None = "truth"  # None: every probe of the suite
    probe_draws: int = 2


def specs(config: EvalConfig) -> dict[str, str]:
    work = Path(config.workdir).resolve()
    base = config.base or (f"llamacpp:{work / BASE_GGUF}" if (work / BASE_GGUF).is_file() else "llamacpp")
    return {"base": base, "trained": config.trained or f"llamacpp:{work / (HUMAN_DIR + '.gguf')}"}


def draws(config: EvalConfig, prefixes: list[Any], spec: str, judge: Any) -> dict[str, list[Any]]:
    """K judged draws per prefix from the human ``spec``; its embedded server stopped afterwards (two cores)."""
    from colbench.llm import llamacpp
    from colbench.simtrain import sample_candidates

    candidates = asyncio.run(
        sample_candidates(
            prefixes,
            env_id=config.env_id,
            simulator=spec,
            simulator_options=simulator_options(config.temperature),
            k=config.k,
            seed=config.seed,
            concurrency=config.concurrency,
        )
    )
    llamacpp.close()
    judged: dict[str, list[Any]] = {}
    for prefix in prefixes:
        judged[prefix.key()] = judge.judge(prefix, [c for c in candidates if c.prefix == prefix.key()])
    return judged


def probe(config: EvalConfig, spec: str, tasks_file: Path, out: Path) -> dict[str, Any]:
    """``colbench probe simulator`` on the held-out tasks, as a user runs it; its JSON summary."""
    command = [sys.executable, "-m", "colbench", "probe", "simulator", "--simulator", spec, "--tasks", str(tasks_file)]
    command += ["--limit", str(config.probe_limit), "--out", str(out), "--json", "--draws", str(config.probe_draws)]
    command += ["--simulator-temperature", str(config.temperature)]
    if config.probe_category:
        command += ["--category", config.probe_category]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"evaluate: {' '.join(command)} failed: {done.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def main(config: EvalConfig) -> dict[str, Any]:
    from colbench.simtrain import Judge, compare, draw_metrics, prefix_groups, read_prefixes

    timer = Timer()
    work = Path(config.workdir)
    prefixes = read_prefixes(work / HELD_OUT_PREFIXES)
    humans = specs(config)
    judge = Judge(config.env_id, sandbox=config.sandbox)
    judged: dict[str, dict[str, list[Any]]] = {}
    seconds: dict[str, float] = {}
    for name, spec in humans.items():
        started = timer()
        log("evaluate", f"{config.k} draws from the {name} human ({spec}) on {len(prefixes)} held-out prefixes")
        judged[name] = draws(config, prefixes, spec, judge)
        write_jsonl(work / f"eval_{name}.jsonl", [judged_row(j) for js in judged[name].values() for j in js])
        seconds[f"draws_{name}"] = round(timer() - started, 1)

    weights = {p.key(): p.weight for p in prefixes}
    result = compare(
        judged["base"], judged["trained"], weights, groups=prefix_groups(prefixes), n_boot=config.n_boot, seed=0
    )
    per_prefix = {name: draw_metrics(judged[name]) for name in humans}
    metrics: dict[str, Any] = {
        "config": asdict(config),
        "humans": humans,
        "held_out_prefixes": len(prefixes),
        "held_out_tasks": len({p.task.task_id for p in prefixes}),
        "draws_per_prefix": config.k,
        "compare": result,
        "per_prefix": per_prefix,
    }
    for metric, row in result.items():
        log(
            "evaluate",
            f"{metric:17} base {row['base']:.3f}  trained {row['trained']:.3f}  "
            f"diff {row['diff']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]",
        )

    if config.probe:
        tasks = list({p.task.task_id: p.task for p in prefixes}.values())[: config.probe_limit]
        tasks_file = work / "heldout_tasks.jsonl"
        tasks_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks), encoding="utf-8")
        metrics["probe"] = {}
        for name, spec in humans.items():
            started = timer()
            metrics["probe"][name] = probe(config, spec, tasks_file, work / f"probe_{name}")
            seconds[f"probe_{name}"] = round(timer() - started, 1)
    metrics["seconds"] = {**seconds, "total": timer()}
    save_json(work / METRICS["evaluate"], metrics)
    return metrics


if __name__ == "__main__":
    main(parse_config(EvalConfig))
