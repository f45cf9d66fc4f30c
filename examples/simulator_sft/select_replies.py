"""Stage 3: judge every candidate, keep the best of each prefix, write the SFT rows.

(Named ``select_replies.py``, not ``select.py``: a script's folder comes first on ``sys.path``, and a ``select.py``
there would stand in for the standard library's ``select`` module that subprocess and asyncio import.)

Each candidate is scored by the checks colbench trusts (:class:`colbench.simtrain.Judge`), and per prefix
:func:`colbench.simtrain.select` keeps, in this order: no leak (veto), no false claim (veto: the claims checker ran
the reference), not empty or off-topic (veto), a checked true claim where any survivor has one, then the lowest
over-release; every candidate tied at the best is kept. ``judged.jsonl`` records every candidate with its scores and
why it was dropped; ``sft.jsonl`` is one TRL conversational prompt-completion row per kept reply: the human's own
request (the env's prompt and view) as the prompt and the reply as the completion.

    python examples/simulator_sft/select_replies.py --workdir runs/simsft
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from sft_lib import (
    CANDIDATES,
    ENV_ID,
    JUDGED,
    METRICS,
    SFT_ROWS,
    TRAIN_PREFIXES,
    Timer,
    judged_row,
    log,
    make_human,
    read_jsonl,
    save_json,
    write_jsonl,
)

from colbench._util.config_cli import parse_config


@dataclass
class SelectConfig:
    """Judge the candidates, select the best per prefix, write the SFT rows."""

    workdir: str = "runs/simulator_sft"
    simulator: str = "llamacpp"  # only to render the human's request (its prompt), as the env does
    temperature: float = 0.7
    env_id: str = ENV_ID
    sandbox: str = "auto"  # the claims checker's runtime
    leak_threshold: float | None = None  # None: the domain's


def main(config: SelectConfig) -> dict[str, object]:
    import asyncio

    from colbench.simtrain import Candidate, Judge, read_prefixes, select, sft_rows

    timer = Timer()
    work = Path(config.workdir)
    prefixes = {p.key(): p for p in read_prefixes(work / TRAIN_PREFIXES)}
    by_prefix: dict[str, list[Candidate]] = {}
    for row in read_jsonl(work / CANDIDATES):
        by_prefix.setdefault(row["prefix"], []).append(Candidate(**row))
    judge = Judge(config.env_id, sandbox=config.sandbox, leak_threshold=config.leak_threshold)
    human = make_human(config.env_id, config.simulator, config.temperature)
    judged_rows, rows = [], []
    reasons: Counter[str] = Counter()
    prefixes_kept = 0
    for key, candidates in by_prefix.items():
        decided = select(judge.judge(prefixes[key], candidates))
        judged_rows += [judged_row(j) for j in decided]
        reasons.update(j.dropped or "kept" for j in decided)
        for row in sft_rows(prefixes[key], decided, human):
            messages = row["messages"]  # prompt-completion: TRL trains on the completion (the human's reply) only
            rows.append({"prompt": messages[:-1], "completion": messages[-1:], "prefix": key})
        prefixes_kept += any(j.kept for j in decided)
    asyncio.run(human.aclose())
    write_jsonl(work / JUDGED, judged_rows)
    write_jsonl(work / SFT_ROWS, rows)
    counts = {
        "candidates": len(judged_rows),
        "leaked": sum(r["leaked"] for r in judged_rows),
        "with_false_claim": sum(r["false_claims"] > 0 for r in judged_rows),
        "with_true_claim": sum(r["true_claims"] > 0 for r in judged_rows),
        "empty": sum(r["empty"] for r in judged_rows),
        "off_topic": sum(r["off_topic"] for r in judged_rows),
        "refusal": sum(r["refusal"] for r in judged_rows),
    }
    metrics = {
        "config": asdict(config),
        "prefixes": len(by_prefix),
        "prefixes_with_a_kept_reply": prefixes_kept,
        "sft_rows": len(rows),
        "outcome": dict(reasons),
        "found": counts,
        "seconds": timer(),
    }
    save_json(work / METRICS["select"], metrics)
    log("select", f"{len(rows)} rows kept of {len(judged_rows)} candidates: {dict(reasons)}")
    return metrics


if __name__ == "__main__":
    main(parse_config(SelectConfig))
