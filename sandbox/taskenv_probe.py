# mypy: ignore-errors
# (a program run by the task environment's own Python: standard library only, nothing of colbench importable)
"""Prints the task environment's manifest: what task code runs with, as one canonical JSON line.

Run twice with the same result: once when the environment is built (its output is stored in the root filesystem as
``/usr/share/colbench/taskenv.json`` and in the Docker image's label), and again inside each runtime's sandbox by
``colbench sandbox doctor`` and the conformance tests, which require the two to be equal. So it reads only what is
the same wherever the root filesystem is: the interpreter's build, the Python distributions on the path the runner
gives task code (``site.getsitepackages()``: the runner starts with ``-S`` and adds exactly those), the C libraries
Python reports, and Debian's package list (every package and version, as one digest).
"""

import hashlib
import json
import os
import platform
import site
import sys
from importlib.metadata import distributions


def _optional(read):
    try:
        return read()
    except Exception:  # a module this build lacks is part of what the manifest says
        return None


def _sqlite():
    import sqlite3

    return sqlite3.sqlite_version


def _openssl():
    import ssl

    return ssl.OPENSSL_VERSION


def _zlib():
    import zlib

    return zlib.ZLIB_RUNTIME_VERSION


def _expat():
    import pyexpat

    return pyexpat.EXPAT_VERSION


def _os_release():
    with open("/etc/os-release", encoding="utf-8") as handle:
        fields = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
    return fields.get("PRETTY_NAME", "").strip('"') or None


def _debian_packages():
    """Every installed package and its version, sorted: their count and digest."""
    rows, name = [], None
    with open("/var/lib/dpkg/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("Package: "):
                name = line[9:].strip()
            elif line.startswith("Version: ") and name is not None:
                rows.append(f"{name}={line[9:].strip()}")
                name = None
    rows.sort()
    return {"count": len(rows), "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest()}


def manifest():
    dirs = site.getsitepackages()
    libraries = {}
    for dist in distributions(path=[d for d in dirs if os.path.isdir(d)]):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-").replace(".", "-")
        if name:
            libraries.setdefault(name, dist.version)
    return {
        "python": sys.version,
        "implementation": sys.implementation.name,
        "machine": platform.machine(),
        "libc": " ".join(platform.libc_ver()),
        "sqlite": _optional(_sqlite),
        "openssl": _optional(_openssl),
        "zlib": _optional(_zlib),
        "expat": _optional(_expat),
        "system": _optional(_os_release),
        "debian_packages": _optional(_debian_packages),
        "libraries": dict(sorted(libraries.items())),
    }


if __name__ == "__main__":
    print(json.dumps(manifest(), sort_keys=True, separators=(",", ":")))
