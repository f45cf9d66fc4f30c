"""Host-side equality on decoded sandbox values: Python ``==`` plus the documented additions."""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import pytest

from colbench.domains.backend.values import DecodeError, Opaque, Tolerance, decode, values_equal
from colbench.sandbox.contract import runner_path


def _load_runner() -> Any:
    """The in-sandbox runner as a module (it is data for the sandbox, not part of the package)."""
    spec = importlib.util.spec_from_file_location("colbench_sandbox_runner", runner_path())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _load_runner()


def roundtrip(value: Any) -> Any:
    """What the host sees of ``value`` after the sandbox encodes it."""
    return decode(runner.encode(value))


@pytest.mark.parametrize(
    "expected, got, equal",
    [
        (1, 1.0, True),
        (True, 1, True),
        ([1, 2], (1, 2), False),
        ((1, 2), (1, 2), True),
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),
        ({"a": 1}, {"a": 2}, False),
        ({1, 2, 3}, frozenset({3, 2, 1}), True),
        ("abc", "abc", True),
        ("abc", b"abc", False),
        (None, None, True),
        (None, 0, False),
        (float("nan"), float("nan"), True),
        ([1.0, float("nan")], [1.0, float("nan")], True),
        ({"x": float("nan")}, {"x": float("nan")}, True),
        (0.1 + 0.2, 0.3, False),
        (10**30, 10**30, True),
        (10**30, float(10**30), False),
        (1 + 2j, 1 + 2j, True),
    ],
)
def test_equality_follows_python_eq_with_nan(expected: Any, got: Any, equal: bool) -> None:
    assert values_equal(roundtrip(expected), roundtrip(got)) is equal


def test_int_enums_equal_their_values() -> None:
    import enum

    class Level(enum.IntEnum):
        LOW = 1

    assert values_equal(roundtrip(Level.LOW), roundtrip(1))


def test_float_tolerance_is_opt_in() -> None:
    a, b = roundtrip(0.1 + 0.2), roundtrip(0.3)
    assert not values_equal(a, b)
    assert values_equal(a, b, Tolerance(rel=1e-9))
    assert values_equal(roundtrip([0.1 + 0.2]), roundtrip([0.3]), Tolerance(rel=1e-9))
    assert not values_equal(roundtrip(True), roundtrip(1.0 + 1e-12), Tolerance(rel=1e-9))


def test_numpy_values() -> None:
    np = pytest.importorskip("numpy")
    assert values_equal(roundtrip(np.int64(3)), roundtrip(3))
    assert values_equal(roundtrip(np.array([[1, 2], [3, 4]])), roundtrip(np.array([[1.0, 2.0], [3.0, 4.0]])))
    assert not values_equal(roundtrip(np.array([1, 2, 3, 4])), roundtrip(np.array([[1, 2], [3, 4]])))
    assert not values_equal(roundtrip(np.array([1, 2])), roundtrip([1, 2]))
    assert values_equal(roundtrip(np.array([math.nan])), roundtrip(np.array([math.nan])))


def test_subclass_overrides_never_run_and_never_help() -> None:
    class AlwaysEqualInt(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

        def __repr__(self) -> str:
            return "42"

    class LyingStr(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    assert roundtrip(AlwaysEqualInt(7)) == 7
    assert not values_equal(roundtrip(42), roundtrip(AlwaysEqualInt(7)))
    assert not values_equal(roundtrip("expected"), roundtrip(LyingStr("other")))


def test_objects_of_unknown_types_never_compare_equal() -> None:
    class Anything:
        def __eq__(self, other: object) -> bool:
            return True

    value = roundtrip(Anything())
    assert isinstance(value, Opaque)
    assert not values_equal(value, value)
    assert not values_equal(roundtrip([1]), roundtrip([Anything()]))


def test_dataclasses_enums_and_types() -> None:
    import dataclasses
    import enum

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    class Color(enum.Enum):
        RED = 1

    assert values_equal(roundtrip(Point(1, 2)), roundtrip(Point(1, 2)))
    assert not values_equal(roundtrip(Point(1, 2)), roundtrip(Point(2, 1)))
    assert values_equal(roundtrip(Color.RED), roundtrip(Color.RED))
    assert values_equal(roundtrip(int), roundtrip(int))
    assert not values_equal(roundtrip(int), roundtrip(str))


@pytest.mark.parametrize(
    "node",
    [
        {},
        {"t": "int", "v": "x"},
        {"t": "int", "v": 5},
        {"t": "weird"},
        {"t": "list", "v": [{"t": "nope"}]},
        {"t": "ndarray", "shape": [3], "v": []},
        {"t": "dict", "v": [[{"t": "none"}]]},
        "string",
    ],
)
def test_malformed_values_are_rejected(node: Any) -> None:
    with pytest.raises(DecodeError):
        decode(node)
