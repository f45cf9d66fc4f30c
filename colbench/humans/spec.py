"""The spec simulator: a simulated human who never sees the hidden answer, only a plain-words specification of it.

A human who holds the reference code (or page) can be talked into pasting it (docs/leaks.md). This one cannot:
before its first reply on a task, an LLM (the *spec writer*) turns the hidden information into a natural-language
specification, once per task, and the human answers from that alone (``view="spec"``). What it cannot know is then
what the spec leaves out, and its leak rate is what ``colbench probe simulator`` measures beside the code-seeing
human's.

Specs are cached on disk, one JSON file per key (the hidden information's SHA-256, the writer's model and endpoint
identity, its prompt's SHA-256 and sampling settings), so a task's spec is written once per writer. They are
exportable (``colbench specs export``: one JSONL row per task) and loadable (``specs=FILE``), so a leaderboard can
pin the exact specs every entry was judged with; a pinned file must hold a spec for every task it is used on, for
the very hidden information of the task (its SHA-256), or it is a ``DataError``. A spec the domain's leak detector
flags is written again once with a stricter note; its score is kept with it either way.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from colbench._util.prompts import fill
from colbench._util.storage import canonical_json, iter_jsonl, sha256_text, write_json_atomic, write_jsonl_atomic
from colbench.errors import DataError
from colbench.humans.simulator import SimReply, Simulator
from colbench.llm.client import LLMClient
from colbench.types.chat import ChatReply, Usage
from colbench.types.dialogue import Turn
from colbench.types.task import Task

STRICTER = (
    "Your last specification quoted the hidden solution (code or markup). Write it again in plain everyday words "
    "only: no code, no markup, no class names, no formulas written as code."
)
SPEC_FIELDS = ("task_id", "hidden_sha256", "spec", "model", "prompt_sha256", "leak_score")


@dataclass(frozen=True)
class WrittenSpec:
    """One task's specification and what it was written from and by."""

    task_id: str
    hidden_sha256: str
    spec: str
    model: str
    prompt_sha256: str
    leak_score: float | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)


def hidden_sha256(task: Task) -> str:
    return sha256_text(task.hidden_information)


