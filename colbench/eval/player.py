"""One episode, played end to end into its record: the part of ``colbench eval`` that can run anywhere.

The driver (:mod:`colbench.eval.harness`) owns the run directory and decides what runs; an :class:`EpisodePlayer`
only plays: it makes the env, talks to the agent, and returns the record and the page screenshot (if any) as
plain data. The same player runs in the driver's process or in a Ray actor on another node
(:mod:`colbench.ray.eval_actors`), built there from the same :class:`RunPlan`, so a record does not depend on where
it was played.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from colbench._util.storage import canonical_json, utc_timestamp
from colbench.agents.agent import Agent, AgentReply, EpisodeContext, make_agent
from colbench.env.core import ColbenchEnv
from colbench.env.domain import Domain, Scorer
from colbench.env.simulators import make_simulator
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.eval.plan import RunPlan
from colbench.humans.simulator import Simulator
from colbench.llm.limits import EndpointLimits
from colbench.runs import CACHE, EpisodeRecord, reference_screenshot_name, screenshot_name, turn_screenshot_name
from colbench.types.chat import Message, Usage
from colbench.types.task import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Played:
    """An episode's record (one line of episodes.jsonl) and the PNGs its ``screenshot`` and
    ``reference_screenshot`` name, for the driver to write."""

    record: EpisodeRecord
    png: bytes | None = None
    reference_png: bytes | None = None
    turn_pngs: tuple[tuple[str, bytes], ...] = ()
    """The page of each agent turn that made one (frontend): the file its turn's ``screenshot`` names, the PNG."""


@dataclass
class EpisodePlayer:
    """Plays episodes of ``env_id`` with one agent, one simulator and the scorer in ``env_kwargs``, many at once
    on one event loop (they share the agent's and the simulator's clients)."""

    env_id: str
    domain: Domain
    agent: Agent
    simulator: Simulator
    env_kwargs: dict[str, Any]
    # tasks whose reference screenshot this player has handed to its driver (one per task, whatever the trials)
    _references_given: set[str] = field(default_factory=set, init=False, repr=False)

    @classmethod
    def from_config(
        cls,
        config: RunPlan,
        domain: Domain,
        tasks: Sequence[Task],
        *,
        agent: Agent | None = None,
        simulator: Simulator | None = None,
        scorer: Scorer | None = None,
    ) -> EpisodePlayer:
        """The parts ``config`` names (those given replace theirs): what the driver and every Ray actor build."""
        return cls(
            env_id=config.env_id,
            domain=domain,
            agent=agent if agent is not None else make_agent_for(config, domain, tasks),
            simulator=simulator if simulator is not None else make_simulator_for(config, domain, Path(config.out)),
            env_kwargs={
                "max_turns": config.max_turns,
                "scorer": scorer if scorer is not None else domain.shared_scorer(config.scoring_options),
                "leak_policy": config.leak_policy,
                "truth_policy": config.truth_policy,
                "human_grounding": config.human_grounding,
            },
        )

    def claim_checker_name(self) -> str:
        """What names the checker of the human's claims in run.json (the domain's, over this player's scorer)."""
        return self.domain.claim_checker(self.env_kwargs["scorer"]).name

    def make_env(self, task: Task) -> ColbenchEnv:
        # made from the spec, not the id: Gymnasium warns that an id older than the newest of its name is "out of
        # date", and a run of v1 is a v1 run by choice (run.json and the report name its id)
        try:
            env = gym.make(
                gym.spec(self.env_id),
                disable_env_checker=True,
                tasks=[task],
                simulator=self.simulator,
                **self.env_kwargs,
            ).unwrapped
        except TypeError as exc:
            raise ConfigError(f"env {self.env_id!r}: {exc}") from exc
        assert isinstance(env, ColbenchEnv)
        return env

    async def play(self, task: Task, trial: int) -> Played:
        """Trial ``trial`` of ``task``: an ``ok`` record, or an ``infra_error`` one (never raised, never a score)."""
        started, clock = utc_timestamp(), time.monotonic()
        agent_usage = Usage()
        timings = {"agent_s": 0.0, "simulator_s": 0.0, "scoring_s": 0.0}
        record: dict[str, Any] = {"task_id": task.task_id, "trial": trial}
        env: ColbenchEnv | None = None
        info: dict[str, Any] = {}
        png: bytes | None = None
        reference_png: bytes | None = None
        turn_pngs: list[tuple[str, bytes]] = []
        try:
            env = self.make_env(task)
            observation, info = env.reset(options={"task_id": task.task_id})
            messages: list[Message] = [{"role": "user", "content": observation}]
            while True:
                context = EpisodeContext(
                    task_id=task.task_id,
                    domain=self.domain.name,
                    turn=int(info.get("turn", 0)) + 1,
                    max_turns=env.max_turns,
                    trial=trial,
                )
                mark = time.monotonic()
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
            page = getattr(env, "page_png", None)
            if self.domain.renders_pages and isinstance(page, bytes):
                png = page
            reference_png = await self._reference_png(env, task)
            success = info.get("success")
            record.update(
                status="ok",
                reward=float(reward),
                success=success if isinstance(success, bool) else None,
                termination=info.get("termination"),
                turns=int(info.get("turn", 0)),
                score=jsonable(info.get("score")),
                **self._trail(env, info, agent_usage, started, clock, timings, turn_pngs, (task.task_id, trial)),
                screenshot=screenshot_name(task.task_id, trial) if png is not None else None,
                error=None,
            )
            if task.task_id in self._references_given:
                record["reference_screenshot"] = reference_screenshot_name(task.task_id)
            if "answer_html" in info:  # a page answer: the page that was scored (it may come from an earlier turn)
                record["answer_html"] = info["answer_html"]
        except Exception as exc:
            png = reference_png = None
            error = one_line(exc)
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
                **self._trail(env, info, agent_usage, started, clock, timings, turn_pngs, (task.task_id, trial)),
                screenshot=None,
                error=error,
            )
        finally:
            if env is not None:
                env.close()
        return Played(EpisodeRecord.model_validate(record), png, reference_png, tuple(turn_pngs))

    async def _reference_png(self, env: ColbenchEnv, task: Task) -> bytes | None:
        """The task's reference page for the run directory, the first time this player plays the task; never an
        episode's failure (a reference that does not render is the scorer's business, not the report's)."""
        take = getattr(env, "areference_png", None)
        if not self.domain.renders_pages or take is None or task.task_id in self._references_given:
            return None
        try:
            png = await take()
        except ColbenchError as exc:
            log.warning("task %s: no reference screenshot: %s", task.task_id, one_line(exc))
            return None
        if not isinstance(png, bytes):
            return None
        self._references_given.add(task.task_id)
        return png

    async def aclose(self) -> None:
        """Close the agent's and the simulator's HTTP pools on this loop (the spec human's writer's too): a pool
        left to the garbage collector closes on a dead loop."""
        for part in (self.agent, self.simulator):
            try:
                await part.aclose()
            except Exception:  # closing is best effort
                log.debug("closing %s failed", type(part).__name__, exc_info=True)

    def _trail(
        self,
        env: ColbenchEnv | None,
        info: Mapping[str, Any],
        agent_usage: Usage,
        started: str,
        clock: float,
        timings: Mapping[str, float],
        turn_pngs: list[tuple[str, bytes]],
        episode: tuple[str, int],
    ) -> dict[str, Any]:
        """Dialogue, usage and timings: the part of a record every outcome has. A domain's rendered pages: each agent
        turn's record names the file of the page the human saw then (None when the turn made no page), and the PNGs
        are added to ``turn_pngs`` for the driver to write."""
        dialogue: list[dict[str, Any]] = []
        if env is not None:
            try:
                turns = list(env.dialogue)
            except ColbenchError:  # reset never happened
                turns = []
            agent_turns = 0
            for turn in turns:
                row = turn.row()
                if turn.role == "agent" and self.domain.renders_pages:
                    agent_turns += 1
                    name = turn_screenshot_name(*episode, agent_turns) if turn.image else None
                    if name is not None and turn.image is not None:
                        turn_pngs.append((name, turn.image))
                    row["screenshot"] = name
                dialogue.append(row)
        simulator_usage = (info.get("usage") or {}).get("simulator") or Usage().as_dict()
        answer = info.get("answer")
        leaks = info.get("leaks")
        return {
            "dialogue": dialogue,
            "leaks": leaks if isinstance(leaks, int) else None,
            "answer": answer if isinstance(answer, str) else None,
            "usage": {"agent": agent_usage.as_dict(), "simulator": dict(simulator_usage)},
            "timings": {
                "started": started,
                "duration_s": round(time.monotonic() - clock, 3),
                **{name: round(seconds, 3) for name, seconds in timings.items()},
            },
        }


