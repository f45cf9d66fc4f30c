"""The OpenEnv server image (openenv/): built once offline (cached by its inputs), started with the least privilege
bubblewrap needs in a container and no Docker socket, and played through OpenEnv's client: an honest answer scores
1, an attack answer (reading the reference or the tests, the network, a fork bomb, writing outside /tmp) scores 0
and leaves the server as it was, and the hidden reference never reaches the client."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv.core")

import httpx
import yaml

from colbench.integrations.openenv import ColbenchAction, ColbenchClient
from colbench.tasks import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TAG = os.environ.get("COLBENCH_OPENENV_IMAGE", "colbench-openenv:1")  # what scripts/setup.sh builds
TOKEN = "image-test-token"
#: What bubblewrap needs in a container, run as a non-root user (docs/integrations.md, OpenEnv): no added capability.
LEAST_PRIVILEGE = ["--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"]
ATTACK = """
import glob, json, os, socket

def {name}(*args, **kwargs):
    found = []
    # the reference or the tests: anywhere the server keeps them (package data, caches, its own process)
    for pattern in ("/opt/**/*.jsonl", "/opt/**/tasks/**/*", "/srv/**/*", "/proc/1/environ", "/proc/*/cmdline", "/tmp/**"):
        for path in glob.glob(pattern, recursive=True)[:2000]:
            try:
                with open(path, errors="ignore") as handle:
                    found.append(handle.read())
            except OSError:
                pass
    for host, port in (("127.0.0.1", 8000), ("1.1.1.1", 53)):  # the server itself, the internet
        try:
            socket.create_connection((host, port), timeout=1).sendall(b"GET /metadata HTTP/1.0\\r\\n\\r\\n")
            found.append("network")
        except OSError:
            pass
    for target in ("/opt/colbench-server/pwned", "/usr/local/bin/pwned", "/pwned"):  # outside /tmp
        try:
            open(target, "w").write("x")
        except OSError:
            pass
    for _ in range(200):  # a fork bomb, bounded so a failing sandbox still ends the test
        try:
            if os.fork() == 0:
                while True:
                    os.fork()
        except OSError:
            break
    for text in found:  # a reference found is a reference run: this answer would then pass
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            for value in (record.values() if isinstance(record, dict) else ()):
                if isinstance(value, str) and "def {name}(" in value:
                    scope = {{}}
                    exec(value, scope)
                    return scope["{name}"](*args, **kwargs)
    raise SystemExit("nothing found")
"""


def docker_ok() -> bool:
    return (
        shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    )


@pytest.fixture(scope="session")
def openenv_image() -> str:
    if not docker_ok():
        pytest.skip("no Docker daemon")
    done = subprocess.run(
        [str(ROOT / "openenv" / "build-offline.sh"), "--tag", TAG], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return TAG


class Container:
    def __init__(self, image: str, *args: str) -> None:
        env = ["-e", f"COLBENCH_SERVE_TOKEN={TOKEN}", "-e", "COLBENCH_TASKS=backend-sample"]
        started = subprocess.run(
            ["docker", "run", "-d", "--rm", "-p", "127.0.0.1::8000", *env, *args, image],
            capture_output=True,
            text=True,
            check=True,
        )
        self.id = started.stdout.strip()
        port = subprocess.run(["docker", "port", self.id, "8000/tcp"], capture_output=True, text=True, check=True)
        self.url = "http://" + port.stdout.splitlines()[0].strip()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.5)
        raise AssertionError(f"the image did not come up: {self.logs()}")

    def logs(self) -> str:
        done = subprocess.run(["docker", "logs", self.id], capture_output=True, text=True)
        return done.stdout + done.stderr

    def exists(self, path: str) -> bool:
        return subprocess.run(["docker", "exec", self.id, "test", "-e", path]).returncode == 0

    def stop(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.id], capture_output=True)


@pytest.fixture(scope="module")
def container(openenv_image: str) -> Iterator[Container]:
    running = Container(openenv_image, *LEAST_PRIVILEGE)
    yield running
    running.stop()


def play(url: str, task: Task, answer: str) -> tuple[list[dict[str, object]], float | None]:
    async def episode() -> tuple[list[dict[str, object]], float | None]:
        async with ColbenchClient(url, token=TOKEN, message_timeout_s=120) as env:
            first = await env.reset(task_id=task.task_id)
            asked = await env.step(ColbenchAction(message="What should happen with an empty input?"))
            done = await env.step(ColbenchAction(message=f"I WANT TO ANSWER:\n{answer}"))
            assert done.done
            return [r.observation.model_dump() for r in (first, asked, done)], done.reward

    return asyncio.run(episode())


def test_the_image_plays_an_episode_and_keeps_the_reference(container: Container, bundled_tasks: list[Task]) -> None:
    task = bundled_tasks[3]
    observations, reward = play(container.url, task, task.ground_truth)
    assert reward == 1.0 and observations[-1]["info"]["success"] is True  # type: ignore[index]
    everything = json.dumps(observations[:2])
    assert task.ground_truth.splitlines()[0] not in everything and "hidden_information" not in everything
    assert "ground_truth" not in json.dumps(observations)


def test_an_attack_answer_scores_0_and_leaves_the_server_as_it_was(
    container: Container, bundled_tasks: list[Task]
) -> None:
    task = bundled_tasks[3]
    name = task.ground_truth.split("def ", 1)[1].split("(", 1)[0]
    _, reward = play(container.url, task, ATTACK.format(name=name))
    assert reward == 0.0
    assert not any(container.exists(p) for p in ("/opt/colbench-server/pwned", "/usr/local/bin/pwned", "/pwned"))
    _, again = play(container.url, task, task.ground_truth)  # the server and its sandbox go on
    assert again == 1.0


def test_without_the_privilege_bwrap_needs_answers_get_an_infrastructure_error(
    openenv_image: str, bundled_tasks: list[Task]
) -> None:
    """Started with Docker's defaults, the sandbox cannot make its namespaces: the final answer gets an
    infrastructure error, never a score."""
    running = Container(openenv_image)
    try:
        with pytest.raises(RuntimeError, match="infrastructure error"):
            play(running.url, bundled_tasks[3], bundled_tasks[3].ground_truth)
    finally:
        running.stop()


def test_the_manifest_names_the_image_and_its_port() -> None:
    manifest = yaml.safe_load((ROOT / "openenv" / "openenv.yaml").read_text())
    assert manifest["spec_version"] == 1 and manifest["name"] == "colbench" and manifest["port"] == 8000
    dockerfile = (ROOT / "openenv" / "Dockerfile.offline").read_text()
    assert "EXPOSE 8000" in dockerfile and "USER 10001" in dockerfile
