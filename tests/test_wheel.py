"""The wheel carries everything: built from this checkout, installed into a fresh venv outside it, it runs a
scripted episode (tasks, prompts and the sandbox runner read from the wheel's data folders) and the sandbox doctor."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO

pytestmark = pytest.mark.slow

EPISODE = textwrap.dedent(
    """
    import json, sys
    import gymnasium as gym
    import colbench
    from colbench._util.datafiles import data_root
    from colbench.sandbox.contract import runner_path
    from colbench.tasks import load

    task = load("backend-sample")[3]
    env = gym.make("ColBench-Backend-v1", tasks="backend-sample", sandbox="bwrap")
    obs, info = env.reset(options={"task_id": task.task_id})
    obs, reward, terminated, truncated, info = env.step("Should empty inputs give an empty result?")
    human = obs
    obs, reward, terminated, truncated, info = env.step("I WANT TO ANSWER:\\n" + task.ground_truth)
    print(json.dumps({
        "package": colbench.__file__, "data": str(data_root()), "runner": str(runner_path()),
        "prompt": task.problem_description[:40] in env.unwrapped.domain.agent_prompt(task, 10),
        "human": human, "reward": reward, "terminated": terminated, "success": info["success"],
    }))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", str(REPO), "-w", str(out), "--no-deps", "-q"]
    try:
        import hatchling  # noqa: F401
    except ImportError:
        pass  # pip fetches it into an isolated build environment
    else:
        argv.append("--no-build-isolation")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 and "hatchling" in done.stderr and "connection" in done.stderr.lower():
        pytest.skip(f"cannot fetch the build backend: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("colbench-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (its dependencies from this interpreter's site-packages) with the wheel installed into it."""
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, timeout=120
    )
    yield root
    shutil.rmtree(root, ignore_errors=True)


def in_venv(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_wheel_holds_the_data_folders(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        script = archive.getinfo("colbench/_data/sandbox/build-offline.sh")
        (points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(points).decode()
    # Inspect's task registry finds `inspect eval colbench/backend` by this (tests/integrations/test_integrations_inspect.py)
    assert "[inspect_ai]\ncolbench = colbench.integrations.inspect_tasks" in entry_points
    assert {
        "colbench/_data/envs/backend/ColBench-Backend-v0.toml",
        "colbench/_data/envs/backend/prompts/agent.txt",
        "colbench/_data/envs/frontend/prompts/simulator.txt",
        "colbench/_data/tasks/manifest.json",
        "colbench/_data/tasks/samples/backend-sample.jsonl",
        "colbench/_data/tasks/samples/frontend-sample.jsonl",
        "colbench/_data/sandbox/Dockerfile",
        "colbench/_data/sandbox/runner.py",
        "colbench/sandbox/image.py",
        "colbench/render/assets/tailwind-2.2.19.min.css",
        "colbench/view/templates/episode.html",
        "colbench/view/static/view.js",
        "colbench/view/static/view.css",
        "colbench_verifiers/__init__.py",  # verifiers' taskset id (tests/integrations/test_integrations_verifiers_id.py)
    } <= names
    assert script.external_attr >> 16 & 0o111, "the build script lost its executable bit"
    assert not any(name.startswith(("tests/", "envs/", "tasks/", "sandbox/")) for name in names)
    modules = {str(p.relative_to(REPO)) for p in (REPO / "colbench").rglob("*.py")}
    assert modules - names == set(), "modules missing from the wheel (an ignore rule that matches too much?)"


def test_an_installed_wheel_runs_an_episode_and_the_doctor(venv: Path, tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (the README's set-up command installs it)")
    done = in_venv(venv, str(venv / "bin" / "python"), "-c", EPISODE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    site = str(venv)
    assert result["package"].startswith(site), "colbench was imported from the checkout, not the wheel"
    assert result["data"].startswith(site) and result["runner"].startswith(site)
    assert result["prompt"] and result["human"] == "I don't know."
    assert (result["reward"], result["terminated"], result["success"]) == (1.0, True, True)

    doctor = in_venv(venv, str(venv / "bin" / "colbench"), "sandbox", "doctor", cwd=tmp_path)
    lines = doctor.stdout.splitlines()
    assert any(line.startswith(("OK   bubblewrap", "WARN bubblewrap")) for line in lines), doctor.stdout
    if any(line.startswith("OK   sandbox image") for line in lines):  # Docker here: the wheel's runner in it
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert any(line.startswith("OK   runner in image") for line in lines), doctor.stdout
