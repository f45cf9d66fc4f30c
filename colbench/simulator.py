"""The simulated human: strategies behind one protocol.

The env asks a :class:`Simulator` for the human's answer to the agent's latest turn. The OpenAI-backed one
shows the model the task's hidden information in its system prompt and the dialogue as real chat messages
(agent turns are ``user``, earlier human turns ``assistant``), so the model continues the conversation as the
human instead of completing a flattened transcript. A scripted one serves tests and offline env checks.
Replies may be cached on disk so a re-run of an evaluation reproduces the same human and costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from colbench.errors import ConfigError
from colbench.llm import LLMClient, Usage, endpoint_from_spec
from colbench.tasks import Domain, Task

SIMULATOR_SPECS = "'openai:MODEL', 'local', 'local:PATH.gguf' or 'scripted'"
DEFAULT_SCRIPTED_REPLY = "I don't know."


@dataclass(frozen=True)
class Turn:
    """One message of the dialogue. ``image`` is the PNG of the page an agent turn produced (frontend only)."""

    role: Literal["agent", "human"]
    text: str
    image: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SimReply:
    text: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False


@runtime_checkable
class Simulator(Protocol):
    """Answers the agent's last turn as the human who knows ``task.hidden_information``.

    The frontend env also passes ``reference_image``, the PNG of the page the human wants (the agent's pages are
    on the agent turns, ``Turn.image``); text simulators ignore both.
    """

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply: ...

    async def areply(
        self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None
    ) -> SimReply: ...


class ResponseCache:
    """Chat replies on disk, keyed by the SHA-256 of the canonical JSON of the whole request.

    One SQLite file; a lock serialises this process's threads and SQLite's own locking (WAL, busy timeout)
    serialises processes sharing the file. Keys cover model, base URL, messages, temperature, max tokens and
    extra body, so anything that could change the reply changes the key. Note that a cached sampled reply
    (temperature > 0) is replayed as is: that is the point, a re-run sees the same human.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        # Switching a new file to WAL can fail with "database is locked" at once, without SQLite's busy handler,
        # when another process is doing the same: retry within the connection's own 30 s budget.
        deadline = time.monotonic() + 30.0
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS replies"
                    " (key TEXT PRIMARY KEY, model TEXT, text TEXT NOT NULL, created REAL)"
                )
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def get(self, request: Mapping[str, Any]) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT text FROM replies WHERE key = ?", (self.key(request),)).fetchone()
        return None if row is None else str(row[0])

    def put(self, request: Mapping[str, Any], text: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (key, model, text, created) VALUES (?, ?, ?, ?)",
                (self.key(request), str(request.get("model", "")), text, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


@cache
def _template(domain: str) -> string.Template:
    text = resources.files("colbench.envs").joinpath(domain, "prompts", "simulator.txt").read_text("utf-8")
    return string.Template(text)


def system_prompt(task: Task) -> str:
    """The simulator's instructions for ``task`` (``$name`` markers: braces in the code are left alone)."""
    return _template(task.domain).substitute(
        problem_description=task.problem_description.strip(),
        hidden_information=task.hidden_information.strip(),
    )


def truncate(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars``, at the last word boundary when one is not too far back."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip()


class OpenAISimulator:
    """A chat model playing the human, via any OpenAI-compatible endpoint."""

    def __init__(self, client: LLMClient, *, max_chars: int = 400, cache: ResponseCache | None = None) -> None:
        self.client = client
        self.max_chars = max_chars
        self.cache = cache

    def messages(
        self, task: Task, dialogue: Sequence[Turn], reference_image: bytes | None = None
    ) -> list[dict[str, Any]]:
        """The chat request for the human's next reply (subclasses show the model other things)."""
        if not dialogue or dialogue[-1].role != "agent":
            raise ConfigError("the simulator answers the agent: the dialogue must end with an agent turn")
        chat: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(task)}]
        chat += [{"role": "user" if t.role == "agent" else "assistant", "content": t.text} for t in dialogue]
        return chat

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        messages = self.messages(task, dialogue, reference_image)
        hit = self._cached(messages)
        if hit is not None:
            return hit
        answer = self.client.chat(messages)
        return self._store(messages, answer.text, answer.usage)

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        messages = self.messages(task, dialogue, reference_image)
        hit = self._cached(messages)
        if hit is not None:
            return hit
        answer = await self.client.achat(messages)
        return self._store(messages, answer.text, answer.usage)

    def _cached(self, messages: list[dict[str, Any]]) -> SimReply | None:
        if self.cache is None:
            return None
        text = self.cache.get(self.client.request(messages))
        return None if text is None else SimReply(truncate(text, self.max_chars), Usage(), cached=True)

    def _store(self, messages: list[dict[str, Any]], text: str, usage: Usage) -> SimReply:
        # The model's full text is cached, truncation applied after: the cache serves any max_chars.
        if self.cache is not None:
            self.cache.put(self.client.request(messages), text)
        return SimReply(truncate(text, self.max_chars), usage)


class ScriptedSimulator:
    """A human with canned answers, for tests and offline runs.

    With a list, the n-th human reply of an episode is ``replies[n]`` (counted from the human turns already in
    the dialogue, so one instance serves many episodes, in any order or concurrently); past the end the last
    reply repeats. With a callable, it is asked each time.
    """

    def __init__(self, replies: Sequence[str] | Callable[[Task, Sequence[Turn]], str]) -> None:
        if isinstance(replies, str):
            raise ConfigError("ScriptedSimulator takes a list of replies or a callable, not a single string")
        self._replies = replies

    def reply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        if callable(self._replies):
            return SimReply(self._replies(task, dialogue))
        if not self._replies:
            return SimReply(DEFAULT_SCRIPTED_REPLY)
        answered = sum(1 for turn in dialogue if turn.role == "human")
        return SimReply(self._replies[min(answered, len(self._replies) - 1)])

    async def areply(self, task: Task, dialogue: Sequence[Turn], *, reference_image: bytes | None = None) -> SimReply:
        return self.reply(task, dialogue, reference_image=reference_image)


def make_simulator(
    spec: str,
    *,
    domain: Domain = "backend",
    cache_dir: str | Path | None = None,
    **endpoint_overrides: Any,
) -> Simulator:
    """Build a simulator from a spec string (the CLI's ``--simulator``).

    ``openai:MODEL`` uses any OpenAI-compatible endpoint (see :func:`colbench.llm.endpoint_from_spec` for the
    base URL / key resolution; ``endpoint_overrides`` are :class:`~colbench.llm.Endpoint` fields) and caches
    replies under ``cache_dir`` when given; for the frontend it is a vision model (``image_mode`` picks how the
    pages are shown, see :class:`colbench.envs.frontend.simulator.PageSimulator`). ``scripted`` always answers
    "I don't know." (offline checks). ``local`` / ``local:PATH.gguf`` is the embedded model, served once per process
    (:mod:`colbench.local_model`) and used like ``openai:MODEL``.
    """
    if spec == "scripted":
        return ScriptedSimulator([])
    if spec.startswith("openai:") or spec == "local" or spec.startswith("local:"):
        page_options = {k: endpoint_overrides.pop(k) for k in ("image_mode",) if k in endpoint_overrides}
        endpoint = endpoint_from_spec(spec, "simulator", **endpoint_overrides)
        cache = ResponseCache(Path(cache_dir) / "simulator.sqlite") if cache_dir is not None else None
        if domain == "frontend":
            from colbench.envs.frontend.simulator import PageSimulator

            if spec.startswith("local"):  # the embedded model reads no images: show it the pages' HTML
                page_options.setdefault("image_mode", "html")

            return PageSimulator(LLMClient(endpoint), cache=cache, **page_options)
        if page_options:
            raise ConfigError(f"simulator option(s) {', '.join(page_options)} apply to frontend tasks only")
        return OpenAISimulator(LLMClient(endpoint), cache=cache)
    raise ConfigError(f"bad simulator spec {spec!r}: expected {SIMULATOR_SPECS}")
