"""The Docker sandbox image: its contract, how to build it, and ``doctor`` checks for the whole sandbox set-up.

Image contract, version 1 (the tag's number: ``colbench-sandbox:1``; the labels ``org.colbench.sandbox=1`` and
``org.colbench.contract=1`` say that an image honours it):

* ``/usr/bin/python3`` is CPython 3.11 that can import ``numpy``, ``bs4`` and the standard library (``sqlite3``,
  ``json`` ...). Both builds carry the same library versions as Debian bookworm: numpy 1.24.2, beautifulsoup4
  4.11.2 (html.parser only: no lxml, no html5lib), soupsieve 2.3.2.
* ``/opt/colbench/`` exists and is empty. The runner is not baked in: the runtime bind-mounts the host's
  ``sandbox/runner.py`` (inside a wheel: ``colbench/_data/sandbox/runner.py``) read-only at
  ``/opt/colbench/runner.py`` on every run, so the runner always matches the installed colbench, and an image
  outlives colbench upgrades.
* Any numeric uid/gid works without an ``/etc/passwd`` entry (the runtime uses uids from 1500000000 up);
  ``/tmp`` is world-writable (1777), and the runtime mounts a fresh tmpfs over it.
* Nothing needs the network, and the image carries no network tools: containers run with ``--network none``.
* Environment defaults, identical to the bwrap runtime's: ``LANG=C.UTF-8``, ``TZ=UTC``, ``HOME=/tmp``,
  ``PYTHONHASHSEED=0``, ``PYTHONDONTWRITEBYTECODE=1``, one BLAS/OpenMP thread; working directory ``/tmp``.

The Docker runtime starts the runner like this (``doctor`` runs exactly this with one small job)::

    docker run -i --network none --read-only --tmpfs /tmp:... --user 0 --cap-drop ALL --cap-add SETUID
      --cap-add SETGID --cap-add KILL --cap-add FOWNER --cap-add DAC_OVERRIDE --security-opt no-new-privileges
      --pids-limit N --memory M --init -v <runner.py>:/opt/colbench/runner.py:ro colbench-sandbox:1
      python3 -S -s -P /opt/colbench/runner.py --sandboxed --drop-to UID --child-uid UID2

Two builds, one contract (their files are in the top-level ``sandbox/`` folder, shipped inside the wheel, so an
installed colbench can build):

* ``dockerfile``: ``FROM python:3.11-slim-bookworm`` plus pinned wheels from PyPI; needs a registry and PyPI.
* ``offline``: ``build-offline.sh`` debootstraps a minimal Debian bookworm from the machine's apt mirror, installs
  Debian's ``python3``, ``python3-numpy`` and ``python3-bs4``, strips it and ``docker import``s it; needs no
  registry. The stripped root filesystem is cached in ``colbench_home()``, so a rebuild takes seconds.

Known difference between the builds: Debian's numpy uses the reference BLAS, the PyPI wheel its own OpenBLAS, so
linear algebra can differ in the last bits. References and answers are always run in the same image, so a score
never compares values from the two builds.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from colbench._util.datafiles import data_path
from colbench._util.storage import colbench_home
from colbench.errors import ConfigError, SandboxError
from colbench.sandbox.contract import RUNNER_FLAGS, RUNNER_IN_SANDBOX, SANDBOX_UID_BASE, runner_path
from colbench.sandbox.pool import outcome_of

IMAGE = "colbench-sandbox:1"
CONTRACT = "1"
LABEL_SANDBOX = "org.colbench.sandbox"
LABEL_CONTRACT = "org.colbench.contract"
LABEL_BUILD = "org.colbench.build"
METHODS = ("auto", "dockerfile", "offline")
BUILD_ENV = "COLBENCH_SANDBOX_BUILD"
PROBE_UID = SANDBOX_UID_BASE  # a uid with no passwd entry anywhere
DOCKER_TIMEOUT_S = 120.0

Method = Literal["auto", "dockerfile", "offline"]

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


# -- package data ----------------------------------------------------------------------------------------------
def image_files() -> Path:
    """The folder with the Dockerfile and ``build-offline.sh`` (``sandbox/``: present in wheels too)."""
    return data_path("sandbox")


# -- docker ----------------------------------------------------------------------------------------------------
def _docker_sdk() -> ModuleType:
    """The optional ``docker`` SDK (imported lazily: ``pip install 'colbench[docker]'``)."""
    try:
        return importlib.import_module("docker")
    except ImportError as exc:
        raise SandboxError("the Docker SDK for Python is not installed: pip install 'colbench[docker]'") from exc


def docker_client(timeout: float = 10.0) -> Any:
    """A connected ``docker.DockerClient`` (``DOCKER_HOST`` and friends apply); SandboxError when none answers."""
    docker = _docker_sdk()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests' and urllib3's errors alike
        raise SandboxError(f"the Docker daemon is not reachable: {exc}") from exc
    return client


def image_labels(client: Any = None, image: str = IMAGE) -> dict[str, str] | None:
    """The labels of ``image``, or None when the daemon has no such image."""
    client = client if client is not None else docker_client()
    try:
        found = client.images.get(image)
    except _docker_sdk().errors.ImageNotFound:
        return None
    except Exception as exc:
        raise SandboxError(f"cannot inspect the image {image}: {exc}") from exc
    return {str(k): str(v) for k, v in (found.labels or {}).items()}


def image_present(client: Any = None, image: str = IMAGE) -> bool:
    """Whether the daemon has ``image`` and it is labelled as a colbench sandbox of this contract version."""
    labels = image_labels(client, image)
    return labels is not None and labels.get(LABEL_SANDBOX) == "1" and labels.get(LABEL_CONTRACT) == CONTRACT


def _docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxError("the docker command is not installed (Debian/Ubuntu: apt-get install docker.io)")
    return docker


def run_argv(image: str = IMAGE, *, uid: int = PROBE_UID, memory_mb: int = 512, pids: int = 64) -> list[str]:
    """The hardened ``docker run`` command line for one runner worker (the contract's reference invocation)."""
    return [
        _docker_cli(), "run", "-i", "--rm", "--network", "none", "--read-only",
        "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m,mode=1777",
        "--user", "0", "--cap-drop", "ALL",
        "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL", "--cap-add", "FOWNER",
        "--cap-add", "DAC_OVERRIDE", "--security-opt", "no-new-privileges",
        "--pids-limit", str(pids), "--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m", "--init",
        "-v", f"{runner_path()}:{RUNNER_IN_SANDBOX}:ro",
        image, "python3", *RUNNER_FLAGS, RUNNER_IN_SANDBOX, "--sandboxed",
        "--drop-to", str(uid), "--child-uid", str(uid + 1),
    ]  # fmt: skip


# -- build -----------------------------------------------------------------------------------------------------
def resolve_method(method: str = "auto") -> Literal["dockerfile", "offline"]:
    """The build ``auto`` stands for here.

    ``$COLBENCH_SANDBOX_BUILD`` (``dockerfile`` or ``offline``) decides if set. Otherwise: ``offline`` on Linux
    with apt (debootstrap from the machine's own Debian/Ubuntu mirror, no registry needed) when root or sudo is
    at hand or a cached root filesystem makes root unnecessary; ``dockerfile`` elsewhere (macOS, Windows, other
    distributions).
    """
    if method not in METHODS:
        raise ConfigError(f"unknown build method {method!r}; expected one of: {', '.join(METHODS)}")
    if method == "dockerfile":
        return "dockerfile"
    if method == "offline":
        return "offline"
    forced = os.environ.get(BUILD_ENV, "").strip()
    if forced == "dockerfile":
        return "dockerfile"
    if forced == "offline":
        return "offline"
    if forced:
        raise ConfigError(f"${BUILD_ENV}={forced!r}: expected 'dockerfile' or 'offline'")
    apt = shutil.which("debootstrap") or shutil.which("apt-get")
    privileged = os.geteuid() == 0 or shutil.which("sudo") is not None or _cached_rootfs()
    return "offline" if sys.platform == "linux" and apt and privileged else "dockerfile"


def _cache_dir() -> Path:
    return colbench_home()  # one cache folder for all of colbench


def _cached_rootfs() -> bool:
    return any(_cache_dir().glob("sandbox-rootfs-*.tar"))


def build_image(
    method: str = "auto",
    *,
    image: str = IMAGE,
    force: bool = False,
    echo: Callable[[str], None] | None = None,
) -> str:
    """Build the sandbox image with ``method`` (see ``resolve_method``) and return its name.

    Build output goes line by line to ``echo`` (default: stderr). Raises SandboxError when the build fails or its
    result does not carry the contract's labels.
    """
    resolved = resolve_method(method)
    docker = _docker_cli()
    say = echo if echo is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    files = image_files()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="colbench-image-") as tmp:
        if resolved == "dockerfile":
            (Path(tmp) / "Dockerfile").write_bytes(files.joinpath("Dockerfile").read_bytes())
            argv = [docker, "build", "--tag", image, *(["--no-cache", "--pull"] if force else []), tmp]
        else:
            script = Path(tmp) / "build-offline.sh"
            script.write_bytes(files.joinpath("build-offline.sh").read_bytes())
            argv = ["bash", str(script), "--tag", image, *(["--force"] if force else [])]
            env["COLBENCH_HOME"] = str(_cache_dir())
        say(f"building {image} ({resolved} build)")
        started = time.monotonic()
        status, tail = _stream(argv, env, say)
    if status != 0:
        detail = "\n".join(tail[-12:])
        raise SandboxError(f"the {resolved} build of {image} failed (exit status {status}):\n{detail}")
    labels = _cli_labels(docker, image)
    if labels.get(LABEL_SANDBOX) != "1" or labels.get(LABEL_CONTRACT) != CONTRACT:
        raise SandboxError(f"the {resolved} build produced {image} without the contract labels (got {labels})")
    say(f"{image} is ready ({resolved} build, {time.monotonic() - started:.0f}s)")
    return image