def load_specs(path: str | Path) -> dict[str, WrittenSpec]:
    """A pinned specs file (``colbench specs export``), by the hidden information's SHA-256."""
    specs: dict[str, WrittenSpec] = {}
    for where, row in iter_jsonl(str(path)):
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with {', '.join(SPEC_FIELDS[:3])}")
        for name in ("task_id", "hidden_sha256", "spec"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise DataError(f"{where}: field {name!r}: missing or not a non-empty string")
        score = row.get("leak_score")
        if score is not None and not isinstance(score, int | float):
            raise DataError(f"{where}: field 'leak_score': expected a number or null")
        spec = WrittenSpec(
            row["task_id"],
            row["hidden_sha256"],
            row["spec"],
            str(row.get("model") or ""),
            str(row.get("prompt_sha256") or ""),
            score,
        )
        specs[spec.hidden_sha256] = spec
    if not specs:
        raise DataError(f"{path}: no specs in the file")
    return specs


def write_specs(path: str | Path, specs: Iterable[WrittenSpec]) -> int:
    """Write specs as JSONL, one row per task (the file ``load_specs`` reads); returns the number written."""
    return write_jsonl_atomic(path, (spec.row() for spec in specs))


def written_specs(writer: SpecWriter, tasks: Sequence[Task], *, concurrency: int) -> list[WrittenSpec]:
    """Every task's spec (cached or written now), in task order, at most ``concurrency`` writings at once: what
    ``write_specs`` exports. Runs its own event loop, and closes the writer's async connections before that loop
    ends (they belong to it)."""

    async def write_all() -> list[WrittenSpec]:
        gate = asyncio.Semaphore(concurrency)

        async def one(task: Task) -> WrittenSpec:
            async with gate:
                return (await writer.awritten(task))[0]

        try:
            return list(await asyncio.gather(*(one(task) for task in tasks)))
        finally:
            await writer.aclose()

    return asyncio.run(write_all())


class SpecWriter:
    """Writes, caches and serves the specification of each task's hidden information.

    ``prompt``: the domain's spec-writer template (``$problem_description``, ``$hidden_information``);
    ``leak_score``: the domain's detector, ``(task, text) -> score``, with its ``threshold``; ``pinned``: specs
    loaded from a file (then no spec is ever written: a task missing from it is an error).
    """

    def __init__(
        self,
        client: LLMClient | None,
        prompt: str,
        *,
        cache_dir: str | Path | None = None,
        pinned: Mapping[str, WrittenSpec] | None = None,
        pinned_from: str = "",
        leak_score: Callable[[Task, str], float] | None = None,
        threshold: float = 0.5,
    ) -> None:
        if client is None and pinned is None:
            raise ValueError("a SpecWriter needs a client to write specs or pinned specs")
        self.client = client
        self.prompt = prompt
        self.prompt_sha256 = sha256_text(prompt)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.pinned = dict(pinned) if pinned is not None else None
        self.pinned_from = pinned_from
        self.leak_score = leak_score
        self.threshold = threshold
        self._memory: dict[str, WrittenSpec] = {}
        self._thread_lock = threading.Lock()
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def model(self) -> str:
        return "pinned" if self.client is None else self.client.endpoint.model

    def describe(self) -> dict[str, Any]:
        """The spec writer's part of run.json: what could change the specs."""
        if self.pinned is not None:
            digest = sha256_text(canonical_json(sorted(s.row()["spec"] for s in self.pinned.values())))
            return {"pinned": self.pinned_from, "specs_sha256": digest, "count": len(self.pinned)}
        assert self.client is not None
        endpoint = self.client.endpoint
        return {
            "model": endpoint.model,
            "base_url": endpoint.identity or endpoint.base_url,
            "temperature": endpoint.temperature,
            "max_tokens": endpoint.max_tokens,
            "prompt_sha256": self.prompt_sha256,
        }

    def spec_of(self, task: Task) -> WrittenSpec:
        """The task's spec, already written (a ``DataError`` for a task the writer has not served)."""
        known = self._known(task)
        if known is None:
            raise DataError(f"no spec written yet for task {task.task_id}")
        return known

    def _key(self, task: Task) -> str:
        return sha256_text(canonical_json({"hidden_sha256": hidden_sha256(task), "writer": self.describe()}))

    def _known(self, task: Task) -> WrittenSpec | None:
        if self.pinned is not None:
            spec = self.pinned.get(hidden_sha256(task))
            if spec is None:
                raise DataError(
                    f"{self.pinned_from or 'the pinned specs'}: no spec for task {task.task_id} "
                    f"(hidden information sha256 {hidden_sha256(task)[:12]})"
                )
            return spec
        key = self._key(task)
        if key in self._memory:
            return self._memory[key]
        path = self._path(key)
        if path is not None and path.is_file():
            try:
                spec = WrittenSpec(**json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                return None  # a damaged cache entry is written again
            self._memory[key] = spec
            return spec
        return None

    def _path(self, key: str) -> Path | None:
        return self.cache_dir / f"{key}.json" if self.cache_dir is not None else None

    def _messages(self, task: Task, stricter: bool) -> list[dict[str, str]]:
        system = fill(
            self.prompt,
            problem_description=task.problem_description.strip(),
            hidden_information=task.hidden_information.strip(),
        )
        ask = "Write the specification now." + (f" {STRICTER}" if stricter else "")
        return [{"role": "system", "content": system}, {"role": "user", "content": ask}]

    def _keep(self, task: Task, text: str) -> WrittenSpec:
        score = self.leak_score(task, text) if self.leak_score is not None else None
        spec = WrittenSpec(task.task_id, hidden_sha256(task), text, self.model, self.prompt_sha256, score)
        key = self._key(task)
        self._memory[key] = spec
        path = self._path(key)
        if path is not None:
            write_json_atomic(path, spec.row())
        return spec

    def _leaks(self, task: Task, text: str) -> bool:
        return self.leak_score is not None and self.leak_score(task, text) >= self.threshold

    def written(self, task: Task) -> tuple[WrittenSpec, Usage]:
        """The task's spec, written on first use (the sync path), and the tokens this call spent writing it."""
        with self._thread_lock:
            known = self._known(task)
            if known is not None:
                return known, Usage()
            assert self.client is not None
            first = self.client.chat(self._messages(task, stricter=False))
            again = self.client.chat(self._messages(task, stricter=True)) if self._leaks(task, first.text) else None
            return self._kept(task, first, again)

    async def awritten(self, task: Task) -> tuple[WrittenSpec, Usage]:
        """``written`` for asyncio; concurrent callers for one task wait for one writing."""
        known = self._known(task)
        if known is not None:
            return known, Usage()
        async with self._locks.setdefault(self._key(task), asyncio.Lock()):
            known = self._known(task)
            if known is not None:
                return known, Usage()
            assert self.client is not None
            first = await self.client.achat(self._messages(task, stricter=False))
            leaked = self._leaks(task, first.text)
            again = await self.client.achat(self._messages(task, stricter=True)) if leaked else None
            return self._kept(task, first, again)

    async def aclose(self) -> None:
        """Close the HTTP pool the writer's client opened on the running loop (pinned specs hold none)."""
        if self.client is not None:
            await self.client.aclose()

    def _kept(self, task: Task, first: ChatReply, again: ChatReply | None) -> tuple[WrittenSpec, Usage]:
        """Keep the last writing (the stricter one when the first leaked), and what both cost."""
        spent = Usage(**first.usage.as_dict())
        if again is not None:
            spent.add(again.usage)
        return self._keep(task, (again or first).text.strip()), spent


def spec_task(task: Task, spec: WrittenSpec) -> Task:
    """The task as the spec human knows it: the spec in place of the hidden information and the reference."""
    return replace(task, hidden_information=spec.spec, ground_truth=spec.spec)


class SpecSimulator:
    """A simulated human that answers from the task's spec alone: ``inner`` is the domain's human built with its
    spec-view prompt, and is only ever shown tasks whose hidden information is the spec."""

    def __init__(self, inner: Simulator, writer: SpecWriter) -> None:
        self.inner = inner
        self.writer = writer

    @property
    def client(self) -> LLMClient | None:
        """The inner human's client (its endpoint is the simulator's: the Ray driver pins it for every node)."""
        return getattr(self.inner, "client", None)

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        spec, spent = self.writer.written(task)
        return _with_usage(self.inner.reply(spec_task(task, spec), dialogue), spent)

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        spec, spent = await self.writer.awritten(task)
        return _with_usage(await self.inner.areply(spec_task(task, spec), dialogue), spent)

    async def aclose(self) -> None:
        """Close the inner human's clients and the spec writer's."""
        try:
            await self.inner.aclose()
        finally:
            await self.writer.aclose()


def _with_usage(reply: SimReply, spent: Usage) -> SimReply:
    """The reply, charged with the tokens spent writing the spec it came from (once per task)."""
    if not spent.calls:
        return reply
    usage = Usage(**reply.usage.as_dict())
    usage.add(spent)
    return replace(reply, usage=usage)
