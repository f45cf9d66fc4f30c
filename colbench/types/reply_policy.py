"""What an env does with a human reply its checks flag: the form the leak policy (``colbench.types.leaks``) and the
truth policy (``colbench.types.claims``) share. A policy is one of its plain modes (``off``, ``flag``, ...) or
``resample`` with N more draws (1 to 10), written ``resample:N`` (or ``resample`` alone where it has a default N).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Self

from colbench.errors import ConfigError

_RESAMPLE = re.compile(r"resample(?::(\d+))?")


@dataclass(frozen=True)
class ReplyPolicy:
    mode: str = "flag"
    retries: int = 0

    name: ClassVar[str]
    """How an error names the policy (``leak policy``)."""
    modes: ClassVar[tuple[str, ...]]
    """Its plain modes, besides ``resample``."""
    default_retries: ClassVar[int | None] = None
    """N of a plain ``resample`` (None: N must be written)."""

    @classmethod
    def parse(cls, text: str | Self | None) -> Self:
        """A policy as written, a policy of this kind as it is, ``None`` as the default; a ConfigError naming what
        it accepts otherwise."""
        if isinstance(text, cls):
            return text
        if text is None:
            return cls()
        spec = str(text).strip().lower()
        if spec in cls.modes:
            return cls(spec)
        match = _RESAMPLE.fullmatch(spec)
        retries = int(match.group(1) or cls.default_retries or 0) if match else 0
        if 1 <= retries <= 10:
            return cls("resample", retries)
        accepted = [*cls.modes, *(["resample"] if cls.default_retries else []), "resample:N"]
        raise ConfigError(f"{cls.name} {text!r}: expected one of {', '.join(accepted)} (N from 1 to 10)")

    def __str__(self) -> str:
        return f"resample:{self.retries}" if self.mode == "resample" else self.mode
