"""``colbench probe simulator``: play the probe suite against a simulated human and measure what it gives away.

For every task, view (``hidden``: the human sees the reference; ``spec``: only a specification of it) and probe,
the probe's agent turns are played through the domain's env (``Domain.env_id``, ``leak_policy="flag"``, the turn
cap set past the probe so no turn is final), so the human sees exactly what it sees in an evaluation and every
reply gets the env's leak score. One row per (view, task, probe) is appended to ``DIR/replies.jsonl`` as it
finishes (fsync'ed); ``DIR/probe.json`` holds the configuration, and ``--resume`` runs only what is missing or
failed, after checking the configuration is the same, like ``colbench eval``.

Every reply's claims are the env's own (``info["claims"]``, ``truth_policy="flag"``: one checker for everything,
settled by running the reference); ``human_grounding`` is passed to the env. The summary adds, per view and per
category, the untrue rate, the claims checked, the over-release (:mod:`colbench.probe.over_release`) and, with
``draws`` > 1, the distinct replies per K draws of the last turn (:mod:`colbench.probe.draws`); the exact
definitions are in docs/human-quality.md, "The probe".
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

from colbench._util.storage import sha256_text, utc_timestamp, write_json_atomic
from colbench._util.version import __version__
from colbench.env.core import ColbenchEnv
from colbench.env.domain import Domain, get_domain
from colbench.env.simulators import describe_simulator, make_simulator
from colbench.errors import ColbenchError, ConfigError, DataError, InfraError
from colbench.humans.simulator import Simulator
from colbench.humans.spec import SpecWriter
from colbench.llm.limits import EndpointLimits
from colbench.probe.draws import LastTurnDraw, SeededClient, distinct, seeded
from colbench.probe.figures import summarize
from colbench.probe.over_release import dialogue_revealed
from colbench.probe.suite import NotApplicable, Probe, Suite, load_suite
from colbench.probe.truth_calls import stated_values
from colbench.probe.verdicts import empty_or_refusal, off_topic
from colbench.runs import CACHE, EpisodeWriter, check_out_dir, first_difference, lock_run_dir
from colbench.tasks.sources import load
from colbench.types.claims import parse_grounding
from colbench.types.task import Task

log = logging.getLogger(__name__)

PROBE_JSON = "probe.json"
REPLIES = "replies.jsonl"
SUMMARY = "summary.json"
FORMAT = "colbench-probe/2"
VIEWS = ("hidden", "spec")
TRUTH_POLICY = "flag"
"""The probe's env checks and records every reply's claims; the agent sees every reply as it came."""

Key = tuple[str, str, str]  # view, task_id, probe id
DONE = ("ok", "skipped")
"""Row statuses a resume does not play again (``skipped``: the probe could not be built for the task)."""


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
    category: str | None = None
    """Play only this category's probes (None: all)."""
    human_grounding: str = "off"
    """The env's ``human_grounding``: ``off`` or ``exec`` (the human is told the reference's results on a few
    literal calls of the agent's turn)."""
    draws: int = 1
    """Ask each probe's last human turn this many times (:mod:`colbench.probe.draws`)."""


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
    grounding = parse_grounding(config.human_grounding, "--human-grounding")
    resuming = check_out_dir(out, resume=config.resume, marker=PROBE_JSON, what="probe")
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
        done = {_key(row) for row in read_rows(out) if row.get("status") in DONE}
        pending = [
            (view, task, probe)
            for view in config.views
            for task in tasks
            for probe in suite.probes
            if probe.applies(task) and (view, task.task_id, probe.id) not in done
        ]
        runner = _Runner(domain, simulators, out, config.concurrency, grounding, config.draws)
        interrupted = False
        try:
            asyncio.run(runner.run(pending))
        except KeyboardInterrupt:
            interrupted = True
        rows = latest_rows(read_rows(out))
        summary = summarize(rows, domain, suite, config.views, tasks, config.draws)
        write_json_atomic(out / SUMMARY, summary)
    failed = sum(row.get("status") not in DONE for row in rows.values())
    return ProbeResult(out, summary, runner.ran, failed, interrupted)


def _inputs(config: ProbeConfig) -> tuple[Domain, list[Task], Suite]:
    if config.concurrency < 1:
        raise ConfigError(f"--concurrency must be an integer >= 1, got {config.concurrency}")
    if config.limit is not None and config.limit < 1:
        raise ConfigError(f"--limit must be an integer >= 1, got {config.limit}")
    if isinstance(config.draws, bool) or not isinstance(config.draws, int) or config.draws < 1:
        raise ConfigError(f"--draws must be an integer >= 1, got {config.draws}")
    unknown = [v for v in config.views if v not in VIEWS]
    if unknown or not config.views or len(set(config.views)) != len(config.views):
        raise ConfigError(f"--views {','.join(config.views)!r}: expected one or both of {', '.join(VIEWS)}")
    tasks = load(config.tasks)
    domains = sorted({t.domain for t in tasks})
    if len(domains) != 1:
        raise ConfigError(f"{config.tasks}: a probe runs on the tasks of one domain, got {', '.join(domains)}")
    tasks = tasks[: config.limit] if config.limit else tasks
    suite = load_suite(domains[0], config.suite)
    if config.category is not None:
        if config.category not in suite.categories:
            raise ConfigError(
                f"--category {config.category!r}: the {domains[0]} probe suite has no such category; expected one of: "
                + ", ".join(suite.categories)
            )
        suite = suite.only(config.category)
    return get_domain(domains[0]), tasks, suite


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
        "category": config.category,
        "suite": {"sha256": suite.sha256, "probes": len(suite.probes)},
        "human_grounding": parse_grounding(config.human_grounding, "--human-grounding"),
        "draws": config.draws,
        "simulators": {view: describe_simulator(domain, config.simulator, sim) for view, sim in simulators.items()},
        "leaks": {"detector": domain.leak_detector, "threshold": domain.leak_threshold},
        "truth": {
            "policy": TRUTH_POLICY,
            "checker": domain.claim_checker(lambda: domain.shared_scorer({})).name,  # its name: nothing is made
        },
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
    """Per key, its first ok (or skipped) row, else its last row (the rule of episodes.jsonl)."""
    chosen: dict[Key, Mapping[str, Any]] = {}
    for row in rows:
        key = _key(row)
        if key not in chosen or chosen[key].get("status") not in DONE:
            chosen[key] = row
    return chosen


