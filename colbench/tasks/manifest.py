"""The split manifest (``tasks/manifest.json``): which named task sets exist and where each comes from.

A split is a bundled sample (kind ``bundled``: a JSONL file under ``tasks/``), one JSONL file of a Hugging Face
dataset repository (``hf-file``), or rows of the WebSight parquet shards built into frontend tasks
(``hf-websight``). Hub splits carry a commit and SHA-256 where a published value was verified, else ``null``: they
are then pinned on first use (:mod:`colbench.tasks.pins`). The manifest is validated with pydantic; an error names
the split and the field.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from colbench._util.datafiles import data_path
from colbench._util.schema import FieldError, validate
from colbench.errors import ConfigError, DataError
from colbench.tasks.domain_registry import domain_names
from colbench.tasks.pins import COMMIT

BUNDLED = "bundled"  # a JSONL file shipped inside colbench (``tasks/<path>``)
HF_FILE = "hf-file"  # one JSONL file in a hub repository
HF_WEBSIGHT = "hf-websight"  # rows of the WebSight parquet shards, built into frontend tasks (colbench.tasks.websight)
HUB_KINDS = (HF_FILE, HF_WEBSIGHT)

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NO_SPACE = re.compile(r"\S+")
NonNegative = Annotated[int, Field(ge=0, strict=True)]


@dataclass(frozen=True)
class Split:
    """One named split of the manifest.

    ``start``/``stop`` are the half-open range ``[start, stop)`` of JSON rows (blank lines do not count;
    ``stop=None`` means to the end of the file). ``revision``/``sha256`` are ``None`` unless verified:
    then the pins are taken on first use. ``path`` is a bundled split's file under ``tasks/``.

    ``hf-websight`` splits have no ``filename``: ``data_files`` is the glob of the config's parquet shards,
    ``shards`` the shard files in row order when the manifest names them (else they are listed on the hub),
    ``shard_sha256`` the verified SHA-256 of named shards, and the row range counts rows across the shards.
    """

    name: str
    kind: str
    domain: str
    repo_id: str
    repo_type: str
    filename: str
    revision: str | None
    sha256: str | None
    start: int
    stop: int | None
    expected_rows: int | None
    license: str
    description: str = ""
    config: str = ""
    data_files: str = ""
    shards: tuple[str, ...] = ()
    shard_sha256: tuple[tuple[str, str], ...] = ()
    path: str = ""

    @property
    def pin_key(self) -> str:
        """The key of this split's file (or shard glob) in the pins file (splits sharing it share its pin)."""
        return f"{self.repo_type}:{self.repo_id}:{self.filename or self.data_files}"

    @property
    def row_range(self) -> str:
        return f"[{self.start}, {'end' if self.stop is None else self.stop})"


