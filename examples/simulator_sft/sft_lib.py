"""What the simulator-SFT stage scripts share: a dataclass config as the command line, the work directory's file
names, JSON(L) helpers, stage timing, and the human simulator as the env builds it.

Each stage (``make_prefixes.py``, ``sample_candidates.py``, ``select_replies.py``, ``train_sft.py``,
``evaluate.py``) is a script that reads top to bottom; this module holds only what two or more of them need. The
library under them is :mod:`colbench.simtrain` (tested in tests/simtrain).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from colbench._util.storage import write_atomic, write_json_atomic

T = TypeVar("T")

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


def parse_config(cls: type[T], argv: Sequence[str] | None = None) -> T:
    """A dataclass as a command line: every field is ``--field-name`` (bools: ``--flag`` / ``--no-flag``; lists take
    several values; ``X | None`` fields accept ``none``); ``--help`` lists the defaults."""
    hints = typing.get_type_hints(cls)
    parser = argparse.ArgumentParser(description=cls.__doc__)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = hints[f.name]
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        args = typing.get_args(kind)
        optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args
        base = next((a for a in args if a is not type(None)), kind) if optional else kind
        if base is bool and optional:  # three states: --flag true | false | none
            parser.add_argument(
                flag, type=_tristate, default=default, help=f"true | false | none; default: {default!r}"
            )
        elif base is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=f"{default!r}")
        elif typing.get_origin(base) is list:
            parser.add_argument(flag, nargs="*", type=typing.get_args(base)[0], default=default, help=f"{default!r}")
        else:
            convert = (lambda text, c=base: None if text.lower() in ("none", "") else c(text)) if optional else base
            parser.add_argument(flag, type=convert, default=default, help=f"default: {default!r}")
    return cls(**vars(parser.parse_args(argv)))


def _tristate(text: str) -> bool | None:
    words = {"true": True, "yes": True, "false": False, "no": False, "none": None, "": None}
    if text.lower() not in words:
        raise argparse.ArgumentTypeError(f"expected true, false or none, not {text!r}")
    return words[text.lower()]


def config_args(config: Any) -> list[str]:
    """The command line that ``parse_config`` turns back into ``config`` (``run_all.py`` runs stages with it)."""
    argv: list[str] = []
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value, flag = getattr(config, f.name), "--" + f.name.replace("_", "-")
        if hints[f.name] == bool | None:
            argv += [flag, str(value).lower()]
        elif isinstance(value, bool):
            argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, "none" if value is None else str(value)]
    return argv


def log(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", file=sys.stderr, flush=True)


def save_json(path: str | Path, value: Any) -> None:
    write_json_atomic(path, value)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> int:
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(lines))
    return len(lines)


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
