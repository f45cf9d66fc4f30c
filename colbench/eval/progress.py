"""Tallies of finished episodes and the live progress of ``colbench eval`` (on stderr).

What it says: episodes done/total, episodes running, how the scored ones did so far (the domain's headline: success
rate, or mean similarity), infrastructure errors, tokens and their cost this session, episodes per minute, ETA.

- On a terminal (``tty``): a ``rich`` progress bar, redrawn in place twice a second.
- Otherwise (``lines``: a log file, CI): one plain line each time another tenth of the episodes has finished, or
  after a minute without a line (whichever comes first), and a last line at the end: at most ten lines for a run
  that goes faster than a tenth a minute, whatever its size.
- ``off`` (``--quiet``): nothing.

Cost: the session's tokens priced by role (the run's agent and simulator models, as run.json names them) with the
``--prices`` table, else colbench's list prices (those ``--dry-run`` forecasts with); "cost n/a" while a role that
spent tokens has no price. A role that spent no tokens (scripted) costs nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TextIO, cast

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.table import Column

from colbench.env.domain import Domain
from colbench.llm.specs import ModelSpec
from colbench.report.costs import LIST_PRICES, Price, Prices, price_names
from colbench.runs import ROLES, RoleSection
from colbench.runs.episodes import EpisodeRecord
from colbench.types.chat import Usage

ProgressMode = Literal["auto", "tty", "lines", "off"]
LINE_EVERY_S = 60.0  # lines mode: the longest a log goes without a line
STEPS = 10  # lines mode: a line each time another 1/STEPS of the episodes has finished


@dataclass
class Tally:
    """Counts over episode records: ``ok`` are scored, ``infra`` could not be judged; ``usage`` per role."""

    ok: int = 0
    infra: int = 0
    success: int = 0
    reward_sum: float = 0.0
    usage: dict[str, Usage] = field(default_factory=dict)

    def add(self, record: EpisodeRecord) -> None:
        for role, spent in record.usage_by_role().items():
            self.usage.setdefault(role, Usage()).add(spent)
        if record.ok:
            self.ok += 1
            self.success += bool(record.success)
            self.reward_sum += float(record.reward or 0.0)
        else:
            self.infra += 1

    @property
    def finished(self) -> int:
        return self.ok + self.infra

    @property
    def tokens(self) -> int:
        return sum(self.role_tokens(role) for role in ROLES)

    def role_tokens(self, role: str) -> int:
        """Prompt and completion tokens of ``role``."""
        spent = self.usage.get(role, Usage())
        return spent.prompt_tokens + spent.completion_tokens

    def headline(self, domain: Domain, env_id: str | None = None) -> str:
        return domain.headline(self.ok, self.success, self.reward_sum, env_id)


@dataclass(frozen=True)
class Pricing:
    """The price of each role's model; a role missing here (or priced None) has no known price."""

    roles: Mapping[str, Price | None] = field(default_factory=dict)

    @classmethod
    def for_run(
        cls,
        sections: Mapping[str, RoleSection | None],
        prices: Prices | None = None,
        specs: Mapping[str, ModelSpec] | None = None,
    ) -> Pricing:
        """Look each role's model up as run.json's role ``sections`` name it (``name`` / ``model``, the spec's model,
        the spec); ``specs``: each role's spec, already parsed."""
        table = prices or LIST_PRICES
        roles: dict[str, Price | None] = {}
        for role in ROLES:
            found = table.find(price_names(sections.get(role), role, (specs or {}).get(role)))
            roles[role] = found[1] if found else None
        return cls(roles)

    def cost(self, tally: Tally) -> float | None:
        """USD for ``tally``'s tokens; None while a role that spent tokens has no price."""
        total = 0.0
        for role in ROLES:
            if not tally.role_tokens(role):
                continue
            price = self.roles.get(role)
            if price is None:
                return None
            total += price.cost(tally.usage[role])
        return total


