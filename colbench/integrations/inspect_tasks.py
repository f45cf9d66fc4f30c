"""Inspect (inspect_ai 0.3.285): ColBench's tasks as Inspect tasks, ``inspect eval colbench/backend`` and
``inspect eval colbench/frontend``, found by Inspect through the ``inspect_ai`` entry point of colbench's wheel.

The model under evaluation writes the agent's turns. The simulated human is Inspect's model role ``human``
(``--model-role human=PROVIDER/MODEL``; the task argument ``human`` is its default), asked through colbench's own
simulator of the domain (its prompts, reply cap, the frontend's pages, the spec view), so both models' calls go
through Inspect's providers, retries and log. Each sample is one episode played through the colbench env itself
(``areset``/``astep``): the env's prompt, turn cap, answer marker, leak and truth policies, and its scorer (the
backend's sandbox, the frontend's renderer and reward) give the verdict Inspect's scorer reports. A failure of the
infrastructure (the sandbox, the human's model) raises out of the sample: an Inspect sample error, which ``inspect
eval-retry`` runs again, never a score of 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError  # what Inspect's CLI prints as one line, without a traceback
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageUser, GenerateConfig, get_model, messages_from_openai, model_roles
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import LimitExceededError
from pydantic_core import to_jsonable_python

import colbench  # noqa: F401 (registers the env ids)
from colbench.env.core import ColbenchEnv
from colbench.env.dataset import prompt_rows
from colbench.env.domain import get_domain
from colbench.env.simulators import describe_simulator, make_simulator
from colbench.env.versions import scoring_env
from colbench.errors import ColbenchError, ConfigError, LLMError
from colbench.llm.client import Endpoint, LLMClient
from colbench.llm.specs import ModelSpec
from colbench.tasks.sources import load_shared
from colbench.types.chat import ChatReply, Message, Usage
from colbench.types.dialogue import MAX_TURNS

HUMAN = "human"
RUN = "colbench_run"
"""The task metadata's key for the run.json fields the task fixes (``colbench report`` reads a log through them)."""
VERDICT = "colbench"
"""The store key under which the dialogue leaves the env's verdict for the scorer."""
TEMPERATURE = GenerateConfig(temperature=0.0)
"""colbench's sampling for both roles (``colbench eval``'s default), unless Inspect's options set another."""


@dataclass(frozen=True)
class TaskArgs:
    """The task arguments (``-T name=value``) of both tasks: ``env_id`` (default: the domain's newest id),
    ``tasks`` (a split or JSONL file; default the test split), ``limit`` (the first N tasks), ``max_turns``,
    ``human`` (the human's model where ``--model-role human=...`` names none), ``human_view`` (``hidden`` or
    ``spec``) and ``human_specs`` (pinned specs), and the env's ``leak_policy`` and ``truth_policy``."""

    env_id: str | None = None
    tasks: str | None = None
    limit: int | None = None
    max_turns: int = MAX_TURNS
    human: str | None = None
    human_view: str = "hidden"
    human_specs: str | None = None
    leak_policy: str = "flag"
    truth_policy: str = "flag"


@task
def backend(sandbox: str = "auto", human_grounding: str = "off", **args: Any) -> Task:
    """ColBench's backend tasks: a Python function written with the human, scored by its unit tests in colbench's
    sandbox (``sandbox``: ``auto``, ``bwrap``, ``docker``); ``human_grounding`` ``exec`` tells the human the
    reference's results on the agent's literal calls; the other arguments are :class:`TaskArgs`."""
    return colbench_task("backend", "pass_rate", args, {"sandbox": sandbox, "human_grounding": human_grounding})


@task
def frontend(embedder: str = "clip", human_image_mode: str | None = None, **args: Any) -> Task:
    """ColBench's frontend tasks: an HTML page designed with the human, who sees the pages (``human_image_mode``
    ``image``, or ``html`` for a text-only model), rendered by headless Chromium and scored by the env's reward
    (``embedder``: ``clip``, ``test``, ...); the other arguments are :class:`TaskArgs`."""
    return colbench_task("frontend", "reward", args, {"embedder": embedder, "human_image_mode": human_image_mode})


