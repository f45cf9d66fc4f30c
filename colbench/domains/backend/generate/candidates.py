"""Seeds, the generator prompt, and a generator reply turned into a candidate task.

A candidate's id is a function of the seed file's content, the run seed and its index alone, so a restarted run
knows which candidates it already decided (kept or rejected) without asking the model again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench._util.storage import sha256_text
from colbench.domains.backend.scorer import extract_code
from colbench.errors import DataError
from colbench.tasks.rows import task_from_row
from colbench.types.task import Task

DIFFICULTIES = ("easy", "medium", "hard")
HIDDEN = (
    "the exact constants and thresholds",
    "the edge cases and what to return for them",
    "the order and types of the arguments",
)
_PROMPT = (Path(__file__).parent / "generator_prompt.txt").read_text(encoding="utf-8")
_JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


@dataclass(frozen=True)
class Seed:
    """What one candidate is generated from: a topic, and optionally an example task or function to vary."""

    topic: str
    example: str = ""


def read_seeds(path: str) -> list[Seed]:
    """A seeds file: ``.jsonl`` rows (``{"topic": ...}`` or ColBench task rows), ``.py`` (each top-level function
    an example), else one topic per line. A line that does not parse is a DataError naming ``file:line``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the seeds file: {exc}") from None
    seeds: list[Seed] = []
    if path.endswith(".py"):
        try:
            compile(text, path, "exec")
        except SyntaxError as exc:
            raise DataError(f"{path}:{exc.lineno}: not Python: {exc.msg}") from None
        for chunk in re.split(r"\n(?=def )", "\n" + text):
            if chunk.strip().startswith("def "):
                name = chunk.split("(", 1)[0].split()[-1]
                seeds.append(Seed(topic=name.replace("_", " "), example=chunk.strip()))
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                seeds.append(_seed_line(line, f"{path}:{number}", path.endswith(".jsonl")))
    if not seeds:
        raise DataError(f"{path}: no seeds in file")
    return seeds


def _seed_line(line: str, where: str, is_json: bool) -> Seed:
    if not is_json:
        return Seed(topic=line.strip())
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not JSON: {exc.msg}") from None
    if isinstance(row, dict) and isinstance(row.get("topic"), str) and row["topic"].strip():
        return Seed(topic=row["topic"].strip())
    task = task_from_row(row, domain="backend", where=where)
    return Seed(topic=" ".join(task.problem_description.split())[:120], example=task.ground_truth)


def candidate_id(seeds_digest: str, run_seed: int, index: int) -> str:
    return sha256_text(f"{seeds_digest}:{run_seed}:{index}")[:12]


def prompt_for(seed: Seed, index: int) -> str:
    """The generator's message: the seed's topic, a difficulty and the details to hide, varied by ``index``."""
    example = f"Vary this example (do not copy it):\n```python\n{seed.example}\n```\n" if seed.example else ""
    return _PROMPT.format(
        topic=seed.topic,
        difficulty=DIFFICULTIES[index % len(DIFFICULTIES)],
        hidden=HIDDEN[index % len(HIDDEN)],
        example=example,
    )


class Malformed(Exception):
    """A reply that is no candidate: the reason goes to the rejects file."""


def parse_reply(text: str) -> Task:
    """The candidate task in a generator reply; :class:`Malformed` with the reason otherwise."""
    match = _JSON_BLOCK.search(text)
    body = match.group(1) if match else text.strip()
    try:
        row: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise Malformed(f"the reply is not a JSON object: {exc.msg}") from None
    if not isinstance(row, dict):
        raise Malformed("the reply is not a JSON object")
    code = row.get("ground_truth")
    if not isinstance(code, str) or "def " not in code:
        raise Malformed("the reply has no reference code (ground_truth with a function)")
    row = {**row, "ground_truth": extract_code(code) if "```" in code else code}
    row.pop("task_id", None)
    try:
        task = task_from_row(row, domain="backend", where="reply")
    except DataError as exc:
        raise Malformed(str(exc)) from None
    if not task.test_cases:
        raise Malformed("the reply has no test_cases")
    return task
