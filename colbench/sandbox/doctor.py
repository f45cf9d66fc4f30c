"""``colbench sandbox doctor``: checks of the whole sandbox set-up (Docker, the image and its contract, the runner
inside it, bubblewrap), each with the fix to run when it fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from colbench.errors import SandboxError
from colbench.sandbox.image import (
    CONTRACT,
    DOCKER_TIMEOUT_S,
    IMAGE,
    LABEL_BUILD,
    PROBE_UID,
    docker_client,
    docker_sdk,
    honours_contract,
    image_labels,
    run_argv,
)
from colbench.sandbox.pool import WorkerPool, outcome_of

# Run inside the image by ``doctor``: every point of the contract a Python one-liner can see.
_CONTRACT_PROBE = """
import json, os, socket, sqlite3, sys
import bs4, numpy
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    net = "reachable"
except OSError as exc:
    net = type(exc).__name__ + ": " + str(exc)
print(json.dumps({
    "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
    "usr_bin_python3": os.path.exists("/usr/bin/python3"), "numpy": numpy.__version__, "bs4": bs4.__version__,
    "sqlite": sqlite3.sqlite_version, "opt": sorted(os.listdir("/opt/colbench")), "uid": os.getuid(), "net": net,
}))
"""
_RUNNER_JOB = {
    "id": 0,
    "code": "import numpy\ndef f(x):\n    return int(numpy.sum(x))",
    "tests": ["f([1,2,3])"],
    "timeout": 5,
    "memory_mb": 512,
    "max_processes": 32,
    "seed": 0,
    "max_bytes": 1_000_000,
}


@dataclass(frozen=True)
class Check:
    """One ``doctor`` finding. ``required`` checks decide the exit status; the others are advice."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


BUILD_FIX = "run: colbench sandbox build"
REBUILD_FIX = "run: colbench sandbox build --force"


def doctor(image: str = IMAGE) -> list[Check]:
    """Check everything the sandboxes need, in order; later Docker checks report 'not checked' after a failure."""
    cli = shutil.which("docker")
    fix = "" if cli else "install Docker Engine (apt-get install docker.io)"
    checks = [Check("docker CLI", bool(cli), cli or "the docker command is not on PATH", fix)]
    client = None
    why = "not checked: the Docker daemon is not reachable"
    try:
        sdk = docker_sdk()
        checks.append(Check("docker SDK", True, f"docker {getattr(sdk, '__version__', '?')} for Python"))
    except SandboxError as exc:
        checks.append(Check("docker SDK", False, str(exc), "pip install 'colbench[docker]'"))
        why = "not checked: no Docker SDK"
    else:
        try:
            client = docker_client()
            try:
                version = client.version()
            except Exception:
                version = {}
            where = os.environ.get("DOCKER_HOST") or "the default socket"
            found = f"Docker {version.get('Version')} (API {version.get('ApiVersion')}) at {where}"
            checks.append(Check("docker daemon", True, found))
        except SandboxError as exc:
            fix = "start the daemon (systemctl start docker) and make sure this user may use it (root or group docker)"
            checks.append(Check("docker daemon", False, str(exc), fix))
    if client is not None:
        checks.append(_check_limits(client))
        checks.extend(_check_image(client, image, cli))
    else:
        for name in ("resource limits", "sandbox image", "image contract", "runner in image"):
            checks.append(Check(name, False, why, "fix the checks above first"))
    checks.extend(_check_bwrap())
    checks.extend(_check_task_environments(image, docker_ok=client is not None and all(c.ok for c in checks)))
    return checks


def _check_task_environments(image: str, *, docker_ok: bool) -> list[Check]:
    """Each runtime's task environment, seen from inside: the manifest's probe run in its sandbox must print the
    manifest the runtime reports (what every score records); and the two runtimes should run the same one."""
    # the runtimes' modules only here: the checks above must work where one cannot even start
    from colbench.sandbox.bwrap import BwrapSandbox
    from colbench.sandbox.docker import DockerSandbox
    from colbench.sandbox.taskenv import BUILD_STEP, probe_source

    found: dict[str, str] = {}
    checks: list[Check] = []
    runtimes: list[tuple[str, Callable[[], WorkerPool]]] = []
    if shutil.which("bwrap"):
        runtimes.append(("bwrap", lambda: BwrapSandbox(workers=1)))
    if docker_ok:
        runtimes.append(("docker", lambda: DockerSandbox(workers=1, image=image)))
    for name, make in runtimes:
        label = f"task environment ({name})"
        try:
            sandbox = make()
        except SandboxError as exc:
            checks.append(Check(label, False, str(exc), BUILD_STEP.removeprefix("run ")))
            continue
        try:
            seen = sandbox.run_program(probe_source())
        finally:
            sandbox.close()
        environment = sandbox.environment
        try:
            same = json.loads(seen.stdout) == dict(environment.manifest)
        except ValueError:
            same = False
        if not same:
            why = seen.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["it printed another manifest"]
            checks.append(Check(label, False, f"inside the sandbox the probe disagrees: {why[0]}", REBUILD_FIX))
            continue
        found[name] = environment.digest
        checks.append(Check(label, True, f"{environment.digest}: {environment.summary()}"))
    if len(set(found.values())) > 1:
        detail = ", ".join(f"{name} {digest}" for name, digest in found.items())
        fix = "rebuild both from one tarball: " + REBUILD_FIX.removeprefix("run: ")
        checks.append(Check("one task environment", False, f"the runtimes differ ({detail})", fix, required=False))
    return checks


