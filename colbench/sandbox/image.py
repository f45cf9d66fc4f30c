"""The Docker sandbox image: its contract and how to build it (``colbench sandbox doctor`` checks it:
:mod:`colbench.sandbox.doctor`).

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
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from colbench._util.datafiles import data_path
from colbench._util.storage import colbench_home
from colbench.errors import ConfigError, SandboxError
from colbench.sandbox.contract import RUNNER_FLAGS, RUNNER_IN_SANDBOX, SANDBOX_UID_BASE, runner_path

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


# -- package data ----------------------------------------------------------------------------------------------
def image_files() -> Path:
    """The folder with the Dockerfile and ``build-offline.sh`` (``sandbox/``: present in wheels too)."""
    return data_path("sandbox")


# -- docker ----------------------------------------------------------------------------------------------------
def docker_sdk() -> ModuleType:
    """The optional ``docker`` SDK (imported lazily: ``pip install 'colbench[docker]'``)."""
    try:
        return importlib.import_module("docker")
    except ImportError as exc:
        raise SandboxError("the Docker SDK for Python is not installed: pip install 'colbench[docker]'") from exc


def docker_client(timeout: float = 10.0) -> Any:
    """A connected ``docker.DockerClient`` (``DOCKER_HOST`` and friends apply); SandboxError when none answers."""
    docker = docker_sdk()
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
    except docker_sdk().errors.ImageNotFound:
        return None
    except Exception as exc:
        raise SandboxError(f"cannot inspect the image {image}: {exc}") from exc
    return {str(k): str(v) for k, v in (found.labels or {}).items()}


def image_present(client: Any = None, image: str = IMAGE) -> bool:
    """Whether the daemon has ``image`` and it is labelled as a colbench sandbox of this contract version."""
    labels = image_labels(client, image)
    return labels is not None and labels.get(LABEL_SANDBOX) == "1" and labels.get(LABEL_CONTRACT) == CONTRACT


def docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxError("the docker command is not installed (Debian/Ubuntu: apt-get install docker.io)")
    return docker


def run_argv(image: str = IMAGE, *, uid: int = PROBE_UID, memory_mb: int = 512, pids: int = 64) -> list[str]:
    """The hardened ``docker run`` command line for one runner worker (the contract's reference invocation)."""
    return [
        docker_cli(), "run", "-i", "--rm", "--network", "none", "--read-only",
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
    docker = docker_cli()
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
