"""TRL: ColBench as an ``environment_factory`` for ``GRPOTrainer``, the simulated human and the final answer as tools.

TRL 1.16 makes one instance of the factory's class per rollout (pooled and reused across steps), calls
``reset(**row)`` with the dataset row before generating, exposes every public method but ``reset`` as a tool (its
name, type hints and docstring become the JSON schema in the prompt), parses the model's tool calls from its
completion, runs them, and appends their results to the completion with a tool mask of 0: only the model's own
sampled tokens are trained on. ``ColbenchToolEnv`` holds one ColBench env (``gym.make`` of ``env_id`` with the usual
options) and plays the row's task (its ``task_id`` column, as ``colbench.prompt_dataset`` writes it):
``ask_human(question)`` is one agent turn answered by the simulated human, ``submit_answer(answer)`` is the final
turn, scored by the env's own final step (reward, success and leak flags are the env's).

    from colbench.integrations.chatml_tools import with_tool_calling
    from colbench.integrations.trl_environment import ColbenchToolEnv, environment_rewards
    factory = ColbenchToolEnv.factory("ColBench-Backend-v1", tasks="backend-sample", max_turns=4,
                                      simulator="openai:human", simulator_options={"base_url": "http://h:8001/v1"})
    trainer = GRPOTrainer(model=..., processing_class=with_tool_calling(tokenizer),
                          reward_funcs=environment_rewards("reward", "leak_penalty"),
                          train_dataset=prompt_dataset("backend-sample", max_turns=4),
                          environment_factory=factory, args=GRPOConfig(max_tool_calling_iterations=4, ...))

The rules: ``max_turns`` counts tool calls that reach the env (questions and the answer). A question on the last
turn is that turn: the env scores it as its answer at the turn cap, as it scores any agent at the cap, and the
episode is over. Once over, every call is refused with a message and nothing is scored again. A rollout that ends
without an answer (no tool call, or TRL's ``max_tool_calling_iterations`` / ``max_completion_length`` reached first)
scores 0 reward and 0 success: the policy failed, the env did not. An infrastructure failure (the human's endpoint
down after its retries, the sandbox down) ends the episode as lost: the tool says so, nothing raises out of the
rollout, and every reward function returns None for it, which TRL leaves out of the group baseline. Tested with trl
1.16.0 (the ``trl`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import colbench  # noqa: F401 (registers the ids)
from colbench.errors import ConfigError, InfraError
from colbench.integrations.trl import chosen
from colbench.types.dialogue import ANSWER_MARKER, MAX_TURNS, is_answer

#: What each reward function of ``environment_rewards`` returns per rollout (None for a lost episode).
REWARDS = {
    "reward": "the env's reward: fraction of tests passed (backend), CLIP cosine (frontend); 0 without an answer",
    "success": "1.0 when every test passed, else 0.0 (backend; None where the env reports no success)",
    "leak_penalty": "minus the number of simulated-human replies flagged as leaks (add it to penalise extraction)",
}

TOOL_NOTE = (
    "\n\nIn this session you talk to the person only through your tools: each call of ask_human (one question or a"
    " few) and the call of submit_answer (the complete Python code, which ends the session) is one of your turns."
    " Text outside tool calls reaches no one."
)
"""Appended to the row's prompt by ``reset``: the task prompt describes the text protocol (the answer marker)."""


@dataclass
class Outcome:
    """How a rollout's episode ended, as the reward functions read it. ``reward`` / ``success`` stay None until the
    env scores an answer; ``error`` is set when an infrastructure failure lost the episode."""

    task_id: str
    reward: float | None = None
    success: bool | None = None
    leaks: int = 0
    turns: int = 0
    termination: str | None = None
    error: str | None = None

    @property
    def over(self) -> bool:
        return self.termination is not None or self.error is not None


class ColbenchToolEnv:
    """One rollout's ColBench episode behind two tools (see the module docstring). Its public methods are its tools:
    TRL turns each into a tool, so everything else is private."""

    def __init__(self, env_id: str = "ColBench-Backend-v1", *, max_turns: int = MAX_TURNS, **env_kwargs: Any) -> None:
        self._env = gym.make(env_id, max_turns=max_turns, **env_kwargs)
        self._max_turns = max_turns
        self._outcome: Outcome | None = None

    @classmethod
    def factory(cls, env_id: str = "ColBench-Backend-v1", **kwargs: Any) -> Callable[[], ColbenchToolEnv]:
        """The ``environment_factory`` TRL calls with no arguments: each call makes an env with these options (TRL
        makes one when the trainer is built, so a bad option fails there)."""
        return lambda: cls(env_id, **kwargs)

    def reset(self, task_id: str | None = None, prompt: Any = None, **_row: Any) -> str:
        """Start the episode of the row's task; TRL appends the returned note to the row's prompt."""
        if task_id is None:
            raise ConfigError(
                "a dataset row has no task_id column: build the dataset with colbench.prompt_dataset(tasks, "
                "max_turns=...) of the env's tasks"
            )
        observation, _ = self._env.reset(options={"task_id": task_id})
        text = prompt[-1]["content"] if isinstance(prompt, list) and prompt else prompt
        if isinstance(text, str) and text != observation:
            raise ConfigError(
                f"the row of task {task_id} has another prompt than the env's: build the dataset with "
                f"colbench.prompt_dataset of the same tasks and max_turns={self._max_turns}"
            )
        self._outcome = Outcome(task_id=str(task_id))
        return TOOL_NOTE

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
        return self._turn(answer if is_answer(answer) else f"{ANSWER_MARKER}\n{answer}")

    # -- the episode ---------------------------------------------------------------------------------------------
    @property
    def outcome(self) -> Outcome:
        """The current rollout's outcome (reward functions read it)."""
        if self._outcome is None:
            raise ConfigError("ColbenchToolEnv: reset() has not been called (TRL calls it before each rollout)")
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
        if outcome.termination == "turn_limit":
            return "That was your last turn: the session is over and that message was scored as your answer."
        return "Answer received; the session is over."


def environment_rewards(*names: str) -> list[Callable[..., list[float | None]]]:
    """TRL reward functions reading each rollout's ``ColbenchToolEnv`` outcome, by name (``REWARDS``): ``reward``,
    ``success``, ``leak_penalty``. TRL sums them (weights: ``GRPOConfig.reward_weights``)."""
    made: dict[str, Callable[..., list[float | None]]] = {
        "reward": environment_reward,
        "success": environment_success,
        "leak_penalty": environment_leak_penalty,
    }
    return chosen(names, made)


def _outcomes(environments: Sequence[Any]) -> list[Outcome]:
    return [e.outcome for e in environments]


def environment_reward(environments: Sequence[Any], **_: Any) -> list[float | None]:
    """The env's reward of each rollout: 0.0 when it never answered, None when the episode was lost."""
    return [None if o.error else (o.reward if o.reward is not None else 0.0) for o in _outcomes(environments)]


def environment_success(environments: Sequence[Any], **_: Any) -> list[float | None]:
    """1.0 for a rollout whose answer passed every test, else 0.0; None when the episode was lost."""
    return [
        None if o.error or (o.termination is not None and o.success is None) else float(bool(o.success))
        for o in _outcomes(environments)
    ]


def environment_leak_penalty(environments: Sequence[Any], **_: Any) -> list[float | None]:
    """Minus the number of leaked replies: a policy that talks the human into dictating the answer loses reward."""
    return [None if o.error else float(-o.leaks) for o in _outcomes(environments)]
