"""What the simulator-SFT stage scripts share: a dataclass config as the command line, the work directory's file
names, JSON(L) helpers, stage timing, and the human simulator as the env builds it.

Each stage (``make_prefixes.py``, ``sample_candidates.py``, ``select_replies.py``, ``train_sft.py``,
``evaluate.py``) is a script that reads top to bottom; this module holds only what two or more of them need. The
library under them is :mod:`colbench.simtrain` (tested in tests/simtrain).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from colbench._util.storage import iter_jsonl, write_json_atomic, write_jsonl_atomic

ENV_ID = "ColBench-Backend-v2"
"""The env whose human is trained (its domain's human prompt, leak detector, claims checker and scorer)."""
SMOLLM2 = "smollm2"
"""The model spec of the embedded human: SmolLM2-135M-Instruct, as transformers reads it from the bundled GGUF."""

# the work directory: every stage reads and writes these names under --workdir
TRAIN_PREFIXES = "prefixes_train.jsonl"
HELD_OUT_PREFIXES = "prefixes_heldout.jsonl"
CANDIDATES = "candidates.jsonl"
JUDGED = "judged.jsonl"
SFT_ROWS = "sft.jsonl"
HUMAN_DIR = "human"  # the trained transformers model; human.gguf beside it, base.gguf the start point as a GGUF
BASE_GGUF = "base.gguf"
METRICS = {
    "prefixes": "prefixes.metrics.json",
    "sample": "sample.metrics.json",
    "select": "select.metrics.json",
    "train": "train.metrics.json",
    "evaluate": "evaluation.json",
}
"""Each stage's figures, by stage (``run_all.py`` gathers them into summary.json)."""


def log(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", file=sys.stderr, flush=True)


save_json = write_json_atomic
write_jsonl = write_jsonl_atomic  # rows as JSON lines, atomically; returns how many


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSONL file (bad JSON: a DataError naming the line)."""
    return (row for _, row in iter_jsonl(path))


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes: how the manifest names the data a model was trained on."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def simulator_options(temperature: float) -> dict[str, Any]:
    """The human's options, the same for every stage and for the env that will run it: the decoding temperature
    (the rest are the model spec's own defaults: reply length, banned strings, stops)."""
    return {"temperature": temperature}


def make_human(env_id: str, spec: str, temperature: float) -> Any:
    """The human of ``env_id``'s domain for ``spec``, built as the env builds it."""
    from colbench.env.simulators import make_simulator
    from colbench.simtrain.prefixes import env_domain

    return make_simulator(env_domain(env_id), spec, **simulator_options(temperature))


def judged_row(j: Any) -> dict[str, Any]:
    """One judged candidate as a JSONL row (what the selection found, and why it was dropped)."""
    c = j.candidate
    return {
        "prefix": c.prefix,
        "draw": c.draw,
        "seed": c.seed,
        "text": c.text,
        "kept": j.kept,
        "dropped": j.dropped,
        "leaked": j.leaked,
        "leak_score": j.leak_score,
        "false_claims": j.false_claims,
        "true_claims": j.true_claims,
        "over_release": j.over_release,
        "revealed": list(j.revealed),
        "empty": j.empty,
        "off_topic": j.off_topic,
        "refusal": j.refusal,
        "claims": [claim.as_dict() for claim in j.claims],
    }


class Timer:
    """Seconds since it was made (a stage's wall time, written into its metrics)."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self) -> float:
        return round(time.monotonic() - self.started, 1)
