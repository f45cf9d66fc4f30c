"""Decoding sandbox values and deciding equality in the host.

Values leave the sandbox as type-tagged JSON (see ``sandbox/runner.py``) and are rebuilt here from built-in types
only, so no code of the agent's runs when we compare. Equality follows Python's ``==`` as the reference would apply
it (``1 == 1.0``, ``True == 1``, ``[1] != (1,)``, dict and set order ignored), with these deliberate additions:

* NaN equals NaN, anywhere in a structure (the original marked such tests unpassable);
* numpy arrays equal when shapes match and elements are equal (dtype ignored, like ``numpy.array_equal``); numpy
  scalars are their Python values;
* dataclass instances equal when the class name and compared fields match; enum members when class and name match;
  classes (``type(x)`` results) when their qualified names match;
* any other object is *opaque*: it never equals anything, not even itself, because we cannot know its ``__eq__``;
* an optional relative/absolute float tolerance (off by default: exact, like the reference's ``==``).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

Number = int | float | complex | Fraction | Decimal


class DecodeError(ValueError):
    """A value from the sandbox that is not well-formed tagged JSON (treated as a failed test)."""


@dataclass(frozen=True)
class Array:
    shape: tuple[int, ...]
    items: tuple[Any, ...]


@dataclass(frozen=True)
class Record:
    """A dataclass instance or enum member, identified by class name."""

    kind: str
    type_name: str
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, eq=False)
class Opaque:
    type_name: str

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters: a value shown in a message or a record, whatever its size."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MAX_DEPTH = 200


def decode(node: Any, depth: int = 0) -> Any:
    """Rebuild a host value from tagged JSON; raises DecodeError on anything malformed."""
    if depth > _MAX_DEPTH:
        raise DecodeError("value nested too deeply")
    if not isinstance(node, dict) or not isinstance(node.get("t"), str):
        raise DecodeError("value node without a type tag")
    tag, v = node["t"], node.get("v")
    d = depth + 1
    try:
        if tag == "none":
            return None
        if tag == "bool" and isinstance(v, bool):
            return v
        if tag == "int" and isinstance(v, str):
            return int(v, 16)
        if tag == "float" and isinstance(v, str):
            return float(v)
        if tag == "complex" and isinstance(v, list) and len(v) == 2:
            return complex(float(v[0]), float(v[1]))
        if tag == "str" and isinstance(v, str):
            return v
        if tag == "bytes" and isinstance(v, str):
            return bytes.fromhex(v)
        if tag in ("list", "tuple", "set") and isinstance(v, list):
            items = [decode(x, d) for x in v]
            if tag == "list":
                return items
            return tuple(items) if tag == "tuple" else frozenset(items)
        if tag == "dict" and isinstance(v, list):
            out: dict[Any, Any] = {}
            for pair in v:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise DecodeError("malformed dict entry")
                out[decode(pair[0], d)] = decode(pair[1], d)
            return out
        if tag == "fraction" and isinstance(v, list) and len(v) == 2:
            return Fraction(int(v[0], 16), int(v[1], 16))
        if tag == "decimal" and isinstance(v, str):
            return Decimal(v)
        if tag in ("datetime", "date", "time") and isinstance(v, str):
            return getattr(dt, tag).fromisoformat(v)
        if tag == "timedelta" and isinstance(v, list) and len(v) == 3:
            return dt.timedelta(days=int(v[0]), seconds=int(v[1]), microseconds=int(v[2]))
        if tag == "ndarray" and isinstance(v, list):
            shape = tuple(int(x) for x in node.get("shape", ()))
            if math.prod(shape) != len(v):
                raise DecodeError("ndarray shape does not match its items")
            return Array(shape, tuple(decode(x, d) for x in v))
        if tag == "record" and isinstance(v, list):
            fields = tuple((str(name), decode(x, d)) for name, x in v)
            return Record("dataclass", str(node.get("type")), fields)
        if tag == "type" and isinstance(v, str):
            return Record("type", v, ())
        if tag == "enum" and isinstance(v, str):
            return Record("enum", str(node.get("type")), (("name", v),))
        if tag == "opaque":
            return Opaque(str(node.get("type")))
    except (TypeError, ValueError, InvalidOperation, OverflowError) as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"bad {tag} value: {exc}") from exc
    raise DecodeError(f"unknown or malformed value tag {tag!r}")


@dataclass(frozen=True)
class Tolerance:
    """Float comparison policy; the default (zero) is exact equality, as the reference's ``==``."""

    rel: float = 0.0
    abs: float = 0.0


EXACT = Tolerance()


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | complex | Fraction | Decimal)


def _numbers_equal(a: Number, b: Number, tol: Tolerance) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        if a == b:
            return True
    except (TypeError, InvalidOperation):
        return False
    if (tol.rel or tol.abs) and isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, bool) or isinstance(b, bool):
            return False
        return math.isclose(a, b, rel_tol=tol.rel, abs_tol=tol.abs)
    return False


def values_equal(expected: Any, got: Any, tol: Tolerance = EXACT) -> bool:
    """Python ``==`` on decoded values, NaN-aware and recursive (see the module docstring)."""
    if isinstance(expected, Opaque) or isinstance(got, Opaque):
        return False
    try:
        if type(expected) is type(got) and expected == got:
            return True  # fast path; decoded values share no objects, so == cannot be fooled by identity
    except TypeError:
        pass
    if _is_number(expected) and _is_number(got):
        return _numbers_equal(expected, got, tol)
    if type(expected) is not type(got):
        # Python's == across different built-in containers/types is False except numbers (handled above) and
        # set/frozenset, which decode to one type anyway.
        return False
    if isinstance(expected, list | tuple):
        return len(expected) == len(got) and all(values_equal(a, b, tol) for a, b in zip(expected, got, strict=True))
    if isinstance(expected, dict):
        if len(expected) != len(got):
            return False
        for key, value in expected.items():
            match = _find_key(got, key)
            if match is _MISSING or not values_equal(value, got[match], tol):
                return False
        return True
    if isinstance(expected, frozenset):
        return len(expected) == len(got) and all(any(values_equal(a, b, tol) for b in got) for a in expected)
    if isinstance(expected, Array):
        return expected.shape == got.shape and all(
            values_equal(a, b, tol) for a, b in zip(expected.items, got.items, strict=True)
        )
    if isinstance(expected, Record):
        return (
            expected.kind == got.kind
            and expected.type_name == got.type_name
            and len(expected.fields) == len(got.fields)
            and all(
                na == nb and values_equal(a, b, tol)
                for (na, a), (nb, b) in zip(expected.fields, got.fields, strict=True)
            )
        )
    return bool(expected == got)


_MISSING = object()


def _find_key(mapping: dict[Any, Any], key: Any) -> Any:
    """The key of ``mapping`` equal to ``key`` (hash lookup first, then a NaN-aware scan)."""
    try:
        if key in mapping:
            return next(k for k in mapping if k == key or k is key)
    except TypeError:
        pass
    for k in mapping:
        if values_equal(key, k):
            return k
    return _MISSING
