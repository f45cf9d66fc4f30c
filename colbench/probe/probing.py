"""``colbench probe simulator``: play the probe suite against a simulated human and measure what it gives away.

For every task, view (``hidden``: the human sees the reference; ``spec``: only a specification of it) and probe,
the probe's agent turns are played through the domain's env (``Domain.env_id``, ``leak_policy="flag"``, the turn
cap set past the probe so no turn is final), so the human sees exactly what it sees in an evaluation and every
reply gets the env's leak score. One row per (view, task, probe) is appended to ``DIR/replies.jsonl`` as it
finishes (fsync'ed); ``DIR/probe.json`` holds the configuration, and ``--resume`` runs only what is missing or
failed, after checking the configuration is the same, like ``colbench eval``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from colbench import __version__
from colbench._util.storage import sha256_text, utc_timestamp, write_json_atomic
from colbench.env.core import ColbenchEnv
from colbench.env.domain import Domain, get_domain
from colbench.env.simulators import describe_simulator, make_simulator
from colbench.errors import ColbenchError, ConfigError, DataError, InfraError
from colbench.humans.simulator import Simulator
from colbench.humans.spec import SpecWriter
from colbench.llm.limits import EndpointLimits
from colbench.probe.suite import Probe, Suite, load_suite
from colbench.probe.verdicts import empty_or_refusal, off_topic
from colbench.runs import CACHE, LOCK, EpisodeWriter, first_difference, lock_run_dir
from colbench.tasks.sources import load
from colbench.types.task import Task

log = logging.getLogger(__name__)

PROBE_JSON = "probe.json"
REPLIES = "replies.jsonl"
SUMMARY = "summary.json"
FORMAT = "colbench-probe/1"
VIEWS = ("hidden", "spec")

Key = tuple[str, str, str]  # view, task_id, probe id


@dataclass
class ProbeConfig:
    """Everything ``colbench probe simulator`` takes; ``simulator_options`` are endpoint fields and the domain's
    simulator options (``view`` is set per view; ``specs`` / ``spec_model`` apply to the spec view)."""

    simulator: str
    out: str | Path
    tasks: str
    limit: int | None = None
    views: Sequence[str] = VIEWS
    suite: str | None = None
    concurrency: int = 4
    resume: bool = False
    simulator_options: dict[str, Any] = field(default_factory=dict)
    spec_options: dict[str, Any] = field(default_factory=dict)
    limits: EndpointLimits = field(default_factory=EndpointLimits)


@dataclass
class ProbeResult:
    out: Path
    summary: dict[str, Any]
    ran: int
    failed: int
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 3 if self.failed else 0


def run_probe(config: ProbeConfig) -> ProbeResult:
    """Run (or resume) a probe; rows are on disk as they finish, the summary is written at the end."""
    out = Path(config.out)
    domain, tasks, suite = _inputs(config)
    resuming = _check_out(out, config.resume)
    out.mkdir(parents=True, exist_ok=True)
    with lock_run_dir(out):
        simulators = {view: _simulator(config, domain, view, out) for view in config.views}
        described = _describe(config, domain, tasks, suite, simulators)
        if resuming:
            previous = json.loads((out / PROBE_JSON).read_text(encoding="utf-8"))
            diff = first_difference(_compared(previous), _compared(described))
            if diff is not None:
                raise ConfigError(f"cannot resume {out}: the configuration differs from its {PROBE_JSON} at {diff}")
        else:
            write_json_atomic(out / PROBE_JSON, described)
        done = {_key(row) for row in read_rows(out) if row.get("status") == "ok"}
        pending = [
            (view, task, probe)
            for view in config.views
            for task in tasks
            for probe in suite.probes
            if (view, task.task_id, probe.id) not in done
        ]
        runner = _Runner(domain, simulators, out, config.concurrency)
        interrupted = False
        try:
            asyncio.run(runner.run(pending))
        except KeyboardInterrupt:
            interrupted = True
        rows = latest_rows(read_rows(out))
        summary = summarize(rows, domain, suite, config.views, simulators)
        write_json_atomic(out / SUMMARY, summary)
    failed = sum(row.get("status") != "ok" for row in rows.values())
    return ProbeResult(out, summary, runner.ran, failed, interrupted)


def _inputs(config: ProbeConfig) -> tuple[Domain, list[Task], Suite]:
    if config.concurrency < 1:
        raise ConfigError(f"--concurrency must be an integer >= 1, got {config.concurrency}")
    if config.limit is not None and config.limit < 1:
        raise ConfigError(f"--limit must be an integer >= 1, got {config.limit}")
    unknown = [v for v in config.views if v not in VIEWS]
    if unknown or not config.views or len(set(config.views)) != len(config.views):
        raise ConfigError(f"--views {','.join(config.views)!r}: expected one or both of {', '.join(VIEWS)}")
    tasks = load(config.tasks)
    domains = sorted({t.domain for t in tasks})
    if len(domains) != 1:
        raise ConfigError(f"{config.tasks}: a probe runs on the tasks of one domain, got {', '.join(domains)}")
    tasks = tasks[: config.limit] if config.limit else tasks
    return get_domain(domains[0]), tasks, load_suite(domains[0], config.suite)


def _check_out(out: Path, resume: bool) -> bool:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    entries = {p.name for p in out.iterdir()} if out.is_dir() else set()
    if not resume:
        if entries - {CACHE, LOCK}:
            raise ConfigError(f"--out {out} is not empty: use --resume to continue the probe there, or another --out")
        return False
    if PROBE_JSON not in entries and entries - {CACHE, LOCK}:
        raise ConfigError(f"--out {out} is not empty and holds no colbench probe: use another --out")
    return PROBE_JSON in entries


def _simulator(config: ProbeConfig, domain: Domain, view: str, out: Path) -> Simulator:
    options: dict[str, Any] = {**config.simulator_options, "view": view}
    if view == "spec":
        options.update(config.spec_options)
    return make_simulator(domain, config.simulator, cache_dir=out / CACHE, limits=config.limits, **options)


def _describe(
    config: ProbeConfig, domain: Domain, tasks: Sequence[Task], suite: Suite, simulators: Mapping[str, Simulator]
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "colbench_version": __version__,
        "created": utc_timestamp(),
        "domain": domain.name,
        "env_id": domain.env_id,
        "views": list(config.views),
        "tasks": {
            "spec": config.tasks,
            "count": len(tasks),
            "ids_sha256": sha256_text("\n".join(t.task_id for t in tasks)),
        },
        "suite": {"sha256": suite.sha256, "probes": len(suite.probes)},
        "simulators": {view: describe_simulator(domain, config.simulator, sim) for view, sim in simulators.items()},
        "leaks": {"detector": domain.leak_detector, "threshold": domain.leak_threshold},
    }


def _compared(described: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in described.items() if k not in ("created", "colbench_version")}


def _key(row: Mapping[str, Any]) -> Key:
    return (str(row.get("view")), str(row.get("task_id")), str(row.get("probe")))


def read_rows(out: Path) -> list[dict[str, Any]]:
    """The rows of ``replies.jsonl`` in order (a torn last line, from a killed probe, is skipped)."""
    path = out / REPLIES
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                log.warning("%s:%d: torn last line ignored", path, number)
                continue
            raise DataError(f"{path}:{number}: invalid JSON") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{number}: expected a JSON object")
        rows.append(row)
    return rows


def latest_rows(rows: Iterable[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """Per key, its first ok row, else its last row (the rule of episodes.jsonl)."""
    chosen: dict[Key, Mapping[str, Any]] = {}
    for row in rows:
        key = _key(row)
        if key not in chosen or chosen[key].get("status") != "ok":
            chosen[key] = row
    return chosen


class _Runner:
    def __init__(self, domain: Domain, simulators: Mapping[str, Simulator], out: Path, concurrency: int) -> None:
        self.domain = domain
        self.simulators = simulators
        self.out = out
        self.concurrency = concurrency
        self.ran = 0

    async def run(self, pending: list[tuple[str, Task, Probe]]) -> None:
        writer = EpisodeWriter(self.out / REPLIES)
        queue = list(reversed(pending))
        started = time.monotonic()

        async def worker() -> None:
            while queue:
                view, task, probe = queue.pop()
                row = await self._probe(view, task, probe)
                await writer.append_row(row)
                self.ran += 1
                if self.ran % 10 == 0 or not queue:
                    log.info("probe: %d/%d rows in %.0fs", self.ran, len(pending), time.monotonic() - started)

        try:
            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, max(len(pending), 1)))))
        finally:
            writer.close()
            await self._close_clients()

    async def _probe(self, view: str, task: Task, probe: Probe) -> dict[str, Any]:
        row: dict[str, Any] = {"view": view, "task_id": task.task_id, "probe": probe.id, "category": probe.category}
        turns = probe.turns_for(task)
        env: ColbenchEnv | None = None
        replies: list[str] = []
        scores: list[float] = []
        try:
            env = self._env(view, task, len(turns))
            _, info = env.reset(options={"task_id": task.task_id})
            for turn in turns:
                reply, _, _, _, info = await env.astep(turn)
                replies.append(reply)
                scores.append(float(info["leak_score"]))
            last = replies[-1]
            row.update(
                status="ok",
                turns=turns,
                replies=replies,
                leak_scores=scores,
                leak=any(score >= self.domain.leak_threshold for score in scores),
                empty_or_refusal=empty_or_refusal(last),
                off_topic=off_topic(last, task),
                chars=round(sum(len(r) for r in replies) / len(replies), 1),
                usage=info["usage"]["simulator"],
                error=None,
            )
            writer = getattr(self.simulators[view], "writer", None)
            if isinstance(writer, SpecWriter):
                row["spec_leak_score"] = writer.spec_of(task).leak_score
        except (InfraError, ColbenchError) as exc:
            row.update(status="infra_error", turns=turns, replies=replies, leak_scores=scores, error=_one_line(exc))
        finally:
            if env is not None:
                env.close()
        return row

    def _env(self, view: str, task: Task, turns: int) -> ColbenchEnv:
        env = gym.make(
            gym.spec(self.domain.env_id),  # the domain's current id, not "out of date" to the person probing
            disable_env_checker=True,
            tasks=[task],
            simulator=self.simulators[view],
            max_turns=turns + 1,
            leak_policy="flag",
        ).unwrapped
        assert isinstance(env, ColbenchEnv)
        return env

    async def _close_clients(self) -> None:
        for simulator in self.simulators.values():
            try:
                await simulator.aclose()  # the spec human's writer's client too
            except Exception:  # closing is best effort
                log.debug("closing %s failed", type(simulator).__name__, exc_info=True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# -- the summary ----------------------------------------------------------------------------------------------------
def _rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"probes": 0, "leak_rate": None, "empty_or_refusal_rate": None, "off_topic_rate": None, "chars": None}
    return {
        "probes": n,
        "leak_rate": sum(bool(r["leak"]) for r in rows) / n,
        "empty_or_refusal_rate": sum(bool(r["empty_or_refusal"]) for r in rows) / n,
        "off_topic_rate": sum(bool(r["off_topic"]) for r in rows) / n,
        "chars": round(sum(float(r["chars"]) for r in rows) / n, 1),
    }


def summarize(
    rows: Mapping[Key, Mapping[str, Any]],
    domain: Domain,
    suite: Suite,
    views: Sequence[str],
    simulators: Mapping[str, Simulator],
) -> dict[str, Any]:
    """Per view: the rates over adversarial probes, over control probes, and the leak rate per category."""
    categories = list(dict.fromkeys(p.category for p in suite.probes if not p.control))
    out: dict[str, Any] = {"domain": domain.name, "threshold": domain.leak_threshold, "views": {}}
    for view in views:
        mine = [r for (v, _, _), r in rows.items() if v == view]
        ok = [r for r in mine if r.get("status") == "ok"]
        attacks = [r for r in ok if r.get("category") != "control"]
        section: dict[str, Any] = {
            "adversarial": _rates(attacks),
            "control": _rates([r for r in ok if r.get("category") == "control"]),
            "by_category": {c: _rates([r for r in attacks if r.get("category") == c])["leak_rate"] for c in categories},
            "infra_errors": len(mine) - len(ok),
        }
        specs = {r["task_id"]: r["spec_leak_score"] for r in ok if r.get("spec_leak_score") is not None}
        if view == "spec":
            section["specs"] = {
                "tasks": len(specs),
                "flagged": sum(score >= domain.leak_threshold for score in specs.values()),
            }
        out["views"][view] = section
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def summary_table(summary: Mapping[str, Any], title: str) -> str:
    """The summary as terminal tables: rates per view, then the leak rate per category."""
    views = list(summary["views"])
    lines = [title, ""]
    header = ["view", "probes", "leak %", "empty/refusal %", "off-topic %", "reply chars", "control leak %", "infra"]
    body = []
    for view in views:
        section = summary["views"][view]
        attack, control = section["adversarial"], section["control"]
        body.append(
            [
                view,
                str(attack["probes"]),
                _pct(attack["leak_rate"]),
                _pct(attack["empty_or_refusal_rate"]),
                _pct(attack["off_topic_rate"]),
                "-" if attack["chars"] is None else f"{attack['chars']:.0f}",
                _pct(control["leak_rate"]),
                str(section["infra_errors"]),
            ]
        )
    lines += _table(header, body)
    categories = list(summary["views"][views[0]]["by_category"]) if views else []
    lines += ["", "Leak % by probe category", ""]
    lines += _table(
        ["category", *views], [[c, *(_pct(summary["views"][v]["by_category"][c]) for v in views)] for c in categories]
    )
    specs = {v: summary["views"][v]["specs"] for v in views if "specs" in summary["views"][v]}
    lines.append("")
    for view, spec in specs.items():
        lines.append(f"{view} view: specs of {spec['tasks']} tasks, {spec['flagged']} flagged as leaking themselves")
    lines.append(
        "rates over adversarial probes (control: honest questions); a reply leaks at leak score >= "
        f"{summary['threshold']}; empty/refusal and off-topic are heuristics (docs/leaks.md)."
    )
    return "\n".join(lines)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(row) for row in body)]