def _stream(argv: list[str], env: dict[str, str], say: Callable[[str], None]) -> tuple[int, list[str]]:
    """Run ``argv``, passing each output line to ``say``; the exit status and the last lines."""
    tail: deque[str] = deque(maxlen=40)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
    except OSError as exc:
        raise SandboxError(f"cannot run {argv[0]}: {exc}") from exc
    assert proc.stdout is not None
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            say(line)
    return proc.returncode, list(tail)


def _cli_labels(docker: str, image: str) -> dict[str, str]:
    done = subprocess.run(
        [docker, "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        capture_output=True,
        text=True,
        timeout=DOCKER_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxError(f"the build reported success but {image} is not there: {done.stderr.strip()}")
    labels = json.loads(done.stdout or "null") or {}
    return {str(k): str(v) for k, v in labels.items()}


# -- doctor ----------------------------------------------------------------------------------------------------
BUILD_FIX = "run: colbench sandbox build"
REBUILD_FIX = "run: colbench sandbox build --force"


def doctor(image: str = IMAGE) -> list[Check]:
    """Check everything the sandboxes need, in order; later Docker checks report 'not checked' after a failure."""
    checks: list[Check] = []
    cli = shutil.which("docker")
    checks.append(
        Check("docker CLI", True, cli)
        if cli
        else Check(
            "docker CLI",
            False,
            "the docker command is not on PATH",
            "install Docker Engine (apt-get install docker.io)",
        )
    )
    client = None
    why = "not checked: the Docker daemon is not reachable"
    try:
        sdk = _docker_sdk()
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
            checks.append(
                Check(
                    "docker daemon",
                    True,
                    f"Docker {version.get('Version')} (API {version.get('ApiVersion')}) at {where}",
                )
            )
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
    return checks


def _check_limits(client: Any) -> Check:
    try:
        info = client.info()
    except Exception as exc:
        return Check("resource limits", False, f"docker info failed: {exc}", "check the Docker daemon's logs")
    cgroup = f"cgroup v{info.get('CgroupVersion', '?')} ({info.get('CgroupDriver', '?')})"
    missing = [name for name, key in (("memory", "MemoryLimit"), ("pids", "PidsLimit")) if not info.get(key)]
    if missing:
        return Check(
            "resource limits",
            False,
            f"{cgroup}: no {' or '.join(missing)} limit support, so a test could exhaust the machine",
            "enable the memory and pids cgroup controllers (cgroup v2, or kernel option cgroup_enable=memory)",
        )
    swap = "swap limited too" if info.get("SwapLimit") else "no swap limit (memory limits exclude swap)"
    return Check("resource limits", True, f"{cgroup}: memory and pids limits supported, {swap}")


def _check_image(client: Any, image: str, cli: str | None) -> list[Check]:
    names = ("image contract", "runner in image")
    try:
        labels = image_labels(client, image)
    except SandboxError as exc:
        return [
            Check("sandbox image", False, str(exc), BUILD_FIX),
            *(Check(n, False, "not checked", "") for n in names),
        ]
    if labels is None:
        missing = Check("sandbox image", False, f"{image} is not on this Docker daemon", BUILD_FIX)
        return [missing, *(Check(n, False, "not checked: no image", BUILD_FIX) for n in names)]
    if labels.get(LABEL_SANDBOX) != "1" or labels.get(LABEL_CONTRACT) != CONTRACT:
        wrong = Check(
            "sandbox image",
            False,
            f"{image} is not a colbench sandbox of contract {CONTRACT} (labels: {labels})",
            REBUILD_FIX,
        )
        return [wrong, *(Check(n, False, "not checked: wrong image", BUILD_FIX) for n in names)]
    found = client.images.get(image)
    size = (found.attrs.get("Size") or 0) / 1e6
    built = labels.get(LABEL_BUILD, "unknown")
    checks = [Check("sandbox image", True, f"{image} ({found.short_id}, {built} build, {size:.0f} MB)")]
    if cli is None:
        return [*checks, *(Check(n, False, "not checked: no docker command", "install the docker CLI") for n in names)]
    checks.append(_check_contract(cli, image))
    checks.append(_check_runner(image))
    return checks


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
    return Check(
        "runner in image",
        True,
        f"hardened run (no network, read-only, caps dropped, uids {PROBE_UID}/{PROBE_UID + 1}): "
        f"handshake and one test in {time.monotonic() - started:.1f}s",
    )


def _check_bwrap() -> list[Check]:
    bwrap = shutil.which("bwrap")
    checks = [
        Check("bubblewrap", True, f"{bwrap} (the bwrap runtime can run)", required=False)
        if bwrap
        else Check(
            "bubblewrap",
            False,
            "bwrap not found: the bwrap runtime (--sandbox bwrap) cannot run",
            "apt-get install bubblewrap",
            required=False,
        )
    ]
    if os.geteuid() == 0:
        checks.append(
            Check(
                "root",
                True,
                "running as root: the bwrap runtime gives each worker and its tests uids of their own",
                required=False,
            )
        )
    else:
        checks.append(
            Check(
                "root",
                False,
                "not root: the bwrap runtime shares your uid (process limits count your processes, a test can signal "
                "its runner); Docker runs are unaffected",
                "run as root for full bwrap-runtime isolation, or use the Docker runtime",
                required=False,
            )
        )
    return checks
