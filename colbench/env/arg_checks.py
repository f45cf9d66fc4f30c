"""The checks an env runs on its arguments when it is made (and on ``reset``'s), before anything is built from them.

A bad argument must fail at ``gym.make`` (or ``make_vec``) with one line naming it, not at the final answer of the
first episode after the simulated human's calls have been paid for (``sandbox="vm"`` used to), nor be silently
ignored (``reset(options="task")``). So every check here runs before a model client, a sandbox, a browser or a task
split is touched, and raises a :class:`~colbench.errors.ConfigError` of the form
``ENV: ARGUMENT=VALUE: expected WHAT``.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from colbench.errors import ConfigError
from colbench.llm.client import Endpoint
from colbench.types.task import Task

RESET_OPTIONS = frozenset({"task_id"})
"""The keys ``reset(options=...)`` understands (a vector env also takes ``reset_mask``, which it removes first)."""


def shown(value: Any) -> str:
    """``value`` as the error message quotes it: its repr on one line, cut to 80 characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else f"{text[:77]}..."


def fail(where: str, name: str, value: Any, expected: str) -> NoReturn:
    raise ConfigError(f"{where}: {name}={shown(value)}: expected {expected}")


def check_int(where: str, name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        fail(where, name, value, f"an integer >= {minimum}")
    return int(value)


def check_number(where: str, name: str, value: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not value >= minimum:
        fail(where, name, value, f"a number >= {minimum}")
    return float(value)


def check_bool(where: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        fail(where, name, value, "True or False")
    return bool(value)


def check_choice(where: str, name: str, value: Any, choices: Sequence[Any], *, other: str = "") -> Any:
    """``value`` if it is one of ``choices`` (``other``: what else the argument takes, for the message)."""
    if isinstance(value, bool) or value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        fail(where, name, value, f"one of {listed}{f' or {other}' if other else ''}")
    return value


def check_options(where: str, name: str, value: Any) -> dict[str, Any]:
    """An options mapping with string keys (``None``: none)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        fail(where, name, value, "a dict with string keys, or None")
    return dict(value)


def check_has(where: str, name: str, value: Any, methods: Sequence[str], expected: str) -> None:
    """``value`` offers every one of ``methods`` (the protocols an env takes objects of are duck-typed)."""
    if not all(callable(getattr(value, m, None)) for m in methods):
        fail(where, name, value, expected)


def check_tasks(where: str, value: Any, domain: str | None) -> None:
    """``tasks``: a task file, a split (whose domain must be ``domain`` when given) or a sequence of ``Task``; a
    name is checked against the split manifest and the file system, no task is read."""
    expected = "a JSONL file, a split name or a sequence of Task records"
    if isinstance(value, str):
        name = value.partition("@")[0]
        if not value.strip():
            fail(where, "tasks", value, expected)
        if Path(value).is_file():
            return
        # the split manifest (tasks layer) only for tasks given by name
        from colbench.tasks.manifest import load_manifest

        splits = load_manifest()
        if name not in splits:
            fail(where, "tasks", value, f"a JSONL file or one of the splits {', '.join(splits)}")
        if domain is not None and splits[name].domain != domain:
            fail(where, "tasks", value, f"{domain} tasks; split {name!r} holds {splits[name].domain} tasks")
        return
    if isinstance(value, bytes | Mapping) or not isinstance(value, Sequence):
        fail(where, "tasks", value, expected)
    bad = next((t for t in value if not isinstance(t, Task)), None)
    if bad is not None:
        fail(where, "tasks", value, f"{expected} (found a {type(bad).__name__})")


def check_seed(where: str, seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        fail(where, "reset(seed)", seed, "a non-negative integer or None")
    return int(seed)


def check_reset_options(where: str, options: Any, known: frozenset[str] = RESET_OPTIONS) -> dict[str, Any]:
    """``reset``'s options: None, or a mapping whose keys are all ``known`` (a misspelt key is an error, not a
    silently random task); a ``task_id`` is a string or an integer."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        fail(where, "reset(options)", options, f"a dict with keys from {', '.join(sorted(known))}, or None")
    unknown = sorted(str(k) for k in options if k not in known)
    if unknown:
        fail(where, "reset(options)", dict(options), f"keys from {', '.join(sorted(known))} (unknown: {unknown[0]})")
    task_id = options.get("task_id")
    if "task_id" in options and (isinstance(task_id, bool) or not isinstance(task_id, str | int | np.integer)):
        fail(where, "reset(options['task_id'])", task_id, "a task id (a string)")
    return dict(options)


_POSITIVE = frozenset({"timeout_s", "max_tokens", "max_connections"})
"""Endpoint fields that must be above 0 (the other numbers may be 0)."""


def check_endpoint_options(where: str, name: str, options: Mapping[str, Any]) -> None:
    """The endpoint fields among ``options`` (``base_url``, ``temperature``, ``max_tokens``, ...) have the types
    :class:`~colbench.llm.client.Endpoint` declares, numbers not below 0 (a server started for the embedded model
    would be started before the endpoint itself could object); ``cache_dir`` is a path. Other keys are the
    simulator's or agent's own, checked where they are read."""
    hints = typing.get_type_hints(Endpoint)
    for key, value in options.items():
        if key == "cache_dir" and not isinstance(value, str | os.PathLike):
            fail(where, f"{name}['cache_dir']", value, "a directory path")
        if key not in hints or key == "model":
            continue
        hint = hints[key]
        kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if value is None and type(None) in kinds:
            continue
        if not any(_is(value, kind) for kind in kinds if kind is not type(None)):
            named = [getattr(k, "__name__", str(k)) for k in kinds if k is not type(None)]
            fail(where, f"{name}[{key!r}]", value, " or ".join(named + (["None"] if type(None) in kinds else [])))
        if isinstance(value, int | float) and (value < 0 or (key in _POSITIVE and value <= 0)):
            fail(where, f"{name}[{key!r}]", value, "a number above 0" if key in _POSITIVE else "a number >= 0")


def _is(value: Any, kind: Any) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, typing.get_origin(kind) or kind)
