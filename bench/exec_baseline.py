"""The original release's way of scoring, the baseline of bench/score_backend.py: in this process, no sandbox.

    python bench/exec_baseline.py TASKS.jsonl

As a command it reads the task file with the json module (standard library only, as the original's evaluation
script did: no colbench import is billed to it) and scores every reference as the answer; score_backend.py times
that whole command against ``colbench score backend`` on the same file.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import warnings
from pathlib import Path


def unsafe_exec_score(reference: str, tests: list[str], code: str) -> int:
    """What the original release did (minus its blocklist): everything in this process."""
    passed = 0
    for expr in tests:
        try:
            random.seed(0)
            ref_ns: dict[str, object] = {}
            exec(reference, ref_ns)
            expected = eval(expr, ref_ns)
            random.seed(0)
            ans_ns: dict[str, object] = {}
            exec(code, ans_ns)
            got = eval(expr, ans_ns)
            passed += bool(expected == got)
        except Exception:
            pass
    return passed


def main(tasks_file: str) -> int:
    rows = [json.loads(line) for line in Path(tasks_file).read_text(encoding="utf-8").splitlines() if line.strip()]
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # references write files into their working directory
        passed = sum(
            unsafe_exec_score(row["ground_truth"], list(row["test_cases"].values()), row["ground_truth"])
            for row in rows
        )
    print(f"{len(rows)} tasks, {passed} tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
