"""``colbench eval --dry-run``, and the forecast a run records in run.json: what :mod:`colbench.eval.forecast`
computes from, found without calling any model (the episodes left to run, each task's first observation, the
embedded model's measured speed)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import gymnasium as gym

from colbench.env.domain import Domain, Scorer, get_domain
from colbench.eval.forecast import Forecast, forecast, forecast_text
from colbench.eval.plan import RunPlan, env_class, selected_tasks
from colbench.humans.simulator import ScriptedSimulator
from colbench.llm.llamacpp.speed import Speed, cached_speed, measured_speed
from colbench.report.costs import LIST_PRICES, Prices
from colbench.runs import EPISODES, EpisodeKey, final_records, read_episode_log
from colbench.types.task import Task


def dry_run(config: RunPlan, *, prices: Prices | None = None, turns: float | None = None) -> str:
    """The forecast of ``config``'s run (what a ``--resume`` has left to run), without calling any model."""
    config.check()
    domain = get_domain(env_class(config.env_id).domain_name)
    _, selected = selected_tasks(config, domain)
    done: set[EpisodeKey] = set()
    if config.resume and (config.out / EPISODES).exists():
        records = final_records(read_episode_log(config.out / EPISODES, domain.metrics_for(config.env_id)).records)
        done = {key for key, record in records.items() if record.ok}
    scorer = domain.shared_scorer(config.scoring_options)
    forecasts = run_forecast(config, domain, selected, scorer, done=done, measure=True, prices=prices, turns=turns)
    return forecast_text(forecasts, prices or LIST_PRICES)


def run_forecast(
    config: RunPlan,
    domain: Domain,
    selected: Sequence[Task],
    scorer: Scorer | None,
    *,
    done: Collection[EpisodeKey] = (),
    measure: bool = False,
    prices: Prices | None = None,
    turns: float | None = None,
) -> list[Forecast]:
    """The forecast of the episodes of ``selected`` not ``done`` yet (a run's start: all of them, the speeds cached)."""
    episodes = [t for trial in range(config.trials) for t in selected if (t.task_id, trial) not in done]
    speeds = embedded_speeds(config, measure=measure)
    prompts = first_prompts(config.env_id, selected, scorer)
    return forecast(config, domain, prompts, episodes, prices=prices, turns=turns, speeds=speeds)


def first_prompts(env_id: str, tasks: Sequence[Task], scorer: Scorer | None = None) -> dict[str, str]:
    """Each task's first observation, as the agent will see it (a scripted human: no model is called). ``scorer``:
    the run's, given to the env (never used: nothing is scored), so that an env made without one does not look for
    what its own scorer would need (a frontend env's CLIP weights)."""
    prompts = {}
    given: dict[str, Any] = {"scorer": scorer} if scorer is not None else {}
    for task in tasks:
        spec = gym.spec(env_id)  # not the id: no "out of date" warning for the version the run chose (player.py)
        env = gym.make(spec, disable_env_checker=True, tasks=[task], simulator=ScriptedSimulator(), **given).unwrapped
        try:
            prompts[task.task_id] = env.reset(options={"task_id": task.task_id})[0]
        finally:
            env.close()
    return prompts


def embedded_speeds(config: RunPlan, *, measure: bool) -> dict[str, Speed]:
    """The measured speed of each role the embedded model plays: measured now if ``measure`` (a dry run: once
    per model and machine, then cached), else only what is cached (a run's start never waits for a
    measurement)."""
    speeds = {}
    for role, spec in (("agent", config.agent), ("simulator", config.simulator)):
        if spec.is_embedded:
            speed = measured_speed(spec.value or None) if measure else cached_speed(spec.value or None)
            if speed is not None:
                speeds[role] = speed
    return speeds
