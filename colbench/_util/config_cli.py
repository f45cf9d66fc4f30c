"""A dataclass config as a command line, and back: the example trainers (examples/sweet_rl, examples/simulator_sft)
are cleanrl-style scripts whose one config dataclass is their whole interface, and whose ``run_all.py`` runs each
stage as a subprocess with the config it holds. One parser both ways keeps a stage's flags and the driver's in step.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def parse_config(cls: type[T], argv: Sequence[str] | None = None, *, description: str | None = None) -> T:
    """``cls`` from ``argv``: every field is ``--field-name``; bools ``--flag`` / ``--no-flag`` (a ``bool | None``
    left unset stays None); lists take several values; other ``X | None`` fields accept ``none``. ``--help`` lists
    the defaults."""
    hints = typing.get_type_hints(cls)
    parser = argparse.ArgumentParser(description=description or cls.__doc__)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = hints[f.name]
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
        args = typing.get_args(kind)
        optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args
        base = next((a for a in args if a is not type(None)), kind) if optional else kind
        help_text = f"default: {default!r}"
        if base is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif typing.get_origin(base) is list:
            (item,) = typing.get_args(base)
            parser.add_argument(flag, nargs="*", type=item, default=default, help=help_text)
        else:
            parser.add_argument(flag, type=_optional(base) if optional else base, default=default, help=help_text)
    return cls(**vars(parser.parse_args(argv)))


def _optional(convert: Any) -> Any:
    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "null", "") else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its error messages
    return parse


def config_args(config: Any) -> list[str]:
    """The command line that :func:`parse_config` turns back into ``config``."""
    argv: list[str] = []
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value, flag = getattr(config, f.name), "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif value is None and hints[f.name] == bool | None:
            continue  # unset: the parser's default, None
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, "none" if value is None else str(value)]
    return argv
