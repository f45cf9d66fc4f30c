"""TRL: ColBench as an ``environment_factory`` for ``GRPOTrainer``, the simulated human and the final answer as tools.

TRL 1.16 makes one instance of the factory's class per rollout (pooled and reused across steps), calls
``reset(**row)`` with the dataset row before generating, exposes every public method but ``reset`` and
``get_reward`` as a tool (its name, type hints and docstring become the JSON schema in the prompt), parses the
model's tool calls from its completion, runs them, and appends their results to the completion with a tool mask of
0: only the model's own sampled tokens are trained on. Each env holds one ColBench env (``gym.make`` of ``env_id``
with the usual options) and plays the row's task (its ``task_id`` column, as ``tool_dataset`` writes it):

- ``ColbenchToolEnv`` (backend): ``ask_human(question)`` is one agent turn answered by the simulated human,
  ``submit_answer(answer)`` the final turn;
- ``ColbenchPageToolEnv`` (frontend): ``show_page(page)`` shows the human a page (they compare its screenshot with
  the page they have in mind), ``submit_page(page)`` the final page.

The final turn is scored by the env's own final step (reward, success and leak flags are the env's).

The env owns its reward: ``get_reward()``, which TRL calls once per finished rollout and adds as a reward column of
its own (weight 1, logged as ``rewards/ColbenchToolEnv``), in ``GRPOTrainer`` and in ``AsyncGRPOTrainer`` alike
(the async trainer passes no ``environments=`` to reward functions: there ``get_reward`` is the only way in). So
the env's reward is never passed again as a reward function; ``environment_rewards("success", "leak_penalty")``
adds the others on top (``GRPOTrainer`` only).

    from colbench.integrations.chatml_tools import with_tool_calling
    from colbench.integrations.trl import DiagnosticsCallback
    from colbench.integrations.trl_environment import ColbenchToolEnv, environment_rewards, tool_dataset
    factory = ColbenchToolEnv.factory("ColBench-Backend-v2", tasks="backend-sample", max_turns=4,
                                      simulator="openai:human", simulator_options={"base_url": "http://h:8001/v1"})
    trainer = GRPOTrainer(model=..., processing_class=with_tool_calling(tokenizer),
                          reward_funcs=environment_rewards("leak_penalty"),
                          train_dataset=tool_dataset("backend-sample", max_turns=4),
                          environment_factory=factory, args=GRPOConfig(max_tool_calling_iterations=5, ...))
    DiagnosticsCallback.attach(trainer, factory)

The rules: ``max_turns`` counts tool calls that reach the env (questions and the answer). A question on the last
turn is that turn: the env scores it as its answer at the turn cap, as it scores any agent at the cap, and the
episode is over. Once over, every call is refused with a message and nothing is scored again. A rollout that ends
without an answer (no tool call, or TRL's ``max_tool_calling_iterations`` / ``max_completion_length`` reached first)
scores 0 reward and 0 success: the policy failed, the env did not. An infrastructure failure (the human's endpoint
down after its retries, the sandbox down) ends the episode as lost: the tool says so, nothing raises out of the
rollout, and ``get_reward`` and every reward function return None for it, which TRL leaves out of the group
baseline. Tested with trl 1.16.0 (the ``trl`` extra).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import colbench  # noqa: F401 (registers the ids)
from colbench._util.prompts import fill
from colbench.errors import ConfigError, InfraError
from colbench.integrations.diagnostics import EpisodeOutcome
from colbench.integrations.env_config import default_env_id
from colbench.integrations.trl import chosen, made_env
from colbench.tasks.sources import load_shared
from colbench.types.dialogue import ANSWER_MARKER, MAX_TURNS, after_marker, is_answer
from colbench.types.task import Task

if TYPE_CHECKING:
    import datasets

#: What each reward function of ``environment_rewards`` returns per rollout (None for a lost episode); the env's
#: reward itself is ``get_reward``, which TRL adds on its own.
REWARDS = {
    "success": "1.0 when every test passed, else 0.0 (backend; None where the env reports no success)",
    "leak_penalty": "minus the number of simulated-human replies flagged as leaks (add it to penalise extraction)",
}

_INTRO = {
    "backend": "You are working with a person who needs a Python function written for them. They know exactly what "
    "they want,\nbut their description below leaves things out, and only they can fill the gaps.\n\n",
    "frontend": "You are working with a person who needs a web page built for them. They have a clear picture of the "
    "page in mind,\nbut their description below leaves most of it out, and only they can fill the gaps.\n\n",
}
TOOL_PROMPTS = {
    "backend": _INTRO["backend"]
    + """You talk to the person only through your tools, and you have $max_turns turns in total: each call of
