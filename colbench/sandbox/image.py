"""The Docker sandbox image: its contract and how to build it, with the bwrap runtime's root from the same tarball
(``colbench sandbox doctor`` checks both: :mod:`colbench.sandbox.doctor`).

Image contract, version 2 (the tag's number: ``colbench-sandbox:2``; the labels ``org.colbench.sandbox=1`` and
``org.colbench.contract=2`` say that an image honours it):

* It is the task environment (:mod:`colbench.sandbox.taskenv`): a Debian bookworm root filesystem whose
  ``/usr/bin/python3`` is Debian's CPython 3.11 with Debian's numpy 1.24.2 and beautifulsoup4 4.11.2 (html.parser
  only: no lxml, no html5lib) and the standard library (``sqlite3``, ``json`` ...); its manifest is in
  ``/usr/share/colbench/taskenv.json`` and, base64, in the label ``org.colbench.taskenv``. The bwrap runtime binds
  the same root filesystem, unpacked from the same tarball.
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
      --pids-limit N --memory M --init -v <runner.py>:/opt/colbench/runner.py:ro colbench-sandbox:2
      python3 -S -s -P /opt/colbench/runner.py --sandboxed --drop-to UID --child-uid UID2

Two builds of the root filesystem (their files are in the top-level ``sandbox/`` folder, shipped inside the wheel,
so an installed colbench can build); either way the image is a ``docker import`` of the tarball:

* ``offline``: ``build-offline.sh`` debootstraps a minimal Debian bookworm from the machine's apt mirror, installs
  Debian's ``python3``, ``python3-numpy`` and ``python3-bs4``, strips it and writes the manifest; needs no
  registry (root or sudo once). The tarball is cached in ``colbench_home()``, so a rebuild takes seconds.
* ``dockerfile``: the same packages ``FROM debian:bookworm-slim`` (needs a registry), its root filesystem exported.
  Its base has a slightly different package set from debootstrap's minbase, so its manifest and digest differ:
  scores of the two builds are kept apart, as scores of any two task environments are.
"""

from __future__ import annotations

import contextlib
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
from typing import Any, Literal, cast

from colbench._util.datafiles import data_path
from colbench._util.storage import colbench_home
from colbench.errors import ConfigError, SandboxError
from colbench.sandbox import taskenv
from colbench.sandbox.contract import RUNNER_FLAGS, RUNNER_IN_SANDBOX, SANDBOX_UID_BASE, runner_path
from colbench.sandbox.taskenv import TaskEnvironment

IMAGE = "colbench-sandbox:2"
CONTRACT = "2"
LABEL_SANDBOX = "org.colbench.sandbox"
LABEL_CONTRACT = "org.colbench.contract"
LABEL_BUILD = "org.colbench.build"
METHODS = ("auto", "dockerfile", "offline")
BUILD_ENV = "COLBENCH_SANDBOX_BUILD"
PROBE_UID = SANDBOX_UID_BASE + 400_000  # no passwd entry anywhere, and in no pool's block (pool.claim_uid_block)
DOCKER_TIMEOUT_S = 120.0


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
    return honours_contract(image_labels(client, image))


