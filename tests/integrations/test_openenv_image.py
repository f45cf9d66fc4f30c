"""The OpenEnv server image (openenv/): built once offline (cached by its inputs), started with the least privilege
bubblewrap needs in a container (the seccomp profile openenv/seccomp.json: Docker's default plus five rules, each
measured here to be needed) and no Docker socket, and played through OpenEnv's client: an honest answer scores 1,
an attack answer (reading the reference or the tests, the network, a fork bomb, writing outside /tmp) scores 0 and
leaves the server as it was, and the hidden reference never reaches the client. The launch docs/integrations.md
shows is started with exactly its flags."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core")

import httpx
import yaml
from doc_launches import launch, shell_words
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from colbench.integrations.openenv import DEFAULT_ENV, ColbenchAction, ColbenchClient
from colbench.sandbox import taskenv
from colbench.tasks import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TAG = os.environ.get("COLBENCH_OPENENV_IMAGE", "colbench-openenv:1")  # what scripts/setup.sh builds
TOKEN = "image-test-token"
PROFILE = ROOT / "openenv" / "seccomp.json"
#: What bubblewrap needs in a container, run as a non-root user (docs/integrations.md, OpenEnv): no added capability.
LEAST_PRIVILEGE = ["--security-opt", f"seccomp={PROFILE}", "--security-opt", "systempaths=unconfined"]
#: Builds one sandbox as the server's bwrap runtime does (its own command line) and runs /bin/true in it.
BWRAP_PROBE = """
import subprocess
from colbench.sandbox import taskenv
from colbench.sandbox.bwrap import bwrap_argv
from colbench.sandbox.pool import Limits
argv = bwrap_argv(as_root=False, limits=Limits(), rootfs=taskenv.root())
done = subprocess.run(argv[: argv.index("--")] + ["--", "/bin/true"], capture_output=True, text=True)
print(done.returncode, done.stderr.strip())
"""
#: unshare() with and without a new user namespace, from a process of the server (an answer could try the same).
UNSHARE_PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for flags in (0x10000000, 0x10000000 | 0x40000000, 0x40000000):  # user; user and net; net
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(flags) == 0 else ctypes.get_errno())
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
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
    def __init__(self, image: str, *args: str, command: list[str] | None = None) -> None:
        """Started with the test's defaults and ``args``, or with ``command`` (a whole ``docker run -d``)."""
        env = ["-e", f"COLBENCH_SERVE_TOKEN={TOKEN}", "-e", "COLBENCH_TASKS=backend-sample"]
        command = command or ["docker", "run", "-d", "--rm", "-p", "127.0.0.1::8000", *env, *args, image]
        started = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        assert started.returncode == 0, started.stderr
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
    # scored in the task environment this machine's runtimes use: the image carries the same root filesystem
    assert observations[-1]["info"]["taskenv"] == taskenv.installed().digest  # type: ignore[index]
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


