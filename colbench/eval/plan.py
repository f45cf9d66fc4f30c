"""What ``colbench eval`` runs: one plan, resolved once from the command line's (or a caller's) strings.

:meth:`RunPlan.resolve` parses each model spec once (one :func:`~colbench.llm.specs.parse_spec` per role), the leak
policy once, fills in the ``openai:`` endpoints' URL and key from the environment once, and checks the numbers.
Every layer after it, the Ray actors included, takes the typed plan and never parses a string again, so a run
plays the same endpoints on every node whatever each node's environment holds. What a plan names, the run and its
dry run read alike: its env class (:func:`env_class`) and its tasks (:func:`selected_tasks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from colbench.env.core import ColbenchEnv
from colbench.env.domain import Domain
from colbench.env.registration import env_definitions
from colbench.env.versions import scoring_options
from colbench.errors import ConfigError
from colbench.eval.progress import ProgressMode
from colbench.llm.limits import EndpointLimits
from colbench.llm.specs import ModelSpec, parse_spec, with_environment_endpoint
from colbench.report.costs import Prices
from colbench.tasks.sources import load
from colbench.types.claims import TruthPolicy, parse_grounding
from colbench.types.dialogue import MAX_TURNS
from colbench.types.leaks import LeakPolicy
from colbench.types.task import Task


@dataclass(frozen=True)
class RunPlan:
    """Everything ``colbench eval`` takes, resolved. ``agent_options`` / ``simulator_options`` are endpoint fields
    (``base_url``, ``api_key``, ``temperature``, ``max_tokens``, ``extra_body``, ``timeout_s``, ``max_retries``, ...;
    a plug-in agent gets its ``agent_options`` as arguments; the frontend human also takes ``image_mode``).
    ``runtime`` notes go to run.json's ``runtime`` section (never compared on resume, never secrets). Build one with
    :meth:`resolve`."""

    env_id: str
    agent: ModelSpec
    simulator: ModelSpec
    out: Path
    tasks: str | None = None  # a JSONL file or split name; None: the domain's default split
    limit: int | None = None  # the first N tasks, in file order
    trials: int = 1
    concurrency: int = 8
    resume: bool = False
    max_turns: int = MAX_TURNS
    sandbox: str = "auto"  # scoring option of the backend domain
    embedder: str = "clip"  # scoring option of the frontend domain
    leak_policy: LeakPolicy = field(default_factory=lambda: LeakPolicy.parse("flag"))
    truth_policy: TruthPolicy = field(default_factory=TruthPolicy)
    human_grounding: str = "off"  # "exec": the human is told the reference's results on the agent's literal calls
    agent_options: Mapping[str, Any] = field(default_factory=dict)
    simulator_options: Mapping[str, Any] = field(default_factory=dict)
    agent_limits: EndpointLimits = field(default_factory=EndpointLimits)
    simulator_limits: EndpointLimits = field(default_factory=EndpointLimits)
    max_consecutive_errors: int | None = None  # None: max(20, 2 * concurrency); 0: never stop
    progress: ProgressMode = "auto"
    prices: Prices | None = None  # the progress display's cost (--prices); None: colbench's list prices
    runtime: Mapping[str, Any] = field(default_factory=dict)
    # Ray (colbench.ray): None runs every episode in this process; "" connects as ``ray.init()`` does (RAY_ADDRESS,
    # or a cluster already running here, else a new one on this machine); otherwise the cluster's address.
    ray: str | None = None
    ray_workers: int | None = None  # episode actors on the cluster; None: one per colbench_sandbox unit, else node

    @classmethod
    def resolve(
        cls,
        *,
        env_id: str,
        agent: str | ModelSpec,
        simulator: str | ModelSpec,
        out: str | Path,
        leak_policy: str | LeakPolicy = "flag",
        truth_policy: str | TruthPolicy = "flag",
        human_grounding: str = "off",
        agent_options: Mapping[str, Any] | None = None,
        simulator_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> RunPlan:
        """The plan of a run given as the command line gives it (strings where it has strings; a :class:`ModelSpec`
        made with :meth:`ModelSpec.named` stands for an agent object handed to ``run_eval``)."""
        agent_spec = agent if isinstance(agent, ModelSpec) else parse_spec(agent, "agent")
        simulator_spec = simulator if isinstance(simulator, ModelSpec) else parse_spec(simulator, "simulator")
        if isinstance(leak_policy, LeakPolicy):
            policy = leak_policy
        else:
            try:
                policy = LeakPolicy.parse(leak_policy)
            except ConfigError as exc:
                raise ConfigError(f"--leak-policy: {exc}") from None
        try:
            truth = TruthPolicy.parse(truth_policy)
        except ConfigError as exc:
            raise ConfigError(f"--truth-policy: {exc}") from None
        plan = cls(
            env_id=env_id,
            agent=agent_spec,
            simulator=simulator_spec,
            out=Path(out),
            leak_policy=policy,
            truth_policy=truth,
            human_grounding=parse_grounding(human_grounding, "--human-grounding"),
            agent_options=with_environment_endpoint(agent_spec, "agent", agent_options or {}),
            simulator_options=with_environment_endpoint(simulator_spec, "simulator", simulator_options or {}),
            **settings,
        )
        plan.check()
        return plan

    def check(self) -> None:
        """The numbers a run needs, each a one-line ConfigError naming its option."""
        for name, value, least in (
            ("--trials", self.trials, 1),
            ("--concurrency", self.concurrency, 1),
            ("--max-turns", self.max_turns, 1),
        ):
            if not isinstance(value, int) or value < least:
                raise ConfigError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.ray_workers is not None and (not isinstance(self.ray_workers, int) or self.ray_workers < 1):
            raise ConfigError(f"--ray-workers must be an integer >= 1, got {self.ray_workers!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ConfigError(f"--limit must be an integer >= 1, got {self.limit!r}")
        if self.max_consecutive_errors is not None and self.max_consecutive_errors < 0:
            raise ConfigError(f"--max-consecutive-errors must be >= 0, got {self.max_consecutive_errors}")
        self.agent_limits.check("agent")
        self.simulator_limits.check("simulator")

    @property
    def scoring_options(self) -> dict[str, Any]:
        """What the domains' scorers read (each its own: backend ``sandbox``, frontend ``embedder``), with the
        env id's version of the scoring (backend ``rules``, ``plus_tests``; :mod:`colbench.env.versions`)."""
        return {**scoring_options(self.env_id), "sandbox": self.sandbox, "embedder": self.embedder}


def env_class(env_id: str) -> type[ColbenchEnv]:
    """The ColbenchEnv class registered under ``env_id`` (a ConfigError naming the known ids otherwise)."""
    known = ", ".join(spec.id for spec in env_definitions())
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


def selected_tasks(config: RunPlan, domain: Domain) -> tuple[str, list[Task]]:
    """The task spec and the tasks the run covers (a ConfigError for tasks of another domain)."""
    tasks_spec = config.tasks or domain.default_tasks
    available = load(tasks_spec)
    wrong = next((t for t in available if t.domain != domain.name), None)
    if wrong is not None:
        raise ConfigError(
            f"{tasks_spec}: task {wrong.task_id} is a {wrong.domain} task; {config.env_id} needs {domain.name} tasks"
        )
    return tasks_spec, available[: config.limit] if config.limit else available