def colbench_task(domain_name: str, reward_key: str, args: dict[str, Any], own: dict[str, Any]) -> Task:
    """The Inspect task of one domain (``own``: the domain's own arguments, the env's options but the frontend's
    ``human_image_mode``): every argument checked now (colbench's one-line errors, printed by Inspect's CLI as its
    own; a misspelt name too, which Inspect itself would only warn of), one sample per ColBench task, whose input is
    the env's first observation, and in the task's metadata the run.json fields it fixes (``colbench report`` reads a
    log through them: ``report.inspect_log``)."""
    try:
        names = {f.name for f in fields(TaskArgs)}
        if set(args) - names:
            known = ", ".join(sorted(names | set(own)))
            raise ConfigError(f"unknown task argument(s) {', '.join(sorted(set(args) - names))}; known: {known}")
        given = TaskArgs(**args)
        human, limit = given.human, given.limit
        if human is None and HUMAN not in model_roles():
            needs = f"--model-role {HUMAN}=PROVIDER/MODEL (or -T {HUMAN}=PROVIDER/MODEL)"
            raise ConfigError(f"the simulated human needs a model: {needs}")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"limit must be an integer >= 1, got {limit!r}")
        domain = get_domain(domain_name)
        env_id = scoring_env(domain, given.env_id, "env_id")
        assert env_id is not None  # both domains' answers are scored by env ids
        spec = given.tasks or domain.default_tasks
        chosen = load_shared(spec)[:limit]
        env_options = {name: value for name, value in own.items() if name != "human_image_mode"}
        env_options.update(max_turns=given.max_turns, leak_policy=given.leak_policy, truth_policy=given.truth_policy)
        view = {"view": given.human_view, "specs": given.human_specs, "image_mode": own.get("human_image_mode")}
        shown: dict[str, Any] = {name: value for name, value in view.items() if value is not None}
        simulator = make_simulator(domain, ModelSpec.named(f"inspect:{HUMAN}"), client=RoleClient(HUMAN), **shown)

        def make_env() -> ColbenchEnv:
            env = gym.make(gym.spec(env_id), disable_env_checker=True, tasks=chosen, simulator=simulator, **env_options)
            assert isinstance(env.unwrapped, ColbenchEnv)
            return env.unwrapped

        env = make_env()  # the env's own checks of every option (and of the tasks' domain), now
        leaks = {"policy": str(env.leak_policy), "detector": domain.leak_detector, "threshold": domain.leak_threshold}
        truth = {
            "policy": str(env.truth_policy),
            "checker": env.claim_checker.name,
            "human_grounding": env.human_grounding,
        }
        run = {
            "env_id": env_id,
            "domain": domain_name,
            "max_turns": env.max_turns,
            "agent_prompt_sha256": domain.prompt_sha256("agent"),
            "tasks": {"spec": spec, "count": len(chosen)},
            "simulator": describe_simulator(domain, f"inspect:{HUMAN}", simulator),
            "scoring": domain.describe_scoring(env.scorer, chosen),
            "leaks": leaks,
            "truth": truth,
        }
        env.close()
        rows = prompt_rows(chosen, max_turns=env.max_turns)
    except ColbenchError as exc:
        raise PrerequisiteError(f"colbench/{domain_name}: {exc}") from None
    return Task(
        dataset=[Sample(id=row["task_id"], input=row["prompt"][0]["content"]) for row in rows],
        solver=colbench_dialogue(make_env),
        scorer=colbench_verdict(domain_name, reward_key),
        config=TEMPERATURE,
        model_roles={HUMAN: human} if human else None,
        metadata={RUN: run},
    )