def run_in_image(image: str, code: str, *options: str) -> str:
    """``python3 -c code`` in the image as its server runs (uid 10001), with ``options``: its output."""
    done = subprocess.run(
        ["docker", "run", "--rm", *options, image, "python3", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def profile_without(tmp_path: Path, dropped: set[str] | None) -> Path:
    """openenv/seccomp.json without the rules it adds for the syscalls in ``dropped`` (None: without all it adds,
    i.e. Docker's default profile)."""
    profile = json.loads(PROFILE.read_text())
    added = [r for r in profile["syscalls"] if str(r.get("comment", "")).startswith("colbench:")]
    profile["syscalls"] = [
        r for r in profile["syscalls"] if r not in added or (dropped is not None and not set(r["names"]) & dropped)
    ]
    path = tmp_path / f"without-{'-'.join(sorted(dropped)) if dropped else 'all'}.json"
    path.write_text(json.dumps(profile))
    return path


def test_each_rule_the_profile_adds_is_needed_and_they_suffice(openenv_image: str, tmp_path: Path) -> None:
    """Measured least privilege: with the profile bubblewrap builds a sandbox; without any one of the syscalls it
    adds to Docker's default (or without them all) it fails at that syscall."""
    profile = json.loads(PROFILE.read_text())
    added = sorted(
        {n for r in profile["syscalls"] if str(r.get("comment", "")).startswith("colbench:") for n in r["names"]}
    )
    assert added == ["clone", "mount", "pivot_root", "umount2", "unshare"]
    assert run_in_image(openenv_image, BWRAP_PROBE, *LEAST_PRIVILEGE).strip() == "0"
    failures = {
        "clone": "No permissions to create new namespace",
        "unshare": "unshare user ns: Operation not permitted",
        "mount": "Failed to make / slave: Operation not permitted",
        "umount2": "unmount old root: Operation not permitted",
        "pivot_root": "pivot_root: Operation not permitted",
    }
    for dropped, wanted in [*((frozenset({n}), failures[n]) for n in added), (None, failures["clone"])]:
        options = ["--security-opt", f"seccomp={profile_without(tmp_path, set(dropped) if dropped else None)}"]
        seen = run_in_image(openenv_image, BWRAP_PROBE, *options, "--security-opt", "systempaths=unconfined")
        assert seen.startswith("1 ") and wanted in seen, (dropped, seen)
    # systempaths=unconfined is still needed beside the profile: the kernel will not mount a new /proc otherwise
    seen = run_in_image(openenv_image, BWRAP_PROBE, "--security-opt", f"seccomp={PROFILE}")
    assert seen.startswith("1 ") and "Can't mount proc" in seen


def test_the_profile_allows_namespaces_only_inside_a_new_user_namespace(openenv_image: str) -> None:
    """Narrower than seccomp=unconfined: unshare takes CLONE_NEWUSER alone; a user and network namespace at once,
    which unconfined allows, is refused (EPERM, 1)."""
    assert run_in_image(openenv_image, UNSHARE_PROBE, *LEAST_PRIVILEGE).split() == ["0", "1", "1"]
    unconfined = ["--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"]
    assert run_in_image(openenv_image, UNSHARE_PROBE, *unconfined).split() == ["0", "0", "1"]


def documented_launch() -> list[str]:
    """The docs' ``docker run`` (``<!-- launch: openenv -->``) with every option as written; only what the test
    must choose differs: ``-d`` (detached), the host side of ``-p`` (a free loopback port), and the values the user
    supplies in variables: the token, the API key, and the tasks (``backend-sample``: the container is offline)."""
    words = shell_words(launch("openenv"))
    assert words[:2] == ["docker", "run"], words
    values = {
        "COLBENCH_SERVE_TOKEN": TOKEN,
        "COLBENCH_SIMULATOR_API_KEY": "sk-unused",
        "COLBENCH_TASKS": "backend-sample",
    }
    command = ["docker", "run", "-d"]
    rest = iter(words[2:])
    for word in rest:
        if word == "-p":
            _, _, container = next(rest).rpartition(":")
            assert container == "8000", container
            command += ["-p", "127.0.0.1::8000"]
        elif word == "-e":
            name, _, value = next(rest).partition("=")
            command += ["-e", f"{name}={values.get(name, value)}"]
        else:
            command.append(word)
    return command


def test_the_documented_launch_serves_openenv_clients(openenv_image: str, bundled_tasks: list[Task]) -> None:
    """The launch docs/integrations.md shows, started with exactly its flags (seccomp profile, system paths, token,
    an OpenAI simulator), played by OpenEnv's clients (``ColbenchClient``, and OpenEnv's own ``MCPToolClient`` with
    the token in its URL): the answer, given without asking the (unreachable) human, is scored 1 in the sandbox under
    the profile, and the server runs the newest env id."""
    command = documented_launch()
    assert command[-1] == TAG and f"seccomp={PROFILE.relative_to(ROOT)}" in command
    running = Container(openenv_image, command=command)
    try:
        task = bundled_tasks[3]

        async def episode() -> tuple[Any, Any, Any]:
            async with ColbenchClient(running.url, token=TOKEN, message_timeout_s=120) as env:
                first = await env.reset(task_id=task.task_id)
                done = await env.step(ColbenchAction(message=f"I WANT TO ANSWER:\n{task.ground_truth}"))
            url = running.url.replace("://", f"://colbench:{TOKEN}@")
            async with MCPToolClient(base_url=url, message_timeout_s=120) as tools:
                await tools.reset(task_id=task.task_id)
                answer = CallToolAction(tool_name="submit_answer", arguments={"answer": task.ground_truth})
                return first, done, await tools.step(answer)

        first, done, submitted = asyncio.run(episode())
    finally:
        logs = running.logs()
        running.stop()
    assert first.observation.info["task_id"] == task.task_id and done.done and done.reward == 1.0
    assert submitted.done and submitted.reward == 1.0
    assert f"colbench serve: {DEFAULT_ENV}" in logs and "out of date" not in logs, logs[-2000:]


def test_the_manifest_names_the_image_and_its_port() -> None:
    manifest = yaml.safe_load((ROOT / "openenv" / "openenv.yaml").read_text())
    assert manifest["spec_version"] == 1 and manifest["name"] == "colbench" and manifest["port"] == 8000
    dockerfile = (ROOT / "openenv" / "Dockerfile.offline").read_text()
    assert "EXPOSE 8000" in dockerfile and "USER 10001" in dockerfile
