"""The command line writes what it wrote before the layered restructuring: the goldens in tests/data/golden were
recorded from the tree before its first move (``python tests/golden.py --record``); only the fields in
``golden.VOLATILE`` (times, versions, a module path that moved) are left out of the comparison."""

from __future__ import annotations

import shutil

import pytest
from golden import GOLDEN, produce

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("chromium") is None:
        pytest.skip("the frontend golden run needs Chromium (scripts/setup.sh installs it)")
    if shutil.which("bwrap") is None:
        pytest.skip("the golden runs score with the bwrap sandbox (scripts/setup.sh installs bubblewrap)")
    return produce(tmp_path_factory.mktemp("golden"))


def test_the_same_outputs_are_produced(produced: dict[str, str]) -> None:
    recorded = sorted(p.name for p in GOLDEN.iterdir())
    assert sorted(produced) == recorded
    assert len(recorded) > 20


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.iterdir()))
def test_each_output_equals_its_golden(produced: dict[str, str], name: str) -> None:
    assert produced.get(name) == (GOLDEN / name).read_text(encoding="utf-8"), name


def test_the_comparison_sees_a_change(produced: dict[str, str]) -> None:
    """A changed score in an episode record is a difference, not something normalising hides."""
    name = "reference.episodes.json"
    changed = produced[name].replace('"reward": 1.0', '"reward": 0.9', 1)
    assert changed != (GOLDEN / name).read_text(encoding="utf-8")