def _human(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(int(n))


def _money(usd: float | None) -> str:
    if usd is None:
        return "cost n/a"
    if 0 < usd < 0.0001:
        return "cost <$0.0001"
    return f"cost ${usd:.4f}" if 0 < usd < 0.01 else f"cost ${usd:,.2f}"


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The live display on ``stream`` (or on ``console``, a rich Console: a terminal's width, a test's fake).

    ``kept`` are the episodes already final before this session (a resume); ``pricing`` prices the session's tokens;
    ``clock`` (monotonic seconds) is injectable so that a test need not sleep.
    """

    def __init__(
        self,
        *,
        total: int,
        kept: Tally,
        domain: Domain,
        stream: TextIO | None,
        mode: ProgressMode = "auto",
        interval_s: float | None = None,
        pricing: Pricing | None = None,
        clock: Callable[[], float] = time.monotonic,
        console: Console | None = None,
        env_id: str | None = None,
    ) -> None:
        if console is not None and stream is None:
            stream = cast(TextIO, console.file)
        if mode == "auto":
            terminal = console.is_terminal if console is not None else stream is not None and stream.isatty()
            mode = "tty" if terminal else "lines"
        self.mode: ProgressMode = "off" if stream is None else mode
        self.stream = stream
        self.total = total
        self.kept = kept
        self.domain = domain
        self.env_id = env_id  # whose metrics the line reads by
        self.pricing = pricing if pricing is not None else Pricing()
        self.clock = clock
        self.session = Tally()
        self.overall = Tally(**vars(kept))
        self.running = 0
        self.interval_s = interval_s if interval_s is not None else (0.5 if self.mode == "tty" else 1.0)
        self._started = clock()
        self._last_line = self._started  # lines mode: when the last line was written
        self._last_step = self._step(self.done)  # lines mode: the tenth of the episodes the last line reported
        self._bar: RichProgress | None = None
        if self.mode == "tty":
            console = console or Console(file=stream, force_terminal=True, highlight=False)
            status = Column(ratio=1, no_wrap=True, overflow="ellipsis")  # what gives way on a narrow terminal
            self._bar = RichProgress(
                TextColumn("[bold]eval[/]"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}", table_column=status),
                TextColumn("{task.fields[eta]}", table_column=Column(no_wrap=True)),
                console=console,
                auto_refresh=False,
                transient=False,
                expand=True,
                get_time=clock,
            )
            self._task = self._bar.add_task("eval", total=total, completed=self.done, status="", eta="")
            self._bar.start()

    # -- what happens --------------------------------------------------------------------------------------------
    def episode_started(self) -> None:
        self.running += 1

    def episode_finished(self, record: EpisodeRecord) -> None:
        self.running -= 1
        self.session.add(record)
        if record.ok:
            self.overall.add(record)
        if self.mode == "lines" and self.done < self.total and self._step(self.done) > self._last_step:
            self._write_line()

    @property
    def done(self) -> int:
        return self.kept.ok + self.session.finished

    @property
    def cost(self) -> float | None:
        """What this session's tokens cost (USD), None when a role's model has no price."""
        return self.pricing.cost(self.session)

    # -- what it says --------------------------------------------------------------------------------------------
    def status(self) -> str:
        """Everything but the count and the ETA (the bar shows those itself)."""
        parts = []
        if self.running:
            parts.append(f"{self.running} running")
        parts.append(self.overall.headline(self.domain, self.env_id))
        parts.append(f"infra errors {self.session.infra}")
        parts.append(f"tokens {_human(self.session.tokens)}")
        parts.append(_money(self.cost))
        return " | ".join(parts)

    def rate(self) -> float | None:
        """Episodes a second this session; None before the first one finished."""
        elapsed = self.clock() - self._started
        return self.session.finished / elapsed if self.session.finished and elapsed > 0 else None

    def eta(self) -> str:
        rate = self.rate()
        left = max(0, self.total - self.done)
        if not left:
            return "ETA 0:00"
        return "ETA -:--" if rate is None else f"ETA {_duration(left / rate)}"

    def line(self) -> str:
        parts = [f"{self.done}/{self.total} done", self.status()]
        rate = self.rate()
        if rate is not None:
            parts.append(f"{60 * rate:.1f} ep/min")
        parts.append(self.eta())
        return " | ".join(parts)

    # -- drawing -------------------------------------------------------------------------------------------------
    def _step(self, done: int) -> int:
        return math.floor(STEPS * done / self.total) if self.total else STEPS

    def _write_line(self) -> None:
        if self.stream is None:
            return
        self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._last_line = self.clock()
        self._last_step = self._step(self.done)

    def draw(self) -> None:
        """Redraw the bar; in lines mode, write a line now."""
        if self.mode == "off":
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, status=self.status(), eta=self.eta())
            self._bar.refresh()
            return
        self._write_line()

    def tick(self) -> None:
        """What the ticker does every ``interval_s``: redraw the bar, or write a line when a minute went by."""
        if self.mode == "tty":
            self.draw()
        elif self.mode == "lines" and self.clock() - self._last_line >= LINE_EVERY_S:
            self._write_line()

    async def run(self) -> None:
        """Tick every ``interval_s`` until cancelled."""
        if self.mode == "off":
            return
        while True:
            await asyncio.sleep(self.interval_s)
            self.tick()

    def close(self) -> None:
        """The last word: the bar's final state, or a final line."""
        if self.mode == "off":
            return
        self.draw()
        if self._bar is not None:
            self._bar.stop()
