"""A log of colbench's Inspect tasks (``inspect eval colbench/backend``, docs/integrations.md) read as a run, so
``colbench report`` ranks it beside run directories: the task's metadata holds the run.json fields it fixed, Inspect's
log the models and epochs, each sample's score the episode's record; a sample that errored (an infrastructure
failure) is an ``infra_error`` record, never a score."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from colbench._util.storage import sha256_text
from colbench.errors import ConfigError, DataError
from colbench.runs import EpisodeRecord, Run
from colbench.runs.run_json import FORMAT, RunConfig
from colbench.types.chat import Usage


def read_inspect_log(path: str | Path) -> Run:
    """The run an Inspect log of a colbench task holds; a log of another task, or one that is not a log, is a
    DataError naming the file."""
    try:
        from inspect_ai.log import read_eval_log

        from colbench.integrations.inspect_tasks import HUMAN, RUN, colbench_verdict  # the inspect extra: for a log
    except ImportError as exc:
        raise ConfigError(f"{path}: reading an Inspect log needs inspect-ai (pip install 'colbench[inspect]')") from exc
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # Inspect raises what its readers raise: a file it cannot read is the user's input
        raise DataError(f"{path}: not an Inspect log ({type(exc).__name__}: {exc})") from None
    fixed = (log.eval.metadata or {}).get(RUN)
    if not isinstance(fixed, dict):
        raise DataError(f"{path}: an Inspect log of {log.eval.task}, not of a colbench task (no {RUN} metadata)")
    human = (log.eval.model_roles or {}).get(HUMAN)
    human = human[0] if isinstance(human, list) else human  # a role bound to several models asks the first
    ids = [str(i) for i in log.eval.dataset.sample_ids or []]
    config: dict[str, Any] = {
        **fixed,
        "format": FORMAT,
        "created": log.eval.created,
        "trials": log.eval.config.epochs or 1,
        "tasks": {**fixed["tasks"], "count": len(ids), "ids_sha256": sha256_text("\n".join(ids))},
        "agent": {"spec": log.eval.model, "name": log.eval.model},
        "simulator": {**fixed["simulator"], "spec": f"inspect:{HUMAN}", "model": human.model if human else None},
    }
    run = Run(path=Path(path), config=RunConfig.model_validate(config))
    scorer = colbench_verdict.__name__
    for sample in log.samples or []:
        score = next((s for name, s in (sample.scores or {}).items() if name.split("/")[-1] == scorer), None)
        record: dict[str, Any] = {"task_id": str(sample.id), "trial": sample.epoch - 1}
        if sample.error is None and score is not None and score.metadata:
            record.update(status="ok", answer=score.answer, **score.metadata)
        else:
            error = sample.error.message if sample.error else "not scored"
            record.update(status="infra_error", error=" ".join(error.split())[:1000])
        run.episodes[(record["task_id"], record["trial"])] = EpisodeRecord.model_validate(record)
    run.records = len(run.episodes)
    used, by_human = log.stats.model_usage.get(log.eval.model), log.stats.role_usage.get(HUMAN)
    for role, usage in (("agent", used), ("simulator", by_human)):
        if usage is not None:
            run.usage[role] = Usage(usage.input_tokens, usage.output_tokens)
    if used is not None and by_human is not None and human is not None and human.model == log.eval.model:
        run.usage["agent"] = Usage(  # one model in both roles: Inspect counts the human's tokens in the model's too
            used.input_tokens - by_human.input_tokens, used.output_tokens - by_human.output_tokens
        )
    return run