def honours_contract(labels: dict[str, str] | None) -> bool:
    """Whether an image's labels (None: no image) say it is a colbench sandbox of this contract version."""
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
    forced = method if method != "auto" else os.environ.get(BUILD_ENV, "").strip()
    if forced in ("dockerfile", "offline"):
        return cast(Literal["dockerfile", "offline"], forced)
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
    """Build the task environment with ``method`` (see ``resolve_method``): its root filesystem as a tarball, that
    tarball unpacked as the bwrap runtime's root (``taskenv.install``) and, where a Docker daemon answers, imported
    as ``image``. One tarball for both runtimes: the same interpreter and libraries, one manifest. Returns what was
    made, in a line.

    Build output goes line by line to ``echo`` (default: stderr). Raises SandboxError when a step fails or the
    image does not carry the contract's labels.
    """
    resolved = resolve_method(method)
    say = echo if echo is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    files = image_files()
    env = {**os.environ, "COLBENCH_HOME": str(_cache_dir())}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="colbench-image-") as tmp:
        for name in ("Dockerfile", "build-offline.sh", "taskenv_probe.py"):
            (Path(tmp) / name).write_bytes(files.joinpath(name).read_bytes())
        script = ["bash", str(Path(tmp) / "build-offline.sh")]
        say(f"building the task environment ({resolved} build)")
        if resolved == "dockerfile":
            tarball = _exported_dockerfile_build(tmp, image, force, env, say)
        else:
            status, tail = _stream([*script, "--rootfs-only", *(["--force"] if force else [])], env, say)
            if status != 0:
                raise SandboxError(f"the offline build failed (exit status {status}):\n" + "\n".join(tail[-12:]))
            tarball = Path(tail[-1])
        environment = _install_for_bwrap(tarball, say)
        if not _docker_answers():
            say("no Docker daemon: the bwrap runtime's task environment is ready; the Docker image is not built")
            return f"task environment {environment.digest} at {taskenv.root()} (bwrap only)"
        argv = [*script, "--from-tarball", str(tarball), "--build", resolved, "--tag", image]
        status, tail = _stream(argv, env, say)
    if status != 0:
        detail = "\n".join(tail[-12:])
        raise SandboxError(f"importing {image} failed (exit status {status}):\n{detail}")
    labels = _cli_labels(docker_cli(), image)
    if not honours_contract(labels):
        raise SandboxError(f"the {resolved} build produced {image} without the contract labels (got {labels})")
    if TaskEnvironment.from_label(labels.get(taskenv.LABEL, ""), image).digest != environment.digest:
        raise SandboxError(f"{image} and the bwrap runtime's root were built from different tarballs: rebuild")
    say(f"{image} and {taskenv.root()} are ready ({resolved} build, {time.monotonic() - started:.0f}s)")
    return f"task environment {environment.digest} at {taskenv.root()} and {image}"


def _exported_dockerfile_build(
    context: str, image: str, force: bool, env: dict[str, str], say: Callable[[str], None]
) -> Path:
    """The Dockerfile's build, its root filesystem exported as a tarball in the cache (one per built image)."""
    docker, staging = docker_cli(), f"{image.partition(':')[0]}-build:{CONTRACT}"
    argv = [docker, "build", "--tag", staging, *(["--no-cache", "--pull"] if force else []), context]
    status, tail = _stream(argv, env, say)
    if status != 0:
        raise SandboxError(f"the dockerfile build failed (exit status {status}):\n" + "\n".join(tail[-12:]))
    ident = _docker(docker, "image", "inspect", "--format", "{{.Id}}", staging).split(":")[-1][:16]
    tarball = _cache_dir() / f"sandbox-rootfs-dockerfile-{ident}.tar"
    if not tarball.exists():
        container = _docker(docker, "create", staging)
        try:
            _docker(docker, "export", "--output", f"{tarball}.part", container)
            os.replace(f"{tarball}.part", tarball)
        finally:
            _docker(docker, "rm", "--force", container)
    return tarball


def _install_for_bwrap(tarball: Path, say: Callable[[str], None]) -> TaskEnvironment:
    """Unpack ``tarball`` as the bwrap runtime's root, unless it is unpacked there already (a stamp beside the
    root names the tarball, its size and time)."""
    stamp = taskenv.root().with_name(taskenv.root().name + ".source")
    made = f"{tarball}\n{tarball.stat().st_size}\n{tarball.stat().st_mtime_ns}\n"
    with contextlib.suppress(OSError, SandboxError):
        if stamp.read_text(encoding="utf-8") == made:
            environment = taskenv.installed()
            say(f"the bwrap runtime's root is up to date ({taskenv.root()})")
            return environment
    say(f"unpacking the task environment to {taskenv.root()}")
    environment = taskenv.install(tarball)
    stamp.write_text(made, encoding="utf-8")
    say(f"task environment {environment.digest}: {environment.summary()}")
    return environment


def _docker_answers() -> bool:
    docker = shutil.which("docker")
    return docker is not None and subprocess.run([docker, "info"], capture_output=True, check=False).returncode == 0


def _docker(docker: str, *args: str) -> str:
    done = subprocess.run([docker, *args], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SandboxError(f"docker {args[0]} failed: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


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
