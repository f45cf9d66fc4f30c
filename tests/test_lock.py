"""constraints.txt is the lock the set-up installs through (scripts/lock.sh): this environment holds exactly its
versions, and the environments frameworks resolve at run time are bounded by the same date."""

from __future__ import annotations

import re
import sysconfig
from importlib.metadata import distributions

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from paths import REPO

from colbench._util.version import RESOLVED_AT

LOCK = REPO / "constraints.txt"


def pins() -> list[Requirement]:
    lines = LOCK.read_text(encoding="utf-8").splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def test_this_environment_holds_the_locked_versions() -> None:
    """Read where the set-up installs (the interpreter's own site-packages; a machine's user site, which may hold
    another uv, is not the set-up's)."""
    applies = [r for r in pins() if r.marker is None or r.marker.evaluate()]
    assert len(applies) > 150  # the whole dev install, not a stub
    places = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in distributions(path=places)}
    off = {}
    for requirement in applies:
        (spec,) = requirement.specifier
        have = installed.get(canonicalize_name(requirement.name), "not installed")
        if have != spec.version:
            off[requirement.name] = f"{have} (locked {spec.version})"
    assert not off, f"the set-up did not install through constraints.txt: {off}"


def test_the_lock_and_the_run_time_bound_name_one_date() -> None:
    stated = re.search(r"^# resolved-at: (\S+)$", LOCK.read_text(encoding="utf-8"), re.M)
    assert stated is not None and stated[1] == RESOLVED_AT


def test_verifiers_harness_resolves_as_of_the_lock(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    vf = pytest.importorskip("verifiers.v1")
    from colbench.integrations.verifiers import ColbenchTask

    task = ColbenchTask(vf.TaskData(name="t", prompt="p"))
    monkeypatch.delenv("UV_EXCLUDE_NEWER", raising=False)
    assert task.runtime_env() == {"UV_EXCLUDE_NEWER": RESOLVED_AT}
    monkeypatch.setenv("UV_EXCLUDE_NEWER", "2030-01-01T00:00:00Z")  # the user's own bound wins
    assert task.runtime_env() == {}
