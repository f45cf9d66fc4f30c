"""The task environment: the one root filesystem that task code (answers, references, plus tests, audits, gates,
claims) runs in, on every runtime and machine.

A verdict must be a fact about the answer, not about the machine that scored it: an answer that uses a name numpy
2.0 removed, or imports a library one machine happens to have, must get the same verdict everywhere. So task code
never runs with the host's Python or site-packages. ``colbench sandbox build`` makes one Debian bookworm root
filesystem (``sandbox/build-offline.sh``, or the Dockerfile's build exported), imports it as the Docker image, and
unpacks the same tarball here, where the bwrap runtime binds it as the sandbox's root.

Its identity is its manifest (``sandbox/taskenv_probe.py``: the interpreter's build, every Python library on the
task code's path and its version, the C libraries, Debian's package list as a digest), written into the root
filesystem when it is built and carried by the image as a label. Its digest is recorded with every score and run
(``run.json``'s ``scoring.taskenv``, ``colbench score``'s rows): runs scored in different task environments are
never ranked as one. ``colbench sandbox doctor`` and the conformance tests run the probe inside each runtime and
require what it sees to be the manifest.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from colbench._util.datafiles import data_path
from colbench._util.storage import canonical_json, colbench_home, sha256_text
from colbench.errors import SandboxError

MANIFEST_IN_ROOT = "usr/share/colbench/taskenv.json"
LABEL = "org.colbench.taskenv"  # the image's copy of the manifest, base64
LOCATION_ENV = "COLBENCH_TASKENV"
BUILD_STEP = "run `colbench sandbox build` (the README's set-up command does)"
# Top-level entries of the root that the bwrap runtime mounts itself rather than binding from it.
MOUNTED_BY_RUNTIME = frozenset({"proc", "dev", "tmp", "sys", "opt"})


@dataclass(frozen=True)
class TaskEnvironment:
    """A task environment as its manifest describes it (``sandbox/taskenv_probe.py``'s output)."""

    manifest: Mapping[str, Any]

    @cached_property
    def digest(self) -> str:
        """16 hex digits naming exactly this environment (a hash of the manifest's canonical JSON)."""
        return sha256_text(canonical_json(dict(self.manifest)))[:16]

    @property
    def python(self) -> str:
        return str(self.manifest.get("python", "?")).split(" ", 1)[0]

    @property
    def libraries(self) -> dict[str, str]:
        found = self.manifest.get("libraries")
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def summary(self) -> str:
        """One line for people: ``CPython 3.11.2, numpy 1.24.2, ... (x86_64, glibc 2.36, 118 Debian packages)``."""
        libraries = ", ".join(f"{name} {version}" for name, version in self.libraries.items())
        packages = self.manifest.get("debian_packages")
        count = f", {packages.get('count')} Debian packages" if isinstance(packages, dict) else ""
        where = f"{self.manifest.get('machine', '?')}, {self.manifest.get('libc', '?')}{count}"
        return f"Python {self.python}, {libraries or 'no libraries'} ({where})"

    @classmethod
    def parse(cls, text: str, where: str) -> TaskEnvironment:
        try:
            manifest = json.loads(text)
        except ValueError as exc:
            raise SandboxError(f"{where}: the task environment's manifest is not JSON ({exc}): {BUILD_STEP}") from exc
        if not isinstance(manifest, dict) or "python" not in manifest:
            raise SandboxError(f"{where}: not a task environment manifest: {BUILD_STEP}")
        return cls(manifest)

    @classmethod
    def from_label(cls, value: str, image: str) -> TaskEnvironment:
        try:
            text = base64.b64decode(value, validate=True).decode("utf-8")
        except ValueError as exc:
            raise SandboxError(f"the image {image} carries a damaged {LABEL} label: {BUILD_STEP}") from exc
        return cls.parse(text, f"the image {image}")


def root() -> Path:
    """Where the bwrap runtime's root filesystem is: ``$COLBENCH_TASKENV``, else ``colbench_home()/taskenv``."""
    return Path(os.environ.get(LOCATION_ENV) or colbench_home() / "taskenv").expanduser()


def installed(where: Path | None = None) -> TaskEnvironment:
    """The task environment unpacked for the bwrap runtime; a one-line SandboxError naming the set-up step when it
    is missing (scoring never falls back to the host's Python)."""
    place = where or root()
    manifest = place / MANIFEST_IN_ROOT
    try:
        text = manifest.read_text(encoding="utf-8")
    except OSError:
        raise SandboxError(f"the task environment is not built (no {manifest}): {BUILD_STEP}") from None
    return TaskEnvironment.parse(text, str(manifest))


def install(tarball: Path, where: Path | None = None) -> TaskEnvironment:
    """Unpack ``tarball`` (a root filesystem with its manifest) as the bwrap runtime's root, replacing the one
    there by a rename once it is whole (a build that fails leaves the old one as it was). The old root's files are
    deleted: rebuild while no bwrap pool runs."""
    place = where or root()
    place.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{place.name}-new-", dir=place.parent))
    owners = ["--numeric-owner"] if os.geteuid() == 0 else ["--no-same-owner", "--no-same-permissions"]
    done = subprocess.run(
        ["tar", *owners, "-xf", str(tarball), "-C", str(fresh)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        shutil.rmtree(fresh, ignore_errors=True)
        raise SandboxError(f"cannot unpack {tarball}: {done.stderr.strip()[-300:]}")
    made = installed(fresh)
    fresh.chmod(0o755)
    old = place.with_name(f".{place.name}-old-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        place.rename(old)
    fresh.rename(place)
    shutil.rmtree(old, ignore_errors=True)
    return made


def probe_source() -> str:
    """The manifest's probe (``sandbox/taskenv_probe.py``), a program any runtime can run to see what task code
    sees."""
    return data_path("sandbox", "taskenv_probe.py").read_text(encoding="utf-8")