ask_human (one or a few short clarifying questions) is one turn, and so is the call of submit_answer. They will
answer briefly, in everyday words, and they may not know every detail. Ask about whatever would change what the
function returns: edge cases, input formats, rules, defaults, rounding, return types.

When you are ready, or at the latest in your last turn, call submit_answer with the complete Python code (imports
and helper functions included): that ends the session. Keep the function name and signature given in the
description. Your answer is judged by running hidden tests. Text outside tool calls reaches no one.

The person's request:
$problem_description""",
    "frontend": _INTRO["frontend"]
    + """You talk to the person only through your tools, and you have $max_turns turns in total: each call of
show_page is one turn, and so is the call of submit_page. Each takes ONE complete HTML page: a single
<html> ... </html> document styled with Tailwind CSS classes, including this stylesheet in it:
<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">
For images use only https://picsum.photos/id/48/WIDTH/HEIGHT (choose the width and height). No other
external resources will load, and scripts are not needed.

The person never reads your HTML: they see a screenshot of the page you show next to the page they have in mind,
and tell you the most important differences. Use their answers to bring your page closer to what they want.

When the page is right, or at the latest in your last turn, call submit_page with your final page: it is compared
with the page the person has in mind, and that ends the session. Text outside tool calls reaches no one.

The person's request:
$problem_description""",
}
"""The task prompt of the tools path, per domain: the benchmark's agent prompt with its text protocol (the answer
marker) replaced by the tools that carry it here, so the prompt and the tool schemas ask for the same thing."""


def tool_prompt(task: Task, max_turns: int) -> str:
    """The first user message of a tools rollout of ``task`` (``TOOL_PROMPTS`` of its domain)."""
    if task.domain not in TOOL_PROMPTS:
        raise ConfigError(
            f"task {task.task_id}: no tools for domain {task.domain!r} (expected one of backend, frontend)"
        )
    return fill(TOOL_PROMPTS[task.domain], problem_description=task.problem_description, max_turns=max_turns)


def tool_rows(
    tasks: str | Sequence[Task], *, max_turns: int = MAX_TURNS, environment: str | None = None
) -> list[dict[str, Any]]:
    """One row per task for the tools path: ``task_id``, ``domain``, ``prompt`` (``tool_prompt`` as a one-message
    chat), and ``environment`` when given: the name of its factory in ``environment_factory={name: factory}``, TRL's
    routing column when one run mixes environments. ``tasks``: a split name, a JSONL file, or tasks."""
    if max_turns < 1:
        raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
    rows = []
    for task in load_shared(tasks) if isinstance(tasks, str) else tasks:
        row: dict[str, Any] = {"task_id": task.task_id, "domain": task.domain}
        row["prompt"] = [{"role": "user", "content": tool_prompt(task, max_turns)}]
        rows.append(row if environment is None else {**row, "environment": environment})
    return rows


def tool_dataset(
    tasks: str | Sequence[Task], *, max_turns: int = MAX_TURNS, environment: str | None = None
) -> datasets.Dataset:
    """``tool_rows`` as a ``datasets.Dataset`` (``datasets.concatenate_datasets`` mixes several)."""
    import datasets

    return datasets.Dataset.from_list(tool_rows(tasks, max_turns=max_turns, environment=environment))


@dataclass
class Outcome:
    """How a rollout's episode ended, as the reward functions read it. ``reward`` / ``success`` stay None until the
    env scores an answer; ``error`` is set when an infrastructure failure lost the episode."""

    task_id: str
    reward: float | None = None
    success: bool | None = None
    leaks: int = 0
    turns: int = 0
    answer_chars: int = 0
    termination: str | None = None
    error: str | None = None

    @property
    def over(self) -> bool:
        return self.termination is not None or self.error is not None

    @property
    def env_reward(self) -> float | None:
        """What ``get_reward`` returns: None when lost, 0.0 when never answered, else the env's reward."""
        return None if self.error else (self.reward if self.reward is not None else 0.0)

    @property
    def scored_success(self) -> float | None:
        """1.0 / 0.0 (0.0 when never answered); None when lost or when the env reports no success."""
        if self.error or (self.termination is not None and self.success is None):
            return None
        return float(bool(self.success))

    def diagnosed(self) -> EpisodeOutcome:
        """The episode as the training diagnostics read it (no entropy: TRL's generation measures none)."""
        success = self.scored_success
        return EpisodeOutcome(
            reward=self.env_reward,
            success=None if success is None else bool(success),
            leaks=self.leaks,
            turns=self.turns,
            answer_chars=self.answer_chars,
            error=self.error,
        )