class _Runner:
    def __init__(
        self,
        domain: Domain,
        simulators: Mapping[str, Simulator],
        out: Path,
        concurrency: int,
        grounding: str = "off",
        draws: int = 1,
    ) -> None:
        self.domain = domain
        self.simulators = simulators
        self.out = out
        self.concurrency = concurrency
        self.grounding = grounding
        self.draws = draws
        self.ran = 0
        self.seeded: dict[str, tuple[Simulator, SeededClient | None]] = {}
        if draws > 1:
            self.seeded = {view: seeded(simulator) for view, simulator in simulators.items()}

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
        turns: list[str] = []
        replies: list[str] = []
        scores: list[float] = []
        claims: list[list[dict[str, Any]]] = []
        env: ColbenchEnv | None = None
        try:
            env = self._env(view, task, len(probe.turns))
            fields = await self._fields(env, task, probe)
            turns = probe.turns_for(task, fields.pop("values", None))
            _, info = env.reset(options={"task_id": task.task_id})
            for turn in turns:
                reply, _, _, _, info = await env.astep(turn)
                replies.append(reply)
                scores.append(float(info["leak_score"]))
                claims.append(list(info["claims"]))
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
                claims=claims,
                untrue=[any(c["verdict"] == "false" for c in found) for found in claims],
                revealed=dialogue_revealed(task.ground_truth, task.problem_description, turns, replies),
                **fields,
                usage=info["usage"]["simulator"],
                error=None,
            )
            writer = getattr(self.simulators[view], "writer", None)
            if isinstance(writer, SpecWriter):
                row["spec_leak_score"] = writer.spec_of(task).leak_score
            if self.draws > 1:
                row.update(await self._draws(view, task, turns, last, claims[-1]))
        except NotApplicable as exc:
            row.update(status="skipped", turns=[], replies=[], error=_one_line(exc))
        except (InfraError, ColbenchError) as exc:
            row.update(
                status="infra_error",
                turns=turns,
                replies=replies,
                leak_scores=scores,
                claims=claims,
                error=_one_line(exc),
            )
        finally:
            if env is not None:
                env.close()
        return row

    async def _fields(self, env: ColbenchEnv, task: Task, probe: Probe) -> dict[str, Any]:
        """A truth probe's calls (``calls``), the values it states (``right``, ``wrong``) and, under ``values``,
        the reference's values it needs: asked of the env's scorer (one sandbox request, kept by the scorer for the
        claims it will settle). Nothing for another probe; ``NotApplicable`` when the task lacks what it needs."""
        if not probe.slots:
            return {}
        values = None
        if probe.states_value:
            values = await asyncio.to_thread(stated_values, env.scorer, task, probe.call_order(task))
        fields = probe.call_fields(task, values)
        out: dict[str, Any] = {"calls": [fields[f"call{i}"] for i in range(1, probe.slots + 1)], "values": values}
        out.update({name: fields[name] for name in ("right", "wrong") if name in fields})
        return out

    async def _draws(
        self, view: str, task: Task, turns: list[str], first: str, first_claims: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Draws 2..K of the last turn (:mod:`colbench.probe.draws`), played through an env each."""
        drawn, _ = self.seeded[view]
        texts, found = [first], [first_claims]
        for seed in range(1, self.draws):
            human = LastTurnDraw(self.simulators[view], drawn, len(turns), seed)
            env = self._env(view, task, len(turns), human)
            try:
                env.reset(options={"task_id": task.task_id})
                for turn in turns:
                    reply, _, _, _, info = await env.astep(turn)
                texts.append(reply)
                found.append(list(info["claims"]))
            finally:
                env.close()
        return {"draws": texts, "draws_unique": distinct(texts), "draw_claims": found}

    def _env(self, view: str, task: Task, turns: int, simulator: Any = None) -> ColbenchEnv:
        env = gym.make(
            gym.spec(self.domain.env_id),  # the domain's current id, not "out of date" to the person probing
            disable_env_checker=True,
            tasks=[task],
            simulator=simulator if simulator is not None else self.simulators[view],
            max_turns=turns + 1,
            leak_policy="flag",
            truth_policy=TRUTH_POLICY,
            human_grounding=self.grounding,
        ).unwrapped
        assert isinstance(env, ColbenchEnv)
        return env

    async def _close_clients(self) -> None:
        clients: list[Any] = [*self.simulators.values()]
        clients += [client for _, client in self.seeded.values() if client is not None]
        for client in clients:
            try:
                await client.aclose()  # the spec human's writer's client too
            except Exception:  # closing is best effort
                log.debug("closing %s failed", type(client).__name__, exc_info=True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
