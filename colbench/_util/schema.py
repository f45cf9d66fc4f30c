"""Validating colbench's JSON files (the split manifest, run directories, price tables) with pydantic models.

:func:`validate` turns pydantic's report into the one-line :class:`~colbench.errors.DataError` every bad input gets
here: where (file, line, entry), which field, and what is wrong with the value found.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from colbench.errors import DataError

M = TypeVar("M", bound=BaseModel)


class FieldError(ValueError):
    """Raised by a model's cross-field check: reported under ``field`` (not the model's root)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def validate(model: type[M], raw: Any, where: str, *, context: dict[str, Any] | None = None) -> M:
    """``raw`` as a ``model``; a DataError ``"{where}: field 'a.b': <what is wrong>"`` otherwise."""
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        raise DataError(f"{where}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """The first error of a pydantic report, as ``field 'a.b': problem`` (one line)."""
    error = exc.errors()[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return f"field '{cause.field}': {cause}"
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        problem = "missing"
    elif error["type"] == "value_error":  # our own validators say what is wrong, value included
        problem = str(error["msg"]).removeprefix("Value error, ")
    else:
        problem = f"{error.get('input')!r} ({str(error['msg']).lower()})"
    problem = " ".join(problem.split())
    return f"field '{field}': {problem}" if field else problem