OUTCOME_BACKLOG = 10_000
"""Episodes a factory keeps for ``DiagnosticsCallback`` (the oldest dropped beyond it: nobody may be taking them,
as in AsyncGRPOTrainer's rollout process)."""


class ToolEnvFactory:
    """TRL's ``environment_factory``: called with no arguments, it makes an env with these options. A plain object,
    not a closure, because AsyncGRPOTrainer pickles it into its rollout process. The envs it makes report each
    finished episode here (``take_outcomes``, for ``DiagnosticsCallback``; in this process only)."""

    def __init__(self, cls: type[_ToolEnv], env_id: str | None, options: dict[str, Any]) -> None:
        self.cls, self.env_id, self.options = cls, env_id, options
        self.outcomes: deque[EpisodeOutcome] = deque(maxlen=OUTCOME_BACKLOG)

    def __call__(self) -> _ToolEnv:
        env = self.cls(self.env_id, **self.options)
        env._log = self.outcomes
        return env

    def take_outcomes(self) -> list[EpisodeOutcome]:
        """The episodes finished (scored by ``get_reward``) since the last call, oldest first."""
        taken = list(self.outcomes)
        self.outcomes.clear()
        return taken


class _ToolEnv:
    """One rollout's ColBench episode behind its domain's tools (the subclasses). Its public methods are its tools:
    TRL turns each into a tool, so everything else here is private, but ``reset`` and ``get_reward``."""

    domain = ""

    def __init__(self, env_id: str | None = None, *, max_turns: int = MAX_TURNS, **env_kwargs: Any) -> None:
        env_id = env_id or default_env_id(self.domain)
        self._env = made_env(env_id, max_turns=max_turns, **env_kwargs)
        made = self._env.unwrapped.domain.name  # type: ignore[attr-defined]
        if made != self.domain:
            other = next(c.__name__ for c in _TOOL_ENVS if c.domain == made)
            raise ConfigError(f"{env_id} is a {made} env: its tools are {other}'s, not {type(self).__name__}'s")
        self._max_turns = max_turns
        self._outcome: Outcome | None = None
        self._log: deque[EpisodeOutcome] | None = None
        self._reported = False

    @classmethod
    def factory(cls, env_id: str | None = None, **kwargs: Any) -> ToolEnvFactory:
        """The ``environment_factory`` TRL calls with no arguments: each call makes an env with these options (TRL
        makes one when the trainer is built, so a bad option fails there). Picklable (AsyncGRPOTrainer)."""
        return ToolEnvFactory(cls, env_id, kwargs)

    def reset(self, task_id: str | None = None, prompt: Any = None, **_row: Any) -> str | None:
        """Start the episode of the row's task. A row without a prompt (TRL allows it when the env owns the data)
        gets the task's tools prompt from here; a row with one must carry exactly it (``tool_dataset``)."""
        if task_id is None:
            raise ConfigError(
                "a dataset row has no task_id column: build the dataset with "
                "colbench.integrations.trl_environment.tool_dataset(tasks, max_turns=...) of the env's tasks"
            )
        self._outcome = None  # until the row is known good: no tool may play a refused row
        self._env.reset(options={"task_id": task_id})
        expected = tool_prompt(self._env.unwrapped.task, self._max_turns)  # type: ignore[attr-defined]
        text = prompt[-1]["content"] if isinstance(prompt, list) and prompt else prompt
        if text not in (None, "", expected):
            raise ConfigError(
                f"the row of task {task_id} has another prompt than the tools prompt: build the dataset with "
                f"colbench.integrations.trl_environment.tool_dataset of the same tasks and max_turns={self._max_turns}"
            )
        self._outcome, self._reported = Outcome(task_id=str(task_id)), False
        return expected if text in (None, "") else None

    def get_reward(self) -> float | None:
        """The env's reward of the rollout: None when an infrastructure failure lost it, 0.0 when it never
        answered. TRL calls it once per finished rollout (a reward column of weight 1); the episode is reported to
        the factory's diagnostics then, once."""
        outcome = self.outcome
        if self._log is not None and not self._reported:
            self._log.append(outcome.diagnosed())
            self._reported = True
        return outcome.env_reward

    # -- the episode ---------------------------------------------------------------------------------------------
    @property
    def outcome(self) -> Outcome:
        """The current rollout's outcome (reward functions read it)."""
        if self._outcome is None:
            raise ConfigError(f"{type(self).__name__}: reset() has not been called (TRL calls it before each rollout)")
        return self._outcome

    def _turn(self, action: str) -> str:
        outcome = self.outcome
        if outcome.error is not None:
            return "Refused: the session was lost to an infrastructure failure; nothing more is scored."
        if outcome.termination is not None:
            return "Refused: the session is over and your answer was already scored; nothing more is scored."
        try:
            observation, reward, terminated, truncated, info = self._env.step(action)
        except InfraError as exc:
            outcome.error = f"{type(exc).__name__}: {exc}"
            return "The session ended: the person (or the scorer) could not be reached. This episode is not scored."
        outcome.turns = int(info.get("turn") or 0)
        outcome.leaks = int(info.get("leaks") or 0)
        if not (terminated or truncated):
            return str(observation)
        outcome.termination = str(info.get("termination") or "truncated")
        outcome.reward = float(reward)
        outcome.success = None if info.get("success") is None else bool(info["success"])
        outcome.answer_chars = len(after_marker(action))
        if outcome.termination == "turn_limit":
            return "That was your last turn: the session is over and that message was scored as your answer."
        return "Answer received; the session is over."

    @staticmethod
    def _final(answer: str) -> str:
        return answer if is_answer(answer) else f"{ANSWER_MARKER}\n{answer}"