def _check_limits(client: Any) -> Check:
    try:
        info = client.info()
    except Exception as exc:
        return Check("resource limits", False, f"docker info failed: {exc}", "check the Docker daemon's logs")
    cgroup = f"cgroup v{info.get('CgroupVersion', '?')} ({info.get('CgroupDriver', '?')})"
    missing = [name for name, key in (("memory", "MemoryLimit"), ("pids", "PidsLimit")) if not info.get(key)]
    if missing:
        why = f"{cgroup}: no {' or '.join(missing)} limit support, so a test could exhaust the machine"
        fix = "enable the memory and pids cgroup controllers (cgroup v2, or kernel option cgroup_enable=memory)"
        return Check("resource limits", False, why, fix)
    swap = "swap limited too" if info.get("SwapLimit") else "no swap limit (memory limits exclude swap)"
    return Check("resource limits", True, f"{cgroup}: memory and pids limits supported, {swap}")


def _check_image(client: Any, image: str, cli: str | None) -> list[Check]:
    def unchecked(head: Check, why: str, fix: str) -> list[Check]:
        return [head, *(Check(n, False, why, fix) for n in ("image contract", "runner in image"))]

    try:
        labels = image_labels(client, image)
    except SandboxError as exc:
        return unchecked(Check("sandbox image", False, str(exc), BUILD_FIX), "not checked", "")
    if labels is None:
        missing = Check("sandbox image", False, f"{image} is not on this Docker daemon", BUILD_FIX)
        return unchecked(missing, "not checked: no image", BUILD_FIX)
    if not honours_contract(labels):
        why = f"{image} is not a colbench sandbox of contract {CONTRACT} (labels: {labels})"
        return unchecked(Check("sandbox image", False, why, REBUILD_FIX), "not checked: wrong image", BUILD_FIX)
    found = client.images.get(image)
    size = (found.attrs.get("Size") or 0) / 1e6
    built = labels.get(LABEL_BUILD, "unknown")
    present = Check("sandbox image", True, f"{image} ({found.short_id}, {built} build, {size:.0f} MB)")
    if cli is None:
        return unchecked(present, "not checked: no docker command", "install the docker CLI")
    return [present, _check_contract(cli, image), _check_runner(image)]


def _check_contract(cli: str, image: str) -> Check:
    argv = [
        cli, "run", "--rm", "--network", "none", "--read-only", "--user", f"{PROBE_UID}:{PROBE_UID}",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges", image, "python3", "-s", "-P", "-c", _CONTRACT_PROBE,
    ]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False)
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return Check("image contract", False, f"the probe container failed: {exc}", REBUILD_FIX)
    if not isinstance(found, dict):
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return Check("image contract", False, f"the probe failed: {why[0]}", REBUILD_FIX)
    problems = []
    if not str(found.get("python", "")).startswith("3.11."):
        problems.append(f"Python {found.get('python')}, not 3.11")
    if not found.get("usr_bin_python3"):
        problems.append("no /usr/bin/python3")
    if found.get("opt"):
        problems.append(f"/opt/colbench is not empty: {found['opt']}")
    if found.get("net") == "reachable":
        problems.append("the network is reachable with --network none")
    summary = (
        f"Python {found.get('python')}, numpy {found.get('numpy')}, bs4 {found.get('bs4')}, "
        f"sqlite {found.get('sqlite')} as uid {found.get('uid')}, no network"
    )
    if problems:
        return Check("image contract", False, "; ".join(problems), REBUILD_FIX)
    return Check("image contract", True, summary)


def _check_runner(image: str) -> Check:
    """The runner protocol end to end, under the exact hardening the Docker runtime uses."""
    fix = REBUILD_FIX + " (and check the daemon's logs)"
    started = time.monotonic()
    try:
        done = subprocess.run(
            run_argv(image),
            input=json.dumps(_RUNNER_JOB) + "\n",
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired, SandboxError) as exc:
        return Check("runner in image", False, f"the runner container failed: {exc}", fix)
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append(line)
    expected: list[dict[str, Any]] = [{"ready": True}, {"id": 0, "i": 0, "outcome": "value"}, {"id": 0}]
    ok = len(lines) == 3 and all(
        isinstance(got, dict) and all(got.get(k) == v for k, v in want.items())
        for got, want in zip(lines, expected, strict=True)
    )
    ok = ok and isinstance(lines[2], dict) and lines[2].get("done") is True
    ok = ok and isinstance(lines[1], dict) and outcome_of(lines[1]).value == {"t": "int", "v": "6"}
    if not ok:
        err = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return Check("runner in image", False, f"unexpected runner output {lines[:3]!r}: {err[0]}", fix)
    ran = (
        f"hardened run (no network, read-only, caps dropped, uids {PROBE_UID}/{PROBE_UID + 1}): "
        f"handshake and one test in {time.monotonic() - started:.1f}s"
    )
    return Check("runner in image", True, ran)


def _check_bwrap() -> list[Check]:
    bwrap = shutil.which("bwrap")
    if bwrap:
        found = Check("bubblewrap", True, f"{bwrap} (the bwrap runtime can run)", required=False)
    else:
        why = "bwrap not found: the bwrap runtime (--sandbox bwrap) cannot run"
        found = Check("bubblewrap", False, why, "apt-get install bubblewrap", required=False)
    if os.geteuid() == 0:
        why = "running as root: the bwrap runtime gives each worker and its tests uids of their own"
        return [found, Check("root", True, why, required=False)]
    why = (
        "not root: the bwrap runtime shares your uid (process limits count your processes, a test can signal "
        "its runner); Docker runs are unaffected"
    )
    fix = "run as root for full bwrap-runtime isolation, or use the Docker runtime"
    return [found, Check("root", False, why, fix, required=False)]