class RoleClient(LLMClient):
    """An Inspect model role, asked as colbench's simulators ask any endpoint (``achat``, OpenAI-format messages),
    looked up in the running sample's context: the task's binding of the role (``--model-role`` wins over the task
    argument), Inspect's provider, retries and limits, and a model event in the sample's log for every call."""

    def __init__(self, role: str) -> None:
        super().__init__(Endpoint(model=f"inspect role {role}"))
        self.role = role

    async def achat(self, messages: Sequence[Message]) -> ChatReply:
        model = get_model(role=self.role, required=True)
        chat = await messages_from_openai(list(messages))  # type: ignore[arg-type]
        output = await model.generate(chat, config=TEMPERATURE.merge(model.config))
        if not output.completion.strip():  # as colbench's own client: an empty reply is the endpoint's fault
            raise LLMError(f"the {self.role} model {model} gave an empty reply (stop reason {output.stop_reason})")
        usage = output.usage
        spent = Usage(usage.input_tokens, usage.output_tokens, 1) if usage else Usage(calls=1)
        return ChatReply(output.completion, spent, finish_reason=output.stop_reason)

    def chat(self, messages: Sequence[Message]) -> ChatReply:
        raise ColbenchError("an Inspect model is asked from the running sample only (the env's astep)")


@solver
def colbench_dialogue(make_env: Callable[[], ColbenchEnv]) -> Solver:
    """The episode, turn by turn: each agent turn is Inspect's ``generate`` (the model under evaluation, on the
    conversation so far), each observation the env's (its prompt, then the human's replies), until the env ends it.
    Its verdict is left in the store for :func:`colbench_verdict`: the final step's, or 0 where one of Inspect's
    limits (messages, tokens, time) ended the episode before an answer (the agent's failure, as Inspect scores it).
    Any other error leaves none: the sample's error, never a score."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        env = make_env()
        reward, info = 0.0, dict[str, Any]()
        try:
            observation, info = await env.areset(options={"task_id": str(state.sample_id)})
            state.messages = [ChatMessageUser(content=observation)]
            while True:
                state = await generate(state)
                observation, reward, terminated, truncated, info = await env.astep(state.output.completion)
                if terminated or truncated:
                    break
                state.messages.append(ChatMessageUser(content=observation))
        except LimitExceededError:
            info = {**info, "termination": "inspect_limit"}
            raise
        finally:
            if info.get("termination") is not None:
                kept = ("env_id", "success", "termination", "leaks", "untrue_replies", "tests_passed", "tests_total")
                verdict = {key: info.get(key) for key in (*kept, "score", "answer")}
                verdict.update(reward=float(reward), turns=info.get("turn"), dialogue=[t.row() for t in env.dialogue])
                state.store.set(VERDICT, to_jsonable_python(verdict, fallback=repr))
            await env.aclose()
        return state

    return solve


@scorer(metrics={"*": [mean(), stderr()]})
def colbench_verdict(domain_name: str, reward_key: str) -> Scorer:
    """colbench's verdict on the sample's episode, as the env's scorer gave it: ``success`` (the env id's own rule)
    and the reward (``pass_rate`` for backend tasks: the fraction of tests passed; ``reward`` for frontend ones: the
    env's similarity or visual reward); the record's details in the metadata. A sample without a verdict (lost to
    an infrastructure error, scored under ``--score-on-error``) is unscored: left out of the metrics, never a 0."""

    domain = get_domain(domain_name)

    async def score(state: TaskState, target: Target) -> Score:
        verdict = state.store.get(VERDICT)
        if verdict is None:
            return Score.unscored(reason="scoring_failed", explanation="no verdict: the episode was lost")
        won = domain.success_of(verdict["reward"], verdict["success"], verdict["env_id"])
        details = {name: value for name, value in verdict.items() if name != "answer"}
        return Score(
            value={"success": float(won), reward_key: verdict["reward"]}, answer=verdict["answer"], metadata=details
        )

    return score
