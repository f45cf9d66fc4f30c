"""scripts/pins.py reads every exact pin of pyproject.toml's extras with the reason written beside it, and lists
only the pins behind the newest release (the index lookup given as a function here, so no network is needed)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from types import ModuleType

from paths import REPO


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pins_script", REPO / "scripts" / "pins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_every_pin_of_the_extras_is_read_with_its_reason() -> None:
    script = load_script()
    text = (REPO / "pyproject.toml").read_text()
    found = script.pins(text)
    declared = tomllib.loads(text)["project"]["optional-dependencies"]
    expected = {
        (extra, r.split("==")[0], r.split("==")[1]) for extra, reqs in declared.items() for r in reqs if "==" in r
    }
    assert {(p.extra, p.name, p.version) for p in found} == expected
    reasons = {(p.extra, p.name): p.reason for p in found}
    assert "openai<3" in reasons["verifiers", "verifiers"]  # the extra's own comment block
    assert "mcp 2" in reasons["openenv", "fastmcp"]
    assert "layers contract" in reasons["dev", "import-linter"]  # a trailing comment wins
    assert "(no reason written)" not in reasons.values()


def test_only_pins_behind_the_newest_are_listed() -> None:
    script = load_script()
    found = script.pins((REPO / "pyproject.toml").read_text())
    newest = {p.name: p.version for p in found} | {"verifiers": "9.9.9"}
    rows = script.report(found, newest.get, show_all=False)
    assert len(rows) == 3 and rows[2].startswith("| verifiers | verifiers | 0.3.1 | 9.9.9 | verifiers 0.4.0 needs")
    assert len(script.report(found, newest.get, show_all=True)) == len(found) + 2