class _Entry(BaseModel):
    """A manifest entry as written (format 1)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: str = Field(min_length=1)
    domain: str
    license: str = Field(min_length=1)
    description: str = ""
    repo_id: str = ""
    repo_type: str = "dataset"
    filename: str = ""
    path: str = ""
    config: str = ""
    data_files: str = ""
    revision: str | None = None
    sha256: str | dict[str, str] | None = None
    shards: list[str] | None = None
    rows: tuple[NonNegative, NonNegative | None] = (0, None)
    expected_rows: NonNegative | None = None

    @field_validator("domain")
    @classmethod
    def _known_domain(cls, value: str) -> str:
        if value not in domain_names():
            raise ValueError(f"expected one of {', '.join(domain_names())}, got {value!r}")
        return value

    @field_validator("rows")
    @classmethod
    def _range(cls, value: tuple[int, int | None]) -> tuple[int, int | None]:
        if value[1] is not None and value[1] <= value[0]:
            raise ValueError("expected [start, stop] with 0 <= start < stop (stop may be null)")
        return value

    @model_validator(mode="after")
    def _by_kind(self) -> _Entry:
        hub = self.kind in HUB_KINDS
        required = {"repo_id": hub, "filename": self.kind == HF_FILE, "path": self.kind == BUNDLED}
        required |= {"config": self.kind == HF_WEBSIGHT, "data_files": self.kind == HF_WEBSIGHT}
        for name, needed in required.items():
            if needed and not getattr(self, name):
                raise FieldError(name, "expected a non-empty string")
        if self.revision is not None and not _matches(COMMIT if hub else _NO_SPACE, self.revision):
            raise FieldError("revision", f"expected null or a 40-hex commit, got {self.revision!r}")
        if self.kind == HF_WEBSIGHT:
            self._check_shards()
        elif self.sha256 is not None and not (isinstance(self.sha256, str) and _matches(_SHA256, self.sha256)):
            raise FieldError("sha256", f"expected null or 64 lowercase hex digits, got {self.sha256!r}")
        return self

    def _check_shards(self) -> None:
        pattern = self.data_files
        shards = self.shards
        if shards is not None and (
            not shards or len(set(shards)) != len(shards) or not all(fnmatch.fnmatchcase(s, pattern) for s in shards)
        ):
            raise FieldError("shards", f"expected null or a list of distinct files matching {pattern!r}")
        if self.sha256 is None:
            return
        if not isinstance(self.sha256, dict):
            raise FieldError("sha256", "expected null or an object {shard file: sha256}")
        for shard, digest in self.sha256.items():
            if not fnmatch.fnmatchcase(shard, pattern) or not _matches(_SHA256, digest):
                raise FieldError(f"sha256.{shard}", f"expected a shard matching {pattern!r} -> 64 lowercase hex digits")

    def spec(self, name: str) -> Split:
        websight = self.kind == HF_WEBSIGHT
        return Split(
            name=name,
            kind=self.kind,
            domain=self.domain,
            repo_id=self.repo_id,
            repo_type=self.repo_type or "dataset",
            filename=self.filename,
            revision=self.revision,
            sha256=None if websight or not isinstance(self.sha256, str) else self.sha256,
            start=self.rows[0],
            stop=self.rows[1],
            expected_rows=self.expected_rows,
            license=self.license,
            description=self.description,
            config=self.config,
            data_files=self.data_files,
            shards=tuple(self.shards or ()),
            shard_sha256=tuple(sorted(self.sha256.items())) if isinstance(self.sha256, dict) else (),
            path=self.path,
        )


def _matches(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def parse_manifest(raw: Any, *, source: str = "<manifest>") -> dict[str, Split]:
    """Validate a decoded manifest document (format 1) into split specs."""
    if not isinstance(raw, dict) or raw.get("format") != 1 or not isinstance(raw.get("splits"), dict):
        raise DataError(f'{source}: expected an object with "format": 1 and a "splits" object')
    out = {}
    for name, entry in raw["splits"].items():
        where = f"{source}: split {name!r}"
        if not isinstance(entry, dict):
            raise DataError(f"{where}: expected an object")
        out[name] = validate(_Entry, entry, where).spec(name)
    return out


def load_manifest() -> dict[str, Split]:
    """The packaged split manifest, validated (a broken one is a DataError naming the split and field)."""
    return dict(_packaged_manifest())


@cache
def _packaged_manifest() -> tuple[tuple[str, Split], ...]:
    path = data_path("tasks", "manifest.json")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the split manifest: {exc}") from exc
    return tuple(parse_manifest(raw, source=str(path)).items())


def known_splits() -> list[str]:
    """Names of the splits in the manifest, in manifest order."""
    return list(load_manifest())


def get_split(name: str) -> Split:
    """The manifest entry for ``name``; an unknown name is a ConfigError listing the known splits."""
    splits = load_manifest()
    if name not in splits:
        raise ConfigError(f"unknown split {name!r}; known splits: {', '.join(splits) or '(none)'}")
    return splits[name]