class ColbenchToolEnv(_ToolEnv):
    """A backend episode behind two tools, ``ask_human`` and ``submit_answer`` (see the module docstring)."""

    domain = "backend"

    def ask_human(self, question: str) -> str:
        """Ask the person one or a few short clarifying questions; this uses one of your turns.

        Args:
            question: The question(s) for the person, in plain words.

        Returns:
            The person's reply.
        """
        return self._turn(question)

    def submit_answer(self, answer: str) -> str:
        """Deliver your final answer: the complete Python code. This ends the session.

        Args:
            answer: The complete Python code, imports and helper functions included.

        Returns:
            Whether the answer was received.
        """
        return self._turn(self._final(answer))


class ColbenchPageToolEnv(_ToolEnv):
    """A frontend episode behind two tools, ``show_page`` and ``submit_page`` (see the module docstring)."""

    domain = "frontend"

    def show_page(self, page: str) -> str:
        """Show the person a page; they compare its screenshot with the page they have in mind. Uses one turn.

        Args:
            page: One complete HTML document (<html> ... </html>) styled with Tailwind CSS classes.

        Returns:
            The person's reply: the most important differences they see.
        """
        return self._turn(page)

    def submit_page(self, page: str) -> str:
        """Deliver your final page: it is compared with the page the person has in mind. This ends the session.

        Args:
            page: One complete HTML document (<html> ... </html>) styled with Tailwind CSS classes.

        Returns:
            Whether the page was received.
        """
        return self._turn(self._final(page))


_TOOL_ENVS: tuple[type[_ToolEnv], ...] = (ColbenchToolEnv, ColbenchPageToolEnv)


def environment_rewards(*names: str) -> list[Callable[..., list[float | None]]]:
    """TRL reward functions reading each rollout's env outcome, by name (``REWARDS``): ``success``,
    ``leak_penalty``, added to the env's reward that TRL takes from ``get_reward`` (weights:
    ``GRPOConfig.reward_weights``, one per function named here; ``get_reward``'s is 1). GRPOTrainer only: they read
    ``environments=``, which AsyncGRPOTrainer does not pass."""
    if "reward" in names:
        raise ConfigError(
            "reward functions: 'reward' is the env's get_reward, which TRL adds itself (weight 1, logged as "
            "rewards/ColbenchToolEnv): naming it here would count it twice"
        )
    made: dict[str, Callable[..., list[float | None]]] = {
        "success": environment_success,
        "leak_penalty": environment_leak_penalty,
    }
    return chosen(names, made)


def environment_success(environments: Sequence[Any], **_: Any) -> list[float | None]:
    """1.0 for a rollout whose answer passed every test, else 0.0; None when the episode was lost."""
    return [e.outcome.scored_success for e in environments]


def environment_leak_penalty(environments: Sequence[Any], **_: Any) -> list[float | None]:
    """Minus the number of leaked replies: a policy that talks the human into dictating the answer loses reward."""
    return [None if e.outcome.error else float(-e.outcome.leaks) for e in environments]