def pool_size(config: RunPlan, limits: EndpointLimits) -> int:
    """HTTP connections an endpoint needs: one per request in flight, never fewer than the client's usual 100
    kept alive (so nothing queues in the pool or reconnects below ``concurrency``)."""
    in_flight = min(config.concurrency, limits.max_concurrency or config.concurrency)
    return max(in_flight, 100)


def make_agent_for(config: RunPlan, domain: Domain, tasks: Sequence[Task]) -> Agent:
    """The agent ``config`` names, for ``domain``'s tasks (an embedded agent's answer starts in the domain's format)."""
    options = dict(config.agent_options)
    if config.agent.is_model:
        # An empty completion is the agent's (wrong) turn, not an endpoint fault to retry into an infra error.
        options.setdefault("accept_empty", True)
        options.setdefault("max_connections", pool_size(config, config.agent_limits))
    elif config.agent_limits.active:
        log.warning("agent %s calls no colbench endpoint: its request limits are ignored", config.agent.text)
    try:
        return make_agent(
            config.agent,
            tasks=tasks,
            options=options,
            limits=config.agent_limits,
            answer_prefill=domain.answer_prefill,
        )
    except TypeError as exc:  # a plug-in that does not take the given options
        raise ConfigError(f"agent spec {config.agent.text!r}: {exc}") from exc


def make_simulator_for(config: RunPlan, domain: Domain, out: Path) -> Simulator:
    options = dict(config.simulator_options)
    if config.simulator.is_model:
        options.setdefault("max_connections", pool_size(config, config.simulator_limits))
    elif config.simulator_limits.active:
        log.warning("simulator %s calls no endpoint: its request limits are ignored", config.simulator.text)
    return make_simulator(domain, config.simulator, cache_dir=out / CACHE, limits=config.simulator_limits, **options)


def jsonable(value: Any) -> Any:
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


def _reply_text(reply: Any) -> str:
    """The agent's text (a plug-in returning a plain string is accepted)."""
    if isinstance(reply, str):
        return reply
    text = getattr(reply, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"the agent returned {type(reply).__name__} without a text: expected an AgentReply")
    return text
