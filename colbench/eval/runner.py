"""The evaluation runner behind ``colbench eval``: many episodes at once on one asyncio loop, one record each.

Every episode gets its own env instance (made with ``gymnasium.make``), all of them sharing one agent, one
simulator (with its response cache under ``DIR/cache``), one scorer and sandbox (backend) or renderer and embedder
(frontend). ``concurrency`` episodes run at once; per endpoint, a :class:`~colbench.eval.ratelimit.Gate` caps
requests per minute and requests in flight. The conversation the agent sees: the env's first observation as a
``user`` message, then its own turns as ``assistant`` and the human's replies as ``user`` messages.

Failures: bad configuration (unknown env, bad spec, missing tasks, a run directory that does not match) raises
``ConfigError``/``DataError`` before anything runs. Inside an episode any exception (an ``InfraError`` above all:
an endpoint after its retries, the sandbox, the renderer) ends that episode with an ``infra_error`` record, never a
score; the run goes on, unless so many fail in a row that the infrastructure is evidently down (then it stops
scheduling, and ``--resume`` picks up later). Ctrl-C keeps every finished episode. The run directory's format is
docs/run-format.md; docs/evaluation.md is the user's guide.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import gymnasium as gym

from colbench import __version__
from colbench.agents import Agent, AgentReply, ChatAgent, EpisodeContext, make_agent
from colbench.envs.base import MAX_TURNS, ColbenchEnv
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.eval.progress import Progress, ProgressMode, Tally
from colbench.eval.ratelimit import EndpointLimits, Gate, GatedLLMClient
from colbench.eval.records import (
    CACHE,
    EPISODES,
    FORMAT,
    RUN_JSON,
    SCREENS,
    EpisodeKey,
    EpisodeWriter,
    canonical_json,
    check_out_dir,
    compared_view,
    config_sha256,
    first_difference,
    latest,
    lock_run_dir,
    read_episodes,
    read_run_json,
    sha256_text,
    write_json_atomic,
)
from colbench.llm import LLMClient, Message, Usage
from colbench.simulator import OpenAISimulator, Simulator, make_simulator
from colbench.tasks import Domain, Task

log = logging.getLogger(__name__)

LOG_FILE = "eval.log"
_SECRET = re.compile(r"key|token|secret|password", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class EvalConfig:
    """Everything ``colbench eval`` takes. ``agent_options`` / ``simulator_options`` are endpoint fields
    (``base_url``, ``api_key``, ``temperature``, ``max_tokens``, ``extra_body``, ``timeout_s``, ``max_retries``, ...;
    a plug-in agent gets its ``agent_options`` as arguments). ``runtime`` notes go to run.json's ``runtime``
    section (never compared on resume, never secrets)."""

    env_id: str
    agent: str
    simulator: str
    out: str | Path
    tasks: str | None = None  # a JSONL file or split name; None: the env's default split
    limit: int | None = None  # the first N tasks, in file order
    trials: int = 1
    concurrency: int = 8
    resume: bool = False
    max_turns: int = MAX_TURNS
    sandbox: str = "auto"  # backend
    embedder: str = "clip"  # frontend
    agent_options: dict[str, Any] = field(default_factory=dict)
    simulator_options: dict[str, Any] = field(default_factory=dict)
    agent_limits: EndpointLimits = field(default_factory=EndpointLimits)
    simulator_limits: EndpointLimits = field(default_factory=EndpointLimits)
    max_consecutive_errors: int | None = None  # None: max(20, 2 * concurrency); 0: never stop
    progress: ProgressMode = "auto"
    runtime: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalResult:
    """What a run (or this session of it) came to. ``overall`` tallies the last record of every episode."""

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
            f"{self.overall.score_text(self.domain)}",
            f"infra errors {self.overall.infra}",
        ]
        if self.unfinished:
            parts.append(f"not run {self.unfinished}")
        parts.append(
            f"this session {self.session.finished} episodes in {self.wall_s:.1f}s "
            f"(tokens agent {self.session.agent_tokens}, simulator {self.session.simulator_tokens})"
        )
        line = "; ".join(parts) + f" -> {self.out}"
        if self.aborted:
            line += f"; {self.aborted}"
        if self.overall.infra or self.unfinished:
            line += "; --resume runs the rest"
        return line


def run_eval(
    config: EvalConfig,
    *,
    agent: Agent | None = None,
    simulator: Simulator | None = None,
    scorer: Any = None,
    embedder: Any = None,
    renderer: Any = None,
    stderr: TextIO | None = sys.stderr,
) -> EvalResult:
    """Run (or resume) an evaluation into ``config.out``. ``agent``/``simulator``/``scorer``/``embedder``/``renderer``
    replace what the specs would build (tests, custom harnesses); run.json still describes them from the specs."""
    started = time.monotonic()
    runner = _Runner.build(
        config, agent=agent, simulator=simulator, scorer=scorer, embedder=embedder, renderer=renderer
    )
    return runner.run(stderr=stderr, started=started)


# ------------------------------------------------------------------------------------------------- set-up


def _check_numbers(config: EvalConfig) -> None:
    for name, value, least in (
        ("--trials", config.trials, 1),
        ("--concurrency", config.concurrency, 1),
        ("--max-turns", config.max_turns, 1),
    ):
        if not isinstance(value, int) or value < least:
            raise ConfigError(f"{name} must be an integer >= {least}, got {value!r}")
    if config.limit is not None and (not isinstance(config.limit, int) or config.limit < 1):
        raise ConfigError(f"--limit must be an integer >= 1, got {config.limit!r}")
    if config.max_consecutive_errors is not None and config.max_consecutive_errors < 0:
        raise ConfigError(f"--max-consecutive-errors must be >= 0, got {config.max_consecutive_errors}")
    config.agent_limits.check("agent")
    config.simulator_limits.check("simulator")


def env_class(env_id: str) -> type[ColbenchEnv]:
    """The ColbenchEnv class registered under ``env_id`` (a ConfigError naming the known ids otherwise)."""
    from colbench.registration import ENV_IDS

    known = ", ".join(ENV_IDS)
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        raise ConfigError(f"unknown env {env_id!r}; known: {known}") from None
    creator: Any = spec.entry_point
    if isinstance(creator, str):
        from gymnasium.envs.registration import load_env_creator

        try:
            creator = load_env_creator(creator)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"env {env_id!r}: cannot load {spec.entry_point}: {exc}") from exc
    if not (isinstance(creator, type) and issubclass(creator, ColbenchEnv)):
        raise ConfigError(f"env {env_id!r} is not a ColBench env; known: {known}")
    return creator


def _pool_size(config: EvalConfig, limits: EndpointLimits) -> int:
    """HTTP connections an endpoint needs: one per request in flight, never fewer than the client's usual 100
    kept alive (so nothing queues in the pool or reconnects below ``concurrency``)."""
    in_flight = min(config.concurrency, limits.max_concurrency or config.concurrency)
    return max(in_flight, 100)


def _is_endpoint_spec(spec: str) -> bool:
    return spec.startswith("openai:") or spec == "local" or spec.startswith("local:")


def _make_agent(config: EvalConfig, tasks: Sequence[Task]) -> Agent:
    options = dict(config.agent_options)
    if _is_endpoint_spec(config.agent):
        # An empty completion is the agent's (wrong) turn, not an endpoint fault to retry into an infra error.
        options.setdefault("accept_empty", True)
        options.setdefault("max_connections", _pool_size(config, config.agent_limits))
    try:
        return make_agent(config.agent, tasks=tasks, options=options)
    except TypeError as exc:  # a plug-in that does not take the given options
        raise ConfigError(f"agent spec {config.agent!r}: {exc}") from exc


def _make_simulator(config: EvalConfig, domain: Domain, out: Path) -> Simulator:
    options = dict(config.simulator_options)
    if _is_endpoint_spec(config.simulator):
        options.setdefault("max_connections", _pool_size(config, config.simulator_limits))
    return make_simulator(config.simulator, domain=domain, cache_dir=out / CACHE, **options)


def _sha256_resource(*parts: str) -> str | None:
    try:
        return sha256_text(resources.files("colbench.envs").joinpath(*parts).read_text("utf-8"))
    except (OSError, ModuleNotFoundError):
        return None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_source(spec: str) -> dict[str, Any]:
    """Where tasks came from: a file (path + sha256), a bundled sample, or a hub split (repo, revision and file
    hash: the manifest's verified values, else the pins recorded on first use)."""
    from colbench import hub

    path = Path(spec)
    if path.is_file():
        return {"kind": "file", "path": str(path.resolve()), "sha256": _sha256_file(path)}
    if spec in hub.BUNDLED:
        resource, _ = hub.BUNDLED[spec]
        with resources.as_file(resources.files("colbench").joinpath(resource)) as bundled:
            return {"kind": "bundled", "name": spec, "sha256": _sha256_file(bundled)}
    name, _, revision = spec.partition("@")
    split = hub.split_spec(name)
    commit = revision or split.revision
    sha = split.sha256 if split.revision is None or commit == split.revision else None
    pins = _read_pins()
    entry = pins.get(split.pin_key) if isinstance(pins.get(split.pin_key), dict) else None
    if entry is not None:
        if commit is None and isinstance(entry.get("pinned"), str):
            commit = entry["pinned"]
        record = (entry.get("commits") or {}).get(commit) if commit else None
        if sha is None and isinstance(record, dict) and isinstance(record.get("sha256"), str):
            sha = record["sha256"]
    return {
        "kind": split.kind,
        "split": name,
        "repo_id": split.repo_id,
        "filename": split.filename or split.data_files,
        "revision": commit,
        "sha256": sha,
    }


def _read_pins() -> dict[str, Any]:
    import json

    from colbench.hub import pins_path

    try:
        raw = json.loads(pins_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = raw.get("files") if isinstance(raw, dict) else None
    return files if isinstance(files, dict) else {}


def _jsonable(value: Any) -> Any:
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def describe_agent(spec: str, agent: Agent, options: Mapping[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "spec": spec,
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
    elif not spec.startswith("scripted:"):
        described["options"] = {k: _jsonable(v) for k, v in sorted(options.items()) if not _SECRET.search(k)}
    return described


def describe_simulator(spec: str, simulator: Simulator, domain: Domain) -> dict[str, Any]:
    described: dict[str, Any] = {
        "spec": spec,
        "class": f"{type(simulator).__module__}.{type(simulator).__qualname__}",
        "model": None,
        "base_url": None,
        "temperature": None,
        "max_tokens": None,
        "extra_body": None,
        "prompt_sha256": _sha256_resource(domain, "prompts", "simulator.txt"),
        "max_chars": None,
        "image_mode": None,
    }
    if isinstance(simulator, OpenAISimulator):
        endpoint = simulator.client.endpoint
        described.update(
            model=endpoint.model,
            base_url=endpoint.identity or endpoint.base_url,
            temperature=endpoint.temperature,
            max_tokens=endpoint.max_tokens,
            extra_body=dict(endpoint.extra_body) if endpoint.extra_body else None,
            max_chars=simulator.max_chars,
            image_mode=getattr(simulator, "image_mode", None),
        )
    return described


def _safe_name(task_id: str) -> str:
    return _UNSAFE.sub("_", task_id)[:120] or "task"


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


# ------------------------------------------------------------------------------------------------- the run


@dataclass
class _Runner:
    config: EvalConfig
    out: Path
    env_cls: type[ColbenchEnv]
    tasks: dict[str, Task]
    keys: list[EpisodeKey]
    agent: Agent
    simulator: Simulator
    env_kwargs: dict[str, Any]
    run_json: dict[str, Any]
    resuming: bool
    agent_gate: Gate
    final: dict[EpisodeKey, dict[str, Any]] = field(default_factory=dict)
    stop_reason: str | None = None
    _consecutive_errors: int = 0

    @property
    def domain(self) -> Domain:
        return self.env_cls.domain

    @classmethod
    def build(
        cls,
        config: EvalConfig,
        *,
        agent: Agent | None,
        simulator: Simulator | None,
        scorer: Any,
        embedder: Any,
        renderer: Any,
    ) -> _Runner:
        _check_numbers(config)
        env_cls = env_class(config.env_id)
        domain = env_cls.domain
        out = Path(config.out)
        resuming = check_out_dir(out, resume=config.resume)
        previous = read_run_json(out) if resuming else None

        from colbench.hub import resolve_tasks

        tasks_spec = config.tasks or env_cls.default_tasks
        available = resolve_tasks(tasks_spec)
        wrong = next((t for t in available if t.domain != domain), None)
        if wrong is not None:
            raise ConfigError(
                f"{tasks_spec}: task {wrong.task_id} is a {wrong.domain} task; {config.env_id} needs {domain} tasks"
            )
        selected = available[: config.limit] if config.limit else available
        if agent is None:
            agent = _make_agent(config, selected)
        if simulator is None:
            simulator = _make_simulator(config, domain, out)
        sim_gate = Gate(config.simulator_limits)
        if sim_gate.active:
            if isinstance(simulator, OpenAISimulator) and isinstance(simulator.client, LLMClient):
                simulator.client = GatedLLMClient(simulator.client.endpoint, sim_gate)
            else:
                log.warning("simulator %s calls no endpoint: its request limits are ignored", config.simulator)

        env_kwargs: dict[str, Any] = {"simulator": simulator, "max_turns": config.max_turns}
        if domain == "backend":
            from colbench.sandbox import resolve_kind, shared_sandbox
            from colbench.scoring.backend import SCORER_VERSION, BackendScorer

            if scorer is None:
                kind = resolve_kind(config.sandbox)
                scorer = BackendScorer(shared_sandbox(kind))
            else:
                kind = f"{type(scorer.sandbox).__name__}" if hasattr(scorer, "sandbox") else type(scorer).__name__
            env_kwargs["scorer"] = scorer
            scoring: dict[str, Any] = {"sandbox": kind, "scorer_version": SCORER_VERSION}
        else:
            from colbench.envs.frontend.env import shared_embedder

            if embedder is None:
                embedder = shared_embedder(config.embedder)
            env_kwargs["embedder"] = embedder
            if renderer is not None:
                env_kwargs["renderer"] = renderer
            scoring = {"embedder": str(embedder.name)}

        ids = [t.task_id for t in selected]
        run_json: dict[str, Any] = {
            "format": FORMAT,
            "colbench_version": __version__,
            "created": _utc_now(),
            "env_id": config.env_id,
            "domain": domain,
            "max_turns": config.max_turns,
            "agent_prompt_sha256": _sha256_resource(domain, "prompts", "agent.txt"),
            "trials": config.trials,
            "limit": config.limit,
            "tasks": {
                "spec": tasks_spec,
                "count": len(selected),
                "ids_sha256": sha256_text("\n".join(ids)),
                "source": describe_source(tasks_spec),
            },
            "agent": describe_agent(config.agent, agent, config.agent_options),
            "simulator": describe_simulator(config.simulator, simulator, domain),
            "scoring": scoring,
            "runtime": {
                "concurrency": config.concurrency,
                "agent_rpm": config.agent_limits.rpm,
                "agent_max_concurrency": config.agent_limits.max_concurrency,
                "simulator_rpm": config.simulator_limits.rpm,
                "simulator_max_concurrency": config.simulator_limits.max_concurrency,
                **{k: _jsonable(v) for k, v in config.runtime.items() if not _SECRET.search(k) or k.endswith("_env")},
            },
        }
        run_json["config_sha256"] = config_sha256(run_json)
        if previous is not None:
            diff = first_difference(compared_view(previous), compared_view(run_json))
            if diff is not None:
                raise ConfigError(
                    f"cannot resume {out}: the configuration differs from its {RUN_JSON} at {diff} "
                    "(use the run's own options, or another --out for a new run)"
                )
            run_json = previous

        runner = cls(
            config=config,
            out=out,
            env_cls=env_cls,
            tasks={t.task_id: t for t in selected},
            keys=[(task_id, trial) for trial in range(config.trials) for task_id in ids],
            agent=agent,
            simulator=simulator,
            env_kwargs=env_kwargs,
            run_json=run_json,
            resuming=previous is not None,
            agent_gate=Gate(config.agent_limits),
        )
        runner._make_env(selected[0]).close()  # a bad env argument fails here, before anything runs
        return runner

    def _make_env(self, task: Task) -> ColbenchEnv:
        try:
            env = gym.make(self.config.env_id, disable_env_checker=True, tasks=[task], **self.env_kwargs).unwrapped
        except TypeError as exc:
            raise ConfigError(f"env {self.config.env_id!r}: {exc}") from exc
        assert isinstance(env, ColbenchEnv)
        return env

    # -- driving ------------------------------------------------------------------------------------------------
    def run(self, *, stderr: TextIO | None, started: float) -> EvalResult:
        self.out.mkdir(parents=True, exist_ok=True)
        with lock_run_dir(self.out):
            return self._run_locked(stderr=stderr, started=started)

    def _run_locked(self, *, stderr: TextIO | None, started: float) -> EvalResult:
        if not self.resuming:
            if (self.out / RUN_JSON).exists():  # another run started here since the directory was checked
                raise ConfigError(f"--out {self.out} is not empty: use --resume to continue the run there")
            write_json_atomic(self.out / RUN_JSON, self.run_json)
        self.final = latest(read_episodes(self.out / EPISODES, repair=True))
        kept = Tally()
        for key in self.keys:
            if self.final.get(key, {}).get("status") == "ok":
                kept.add(self.final[key])
        pending = [key for key in self.keys if self.final.get(key, {}).get("status") != "ok"]
        progress = Progress(
            total=len(self.keys),
            kept=kept,
            domain=self.domain,
            stream=None if self.config.progress == "off" else stderr,
            mode=self.config.progress,
        )
        handler = logging.FileHandler(self.out / LOG_FILE, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        package_log = logging.getLogger("colbench")
        package_log.addHandler(handler)
        interrupted = False
        try:
            if pending:
                asyncio.run(self._drive(pending, progress))
        except KeyboardInterrupt:
            interrupted = True
        finally:
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
            agent=self.config.agent,
            total=len(self.keys),
            kept=kept.ok,
            session=progress.session,
            overall=overall,
            wall_s=time.monotonic() - started,
            interrupted=interrupted,
            aborted=self.stop_reason,
        )

    async def _drive(self, pending: list[EpisodeKey], progress: Progress) -> None:
        queue = deque(pending)
        writer = EpisodeWriter(self.out / EPISODES)
        ticker = asyncio.create_task(progress.run())
        limit = self.config.max_consecutive_errors
        if limit is None:
            limit = max(20, 2 * self.config.concurrency)

        async def worker() -> None:
            while queue and self.stop_reason is None:
                task_id, trial = queue.popleft()
                progress.episode_started()
                record = await self._episode(self.tasks[task_id], trial, writer)
                try:
                    await writer.append(record)
                except OSError as exc:
                    raise InfraError(f"cannot write {writer.path}: {exc}") from exc
                key = (task_id, trial)
                if self.final.get(key, {}).get("status") != "ok":
                    self.final[key] = record
                progress.episode_finished(record)
                if record["status"] == "ok":
                    self._consecutive_errors = 0
                else:
                    self._consecutive_errors += 1
                    if limit and self._consecutive_errors >= limit and self.stop_reason is None:
                        self.stop_reason = (
                            f"stopped after {self._consecutive_errors} infrastructure errors in a row "
                            f"(last: {record['error']})"
                        )
                        log.error("%s", self.stop_reason)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.config.concurrency, len(queue))):
                    group.create_task(worker())
        except* InfraError as errors:
            raise errors.exceptions[0] from None
        finally:
            ticker.cancel()
            writer.close()
            progress.close()
            await self._close_clients()

    async def _close_clients(self) -> None:
        """Close the HTTP pools on this loop: a pool left to the garbage collector closes on a dead loop."""
        clients = [getattr(self.agent, "client", None), getattr(self.simulator, "client", None)]
        for client in clients:
            if isinstance(client, LLMClient):
                try:
                    await client.aclose()
                except Exception:  # closing is best effort
                    log.debug("closing %s failed", client.endpoint.where, exc_info=True)

    async def _episode(self, task: Task, trial: int, writer: EpisodeWriter) -> dict[str, Any]:
        started, clock = _utc_now(), time.monotonic()
        agent_usage = Usage()
        timings = {"agent_s": 0.0, "simulator_s": 0.0, "scoring_s": 0.0}
        record: dict[str, Any] = {"task_id": task.task_id, "trial": trial}
        env: ColbenchEnv | None = None
        info: dict[str, Any] = {}
        try:
            env = self._make_env(task)
            observation, info = env.reset(options={"task_id": task.task_id})
            messages: list[Message] = [{"role": "user", "content": observation}]
            while True:
                context = EpisodeContext(
                    task_id=task.task_id,
                    domain=self.domain,
                    turn=int(info.get("turn", 0)) + 1,
                    max_turns=env.max_turns,
                    trial=trial,
                )
                mark = time.monotonic()
                async with self.agent_gate:
                    reply = await self.agent.aact(messages, context)
                timings["agent_s"] += time.monotonic() - mark
                text = _reply_text(reply)
                if isinstance(reply, AgentReply):
                    agent_usage.add(reply.usage)
                mark = time.monotonic()
                observation, reward, terminated, truncated, info = await env.astep(text)
                timings["scoring_s" if terminated or truncated else "simulator_s"] += time.monotonic() - mark
                if terminated or truncated:
                    break
                messages += [{"role": "assistant", "content": text}, {"role": "user", "content": observation}]
            screenshot = None
            png = getattr(env, "page_png", None)
            if isinstance(png, bytes):
                screenshot = f"{SCREENS}/{_safe_name(task.task_id)}.{trial}.png"
                await writer.save_file(screenshot, png)
            record.update(
                status="ok",
                reward=float(reward),
                success=bool(info["success"]) if self.domain == "backend" and "success" in info else None,
                termination=info.get("termination"),
                turns=int(info.get("turn", 0)),
                score=_jsonable(info.get("score")),
                **self._trail(env, info, agent_usage, started, clock, timings),
                screenshot=screenshot,
                error=None,
            )
            if "answer_html" in info:  # frontend: the page that was scored (it may come from an earlier turn)
                record["answer_html"] = info["answer_html"]
        except Exception as exc:
            error = _one_line(exc)
            if isinstance(exc, InfraError):
                log.warning("task %s trial %d: infrastructure error: %s", task.task_id, trial, error)
            else:  # not an infrastructure error by type: a bug somewhere; never a score either
                log.exception("task %s trial %d: unexpected error", task.task_id, trial)
                if not isinstance(exc, ColbenchError):
                    error = f"harness error: {error}"
            record.update(
                status="infra_error",
                reward=None,
                success=None,
                termination=None,
                turns=int(info.get("turn", 0)),
                score=None,
                **self._trail(env, info, agent_usage, started, clock, timings),
                screenshot=None,
                error=error,
            )
        finally:
            if env is not None:
                env.close()
        return record

    def _trail(
        self,
        env: ColbenchEnv | None,
        info: Mapping[str, Any],
        agent_usage: Usage,
        started: str,
        clock: float,
        timings: Mapping[str, float],
    ) -> dict[str, Any]:
        """Dialogue, usage and timings: the part of a record every outcome has."""
        dialogue: list[dict[str, str]] = []
        if env is not None:
            try:
                dialogue = [{"role": turn.role, "text": turn.text} for turn in env.dialogue]
            except ColbenchError:  # reset never happened
                dialogue = []
        simulator_usage = (info.get("usage") or {}).get("simulator") or Usage().as_dict()
        answer = info.get("answer")
        return {
            "dialogue": dialogue,
            "answer": answer if isinstance(answer, str) else None,
            "usage": {"agent": agent_usage.as_dict(), "simulator": dict(simulator_usage)},
            "timings": {
                "started": started,
                "duration_s": round(time.monotonic() - clock, 3),
                **{name: round(seconds, 3) for name, seconds in timings.items()},
            },
        }


def _reply_text(reply: Any) -> str:
    """The agent's text (a plug-in returning a plain string is accepted)."""
    if isinstance(reply, str):
        return reply
    text = getattr(reply, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"the agent returned {type(reply).__name__} without a text: expected an AgentReply")
    return text
