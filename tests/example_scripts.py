"""Running an example script as its users do (a subprocess with the repository's interpreter), for smoke tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from paths import REPO


def run_example(script: str, args: list[str], out: Path, timeout: int) -> dict[str, Any]:
    """Runs ``examples/<script>`` with ``args`` and ``--out out``; returns the ``metrics.json`` it wrote there."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / script), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    return metrics
