"""Tallies of finished episodes and the live progress of ``colbench eval`` (on stderr).

On a terminal, a ``rich`` progress bar redrawn twice a second; otherwise (a log file, CI) a plain line every few
seconds. ``--quiet`` turns it off. What it says: episodes done/total, episodes running, how the scored ones did so
far (the domain's headline: success rate, or mean similarity), infrastructure errors, tokens spent this session,
episodes per minute, ETA.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress
from rich.table import Column

from colbench.domains.base import Domain

ProgressMode = Literal["auto", "tty", "lines", "off"]


@dataclass
class Tally:
    """Counts over episode records: ``ok`` are scored, ``infra`` could not be judged."""

    ok: int = 0
    infra: int = 0
    success: int = 0
    reward_sum: float = 0.0
    agent_tokens: int = 0
    simulator_tokens: int = 0

    def add(self, record: Mapping[str, Any]) -> None:
        usage = record.get("usage") or {}
        self.agent_tokens += _tokens(usage.get("agent"))
        self.simulator_tokens += _tokens(usage.get("simulator"))
        if record.get("status") == "ok":
            self.ok += 1
            self.success += bool(record.get("success"))
            self.reward_sum += float(record.get("reward") or 0.0)
        else:
            self.infra += 1

    @property
    def finished(self) -> int:
        return self.ok + self.infra

    def headline(self, domain: Domain) -> str:
        return domain.headline(self.ok, self.success, self.reward_sum)


def _tokens(usage: Any) -> int:
    if not isinstance(usage, Mapping):
        return 0
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)


def _human(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(int(n))


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The live display. ``kept`` are the episodes already final before this session (a resume)."""

    def __init__(
        self,
        *,
        total: int,
        kept: Tally,
        domain: Domain,
        stream: TextIO | None,
        mode: ProgressMode = "auto",
        interval_s: float | None = None,
    ) -> None:
        if mode == "auto":
            mode = "tty" if stream is not None and stream.isatty() else "lines"
        self.mode: ProgressMode = "off" if stream is None else mode
        self.stream = stream
        self.total = total
        self.kept = kept
        self.domain = domain
        self.session = Tally()
        self.overall = Tally(**vars(kept))
        self.running = 0
        self.interval_s = interval_s if interval_s is not None else (0.5 if self.mode == "tty" else 5.0)
        self._started = time.monotonic()
        self._bar: RichProgress | None = None
        if self.mode == "tty":
            console = Console(file=stream, force_terminal=True, highlight=False)
            status = Column(ratio=1, no_wrap=True, overflow="ellipsis")  # what gives way on a narrow terminal
            self._bar = RichProgress(
                TextColumn("[bold]eval[/]"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}", table_column=status),
                console=console,
                auto_refresh=False,
                transient=False,
                expand=True,
            )
            self._task = self._bar.add_task("eval", total=total, completed=kept.ok, status="")
            self._bar.start()

    def episode_started(self) -> None:
        self.running += 1

    def episode_finished(self, record: Mapping[str, Any]) -> None:
        self.running -= 1
        self.session.add(record)
        if record.get("status") == "ok":
            self.overall.add(record)

    @property
    def done(self) -> int:
        return self.kept.ok + self.session.finished

    def status(self) -> str:
        """Everything but the count and the ETA (the bar shows those itself)."""
        parts = []
        if self.running:
            parts.append(f"{self.running} running")
        parts.append(self.overall.headline(self.domain))
        parts.append(f"infra errors {self.session.infra}")
        parts.append(f"tokens {_human(self.session.agent_tokens + self.session.simulator_tokens)}")
        return " | ".join(parts)

    def line(self) -> str:
        parts = [f"{self.done}/{self.total} done", self.status()]
        elapsed = time.monotonic() - self._started
        if self.session.finished and elapsed > 0:
            rate = self.session.finished / elapsed
            parts.append(f"{60 * rate:.1f} ep/min")
            parts.append(f"ETA {_duration(max(0, self.total - self.done) / rate)}")
        return " | ".join(parts)

    def draw(self) -> None:
        if self.stream is None or self.mode == "off":
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, status=self.status())
            self._bar.refresh()
            return
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    async def run(self) -> None:
        """Redraw every ``interval_s`` until cancelled."""
        if self.mode == "off":
            return
        while True:
            await asyncio.sleep(self.interval_s)
            self.draw()

    def close(self) -> None:
        if self.stream is None or self.mode == "off":
            return
        self.draw()
        if self._bar is not None:
            self._bar.stop()
