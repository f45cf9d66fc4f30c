"""The core dependencies' floors hold: a separate venv gets them at their lowest allowed versions (``uv pip install
--resolution lowest-direct``) with the package, and runs the core package's fast suite there.

The suite (``FLOOR_SUITE``) is the part of the fast tests that needs only the core dependencies: the envs and their
vector form (Gymnasium), the LLM client (openai, httpx2, h11, tenacity, aiolimiter), the simulated humans and agents,
run directories and task files (pydantic, cachetools, numpy, rich). ``DESELECT`` names the tests in
those files that need an extra (the frontend's metrics, ``datasets``).

The venv lives in ``$COLBENCH_FLOORS_VENV`` (default ``~/.cache/colbench/floors-<key>``), keyed by the core
requirements and the interpreter, so a rerun reuses it; uv's own cache keeps the wheels. Raise a floor in
pyproject.toml when this fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from paths import REPO

from colbench._util.version import RESOLVED_AT

pytestmark = pytest.mark.slow

FLOOR_SUITE = [
    "tests/env/test_vector.py",
    "tests/env/test_human_env.py",
    "tests/llm/test_llm.py",
    "tests/humans/test_simulator.py",
    "tests/agents/test_agents.py",
    "tests/runs/test_runs.py",
    "tests/tasks/test_tasks.py",
]
DESELECT = "not frontend and not every_id and not prompt_dataset"


def core_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def floor(requirement: Requirement) -> Version | None:
    lows = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
    return max(lows) if lows else None


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (the verifiers extra installs it)")
    return uv


def _run(argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def floors_venv() -> Path:
    uv = _uv()
    tools = {name: _version(name) for name in ("pytest", "pytest-timeout")}  # the test runner as the main env has it
    key_text = json.dumps([sorted(str(r) for r in core_requirements()), sys.version, tools, RESOLVED_AT])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:12]
    default = Path.home() / ".cache" / "colbench" / f"floors-{key}"
    root = Path(os.environ.get("COLBENCH_FLOORS_VENV") or default)
    python = root / "bin" / "python"
    if not python.exists():
        made = _run([uv, "venv", "-q", "--python", sys.executable, str(root)])
        assert made.returncode == 0, made.stderr
    pins = [f"{name}=={version}" for name, version in tools.items()]
    # The core's own requirements at their floors; everything they pull in as the index stood for constraints.txt.
    bound = ["--exclude-newer", RESOLVED_AT]
    argv = [
        uv,
        "pip",
        "install",
        "-q",
        "--python",
        str(python),
        "--resolution",
        "lowest-direct",
        *bound,
        "-e",
        str(REPO),
    ]
    done = _run([*argv, *pins])
    if done.returncode != 0 and any(w in done.stderr.lower() for w in ("connect", "dns", "network")):
        pytest.skip(f"the package index cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    return root


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def test_the_core_dependencies_are_installed_at_their_floors(floors_venv: Path) -> None:
    listed = _run([_uv(), "pip", "list", "--format", "json", "--python", str(floors_venv / "bin" / "python")])
    assert listed.returncode == 0, listed.stderr
    installed = {p["name"].lower().replace("_", "-"): Version(p["version"]) for p in json.loads(listed.stdout)}
    off = {}
    for requirement in core_requirements():
        low, have = floor(requirement), installed.get(requirement.name.lower().replace("_", "-"))
        if low is not None and (have is None or have.release[: len(low.release)] != low.release):
            off[requirement.name] = f"{have} (floor {low})"
    assert not off, f"not installed at the floor: {off}"


def test_the_fast_core_suite_passes_at_the_floors(floors_venv: Path) -> None:
    python = str(floors_venv / "bin" / "python")
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", "-k", DESELECT, *FLOOR_SUITE]
    done = _run(argv, timeout=900)
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail
