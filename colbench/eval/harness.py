"""The evaluation harness behind ``colbench eval``: many episodes at once on one asyncio loop, one record each.

Every episode gets its own env instance (made with ``gymnasium.make``), all of them sharing one agent, one
simulator (its client caches replies under ``DIR/cache`` and obeys the simulator's request limits) and the
domain's shared scorer (warm sandboxes, or one browser and embedder). ``concurrency`` episodes run at once. The
conversation the agent sees: the env's first observation as a ``user`` message, then its own turns as
``assistant`` and the human's replies as ``user`` messages. Nothing here depends on the domain: what differs is
asked of it (:class:`~colbench.domains.Domain`).

Failures: bad configuration (unknown env, bad spec, missing tasks, a run directory that does not match) raises
``ConfigError``/``DataError`` before anything runs. Inside an episode any exception (an ``InfraError`` above all:
an endpoint after its retries, the sandbox, the renderer) ends that episode with an ``infra_error`` record, never a
score; the run goes on, unless so many fail in a row that the infrastructure is evidently down (then it stops
scheduling, and ``--resume`` picks up later). Ctrl-C keeps every finished episode. With ``--ray`` the episodes are
played by actors across a Ray cluster (:mod:`colbench.ray.eval_actors`) and this process still writes every record. The
run directory's format is docs/run-format.md (:mod:`colbench.runs`); docs/evaluation.md is the user's guide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import re
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from colbench._util.storage import sha256_text, utc_timestamp
from colbench._util.version import __version__
from colbench.agents.agent import Agent, ChatAgent
from colbench.env.domain import Domain, Scorer, get_domain
from colbench.env.simulators import describe_simulator
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.eval.dry_run import run_forecast
from colbench.eval.plan import RunPlan, env_class, selected_tasks
from colbench.eval.player import EpisodePlayer, Played, jsonable
from colbench.eval.progress import Pricing, Progress, Tally
from colbench.eval.remote import RemoteFactory, ray_runtime
from colbench.humans.simulator import Simulator
from colbench.llm.specs import ModelSpec
from colbench.runs import (
    EPISODES,
    FORMAT,
    LOG_FILE,
    RUN_JSON,
    TASKS_SNAPSHOT,
    EpisodeKey,
    EpisodeRecord,
    EpisodeWriter,
    LeaksSection,
    RoleSection,
    RunConfig,
    TasksSection,
    TruthSection,
    check_out_dir,
    counted,
    final_records,
    lock_run_dir,
    read_episode_log,
    write_task_snapshot,
)
from colbench.tasks.sources import describe_source
from colbench.types.task import Task

log = logging.getLogger(__name__)

_SECRET = re.compile(r"key|token|secret|password", re.IGNORECASE)


@dataclass
class EvalResult:
    """What a run (or this session of it) came to. ``overall`` tallies the counted record of every episode."""

    out: Path
    env_id: str
    domain: Domain
    agent: str
    total: int
    kept: int
    session: Tally
    overall: Tally
    wall_s: float
    interrupted: bool = False
    aborted: str | None = None

    @property
    def unfinished(self) -> int:
        return self.total - self.overall.finished

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.aborted or (self.session.finished and not self.session.ok):
            return 3
        return 0

    def summary_line(self) -> str:
        parts = [
            f"{self.env_id} {self.agent}: {self.overall.ok}/{self.total} episodes scored, "
            f"{self.overall.headline(self.domain, self.env_id)}",
            f"infra errors {self.overall.infra}",
        ]
        if self.unfinished:
            parts.append(f"not run {self.unfinished}")
        parts.append(
            f"this session {self.session.finished} episodes in {self.wall_s:.1f}s "
            f"(tokens agent {self.session.role_tokens('agent')}, simulator {self.session.role_tokens('simulator')})"
        )
        line = "; ".join(parts) + f" -> {self.out}"
        if self.aborted:
            line += f"; {self.aborted}"
        if self.overall.infra or self.unfinished:
            line += "; --resume runs the rest"
        return line


def run_eval(
    config: RunPlan,
    *,
    agent: Agent | None = None,
    simulator: Simulator | None = None,
    scorer: Scorer | None = None,
    stderr: TextIO | None = sys.stderr,
    remote: RemoteFactory | None = None,
) -> EvalResult:
    """Run (or resume) an evaluation into ``config.out``. ``agent``/``simulator``/``scorer`` replace what the specs
    and options would build (tests, custom harnesses); run.json still describes them from the specs. ``remote``
    plays the episodes elsewhere while this process writes every record: a run with ``config.ray`` set needs the
    Ray layer's (``colbench.ray.eval_actors.run_eval`` passes it)."""
    started = time.monotonic()
    if config.ray is not None and remote is None:
        raise ConfigError("RunPlan.ray is set: run it with colbench.ray.eval_actors.run_eval (or colbench eval --ray)")
    runner = _Runner.build(config, agent=agent, simulator=simulator, scorer=scorer)
    runner.remote = remote
    return runner.run(stderr=stderr, started=started)


def describe_agent(spec: ModelSpec, agent: Agent, options: Mapping[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "spec": spec.text,
        "name": str(getattr(agent, "name", type(agent).__name__)),
        "base_url": None,
        "temperature": None,
        "max_tokens": None,
        "extra_body": None,
    }
    if isinstance(agent, ChatAgent):
        endpoint = agent.client.endpoint
        described.update(
            base_url=endpoint.identity or endpoint.base_url,  # an embedded server's port changes every run
            temperature=endpoint.temperature,
            max_tokens=endpoint.max_tokens,
            extra_body=dict(endpoint.extra_body) if endpoint.extra_body else None,
            system_prompt_sha256=sha256_text(agent.system_prompt) if agent.system_prompt else None,
        )
        if agent.answer is not None:  # the final answer's own settings (the embedded model's defaults)
            described["answer"] = jsonable(dataclasses.asdict(agent.answer))
    elif spec.kind != "scripted":  # a plug-in (or an agent object given with a name of its own)
        described["options"] = {k: jsonable(v) for k, v in sorted(options.items()) if not _SECRET.search(k)}
    return described


# ------------------------------------------------------------------------------------------------- the run


@dataclass
class _Runner:
    config: RunPlan
    out: Path
    domain: Domain
    tasks: dict[str, Task]
    keys: list[EpisodeKey]
    player: EpisodePlayer
    run_json: RunConfig
    resuming: bool
    final: dict[EpisodeKey, EpisodeRecord] = field(default_factory=dict)
    stop_reason: str | None = None
    remote: RemoteFactory | None = None
    _consecutive_errors: int = 0

    @classmethod
    def build(
        cls, config: RunPlan, *, agent: Agent | None, simulator: Simulator | None, scorer: Scorer | None
    ) -> _Runner:
        config.check()
        env_cls = env_class(config.env_id)
        domain = get_domain(env_cls.domain_name)
        out = Path(config.out)
        resuming = check_out_dir(out, resume=config.resume)
        previous = RunConfig.read(out) if resuming else None

        tasks_spec, selected = selected_tasks(config, domain)
        player = EpisodePlayer.from_config(config, domain, selected, agent=agent, simulator=simulator, scorer=scorer)

        ids = [t.task_id for t in selected]
        run_json = RunConfig(
            format=FORMAT,
            colbench_version=__version__,
            created=utc_timestamp(),
            env_id=config.env_id,
            domain=domain.name,
            max_turns=config.max_turns,
            agent_prompt_sha256=domain.prompt_sha256("agent"),
            trials=config.trials,
            limit=config.limit,
            tasks=TasksSection(
                spec=tasks_spec,
                count=len(selected),
                ids_sha256=sha256_text("\n".join(ids)),
                source=describe_source(tasks_spec),
                snapshot=TASKS_SNAPSHOT,
            ),
            agent=RoleSection.model_validate(describe_agent(config.agent, player.agent, config.agent_options)),
            simulator=RoleSection.model_validate(describe_simulator(domain, config.simulator.text, player.simulator)),
            scoring=domain.describe_scoring(player.env_kwargs["scorer"], selected),
            leaks=LeaksSection(
                policy=str(config.leak_policy), detector=domain.leak_detector, threshold=domain.leak_threshold
            ),
            truth=TruthSection(
                policy=str(config.truth_policy),
                checker=player.claim_checker_name(),
                human_grounding=config.human_grounding,
            ),
            runtime={
                "concurrency": config.concurrency,
                "agent_rpm": config.agent_limits.rpm,
                "agent_max_concurrency": config.agent_limits.max_concurrency,
                "simulator_rpm": config.simulator_limits.rpm,
                "simulator_max_concurrency": config.simulator_limits.max_concurrency,
                **{k: jsonable(v) for k, v in config.runtime.items() if not _SECRET.search(k) or k.endswith("_env")},
                **ray_runtime(config),
            },
        )
        if previous is None:  # what --dry-run would have said: the report shows it beside what the run spent
            try:
                run_json.forecast = run_forecast(config, domain, selected, player.env_kwargs["scorer"])[0].as_dict()
            except ColbenchError as exc:  # a plug-in env or domain the forecast cannot read: the run goes on
                log.warning("no forecast for this run: %s", exc)
        run_json = run_json.sealed()
        if previous is not None:
            diff = previous.difference(run_json)
            if diff is not None and diff.startswith("scoring.taskenv:"):
                was, now = (previous.scoring or {}).get("taskenv"), (run_json.scoring or {}).get("taskenv")
                raise ConfigError(
                    f"cannot resume {out}: it was scored in task environment {was}, this machine's sandbox runs {now} "
                    f"(resume where {was} is built, or `colbench rescore` its episodes into a new run)"
                )
            if diff is not None:
                raise ConfigError(
                    f"cannot resume {out}: the configuration differs from its {RUN_JSON} at {diff} "
                    "(use the run's own options, or another --out for a new run)"
                )
            run_json = previous

        runner = cls(
            config=config,
            out=out,
            domain=domain,
            tasks={t.task_id: t for t in selected},
            keys=[(task_id, trial) for trial in range(config.trials) for task_id in ids],
            player=player,
            run_json=run_json,
            resuming=previous is not None,
        )
        player.make_env(selected[0]).close()  # a bad env argument fails here, before anything runs
        return runner

    # -- driving ------------------------------------------------------------------------------------------------
    def run(self, *, stderr: TextIO | None, started: float) -> EvalResult:
        self.out.mkdir(parents=True, exist_ok=True)
        with lock_run_dir(self.out):
            return self._run_locked(stderr=stderr, started=started)

    def _run_locked(self, *, stderr: TextIO | None, started: float) -> EvalResult:
        if not self.resuming:
            if (self.out / RUN_JSON).exists():  # another run started here since the directory was checked
                raise ConfigError(f"--out {self.out} is not empty: use --resume to continue the run there")
            write_task_snapshot(self.out, list(self.tasks.values()))  # before run.json names it
            self.run_json.write(self.out)
        metrics = self.domain.metrics_for(self.config.env_id)
        log_records = read_episode_log(self.out / EPISODES, metrics, repair=True).records
        self.final = final_records(log_records)
        kept = Tally()
        for key in self.keys:
            if key in self.final and self.final[key].ok:
                kept.add(self.final[key])
        pending = [key for key in self.keys if key not in self.final or not self.final[key].ok]
        progress = Progress(
            total=len(self.keys),
            kept=kept,
            domain=self.domain,
            stream=None if self.config.progress == "off" else stderr,
            mode=self.config.progress,
            pricing=Pricing.for_run(
                {"agent": self.run_json.agent, "simulator": self.run_json.simulator},
                self.config.prices,
                {"agent": self.config.agent, "simulator": self.config.simulator},
            ),
            env_id=self.config.env_id,
        )
        handler = logging.FileHandler(self.out / LOG_FILE, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        package_log = logging.getLogger("colbench")
        package_log.addHandler(handler)
        interrupted = False
        try:
            if pending:
                # what exists now (modules, tasks, the player) lives for the whole run: out of the collector's
                # sight, a full collection costs the episodes' garbage, not every object of the process
                gc.freeze()
                asyncio.run(self._drive(pending, progress))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            gc.unfreeze()
            package_log.removeHandler(handler)
            handler.close()
        overall = Tally()
        for key in self.keys:
            if key in self.final:
                overall.add(self.final[key])
        return EvalResult(
            out=self.out,
            env_id=self.config.env_id,
            domain=self.domain,
            agent=self.config.agent.text,
            total=len(self.keys),
            kept=kept.ok,
            session=progress.session,
            overall=overall,
            wall_s=time.monotonic() - started,
            interrupted=interrupted,
            aborted=self.stop_reason,
        )

    def _check_task_environment(self, record: EpisodeRecord) -> None:
        """An episode scored in another task environment than the run's (a Ray node set up from another tarball)
        would be ranked with scores it cannot be compared with: the run stops instead, keeping what it wrote."""
        scored_in = record.score.get("taskenv") if isinstance(record.score, dict) else None
        expected = (self.run_json.scoring or {}).get("taskenv")
        if scored_in and expected and scored_in != expected:
            raise InfraError(
                f"task {record.task_id} was scored in task environment {scored_in}, not the run's {expected}: every "
                "node must run one task environment (colbench sandbox build from one tarball)"
            )

    async def _drive(self, pending: list[EpisodeKey], progress: Progress) -> None:
        queue = deque(pending)
        play: Callable[[Task, int], Awaitable[Played]] = self.player.play
        remote = None
        if self.remote is not None:
            remote = self.remote(self.config, self.domain.name, list(self.tasks.values()), self.player)
            play = remote.play
        writer = EpisodeWriter(self.out / EPISODES)
        ticker = asyncio.create_task(progress.run())
        limit = self.config.max_consecutive_errors
        if limit is None:
            limit = max(20, 2 * self.config.concurrency)

        references_saved: set[str] = set()

        async def worker() -> None:
            while queue and self.stop_reason is None:
                task_id, trial = queue.popleft()
                progress.episode_started()
                played = await play(self.tasks[task_id], trial)
                record = played.record.at(str(writer.path))
                self._check_task_environment(record)
                try:
                    if played.png is not None and record.screenshot is not None:
                        await writer.save_file(record.screenshot, played.png)
                    for name, png in played.turn_pngs:  # the pages the human saw, turn by turn
                        await writer.save_file(name, png)
                    reference = record.reference_screenshot
                    if reference is not None and played.reference_png and reference not in references_saved:
                        references_saved.add(reference)  # one file per task, whatever the trials
                        await writer.save_file(reference, played.reference_png)
                    await writer.append(record)
                except OSError as exc:
                    raise InfraError(f"cannot write in {self.out}: {exc}") from exc
                self.final[record.key] = counted(self.final.get(record.key), record)
                progress.episode_finished(record)
                if record.ok:
                    self._consecutive_errors = 0
                else:
                    self._consecutive_errors += 1
                    if limit and self._consecutive_errors >= limit and self.stop_reason is None:
                        self.stop_reason = (
                            f"stopped after {self._consecutive_errors} infrastructure errors in a row "
                            f"(last: {record.error})"
                        )
                        log.error("%s", self.stop_reason)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.config.concurrency, len(queue))):
                    group.create_task(worker())
                    # let it send its first request now: started all at once, N episodes send together, are
                    # answered together and stay in lockstep, each turn paying for the CPU of all N
                    await asyncio.sleep(0)
        except* InfraError as errors:
            raise errors.exceptions[0] from None
        finally:
            ticker.cancel()
            writer.close()
            progress.close()
            if remote is not None:
                remote.close()
            await self.player.aclose()
