"""``ColBench-Backend-v0``: write a Python function with a simulated human, scored by sandboxed unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

import gymnasium as gym

from colbench.errors import ColbenchError, ConfigError
from colbench.llm import Usage
from colbench.sandbox import Sandbox, shared_sandbox
from colbench.scoring.backend import ANSWER_MARKER, BackendScorer
from colbench.simulator import Simulator, Turn, make_simulator
from colbench.spaces import UnicodeText
from colbench.tasks import Task

MAX_TURNS = 10
DEFAULT_TASKS = "backend-test"


def agent_prompt(task: Task, max_turns: int = MAX_TURNS) -> str:
    """The agent's first observation: instructions and the problem, never the hidden information."""
    template = resources.files("colbench.envs.backend").joinpath("prompts/agent.txt").read_text("utf-8")
    return Template(template).safe_substitute(problem_description=task.problem_description, max_turns=max_turns)


@dataclass
class _Episode:
    task: Task
    dialogue: list[Turn]
    usage: Usage
    done: bool = False


class BackendEnv(gym.Env[str, str]):
    """One episode = one task. Actions and observations are plain text (``UnicodeText``).

    ``step(text)`` ends the episode when ``text`` contains ``I WANT TO ANSWER:`` or when it is the
    ``max_turns``-th agent turn (then the whole text is the answer); the answer is scored and the reward is the
    fraction of judgeable tests passed. Otherwise the simulated human answers and that answer is the next
    observation. Infrastructure failures (sandbox, LLM endpoint) raise ``InfraError``: they are never a reward.

    ``simulator`` is a spec (``openai:MODEL``, ``scripted``) completed by ``simulator_options`` (``base_url``,
    ``api_key``, ``cache_dir``, ...), or any ``Simulator``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (Gymnasium's declared attribute)

    def __init__(
        self,
        tasks: str | Sequence[Task] = DEFAULT_TASKS,
        simulator: str | Simulator = "scripted",
        sandbox: str | Sandbox = "auto",
        *,
        simulator_options: dict[str, Any] | None = None,
        max_turns: int = MAX_TURNS,
        expose_hidden: bool = False,
        scorer: BackendScorer | None = None,
        render_mode: str | None = None,
    ) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode {render_mode!r} not supported; use 'ansi' or None")
        self._tasks_spec = tasks
        self._tasks: list[Task] | None = None if isinstance(tasks, str) else list(tasks)
        if self._tasks is not None:
            self._check_tasks(self._tasks)
        if isinstance(simulator, str):
            self.simulator = make_simulator(simulator, **(simulator_options or {}))
        elif simulator_options:
            raise ConfigError("simulator_options apply to a simulator spec string, not to a Simulator instance")
        else:
            self.simulator = simulator
        self._sandbox_spec = sandbox
        self._scorer = scorer
        self.max_turns = max_turns
        self.expose_hidden = expose_hidden
        self.render_mode = render_mode
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self._episode: _Episode | None = None

    # -- lazily built parts: making an env must be cheap and offline -------------------------------------------
    @property
    def tasks(self) -> list[Task]:
        if self._tasks is None:
            from colbench.hub import resolve_tasks

            assert isinstance(self._tasks_spec, str)
            tasks = resolve_tasks(self._tasks_spec)
            self._check_tasks(tasks)
            self._tasks = tasks
        return self._tasks

    @staticmethod
    def _check_tasks(tasks: Sequence[Task]) -> None:
        if not tasks:
            raise ConfigError("no tasks given")
        bad = next((t for t in tasks if t.domain != "backend"), None)
        if bad is not None:
            raise ConfigError(f"task {bad.task_id} ({bad.source}) is a {bad.domain} task; this env needs backend tasks")

    @property
    def scorer(self) -> BackendScorer:
        if self._scorer is None:
            spec = self._sandbox_spec
            self._scorer = BackendScorer(shared_sandbox(spec) if isinstance(spec, str) else spec)
        return self._scorer

    @property
    def task(self) -> Task:
        return self._require_episode().task

    @property
    def dialogue(self) -> tuple[Turn, ...]:
        return tuple(self._require_episode().dialogue)

    def _require_episode(self) -> _Episode:
        if self._episode is None:
            raise ColbenchError("call reset() before step()")
        return self._episode

    # -- the Gymnasium API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        tasks = self.tasks
        if "task_id" in options:
            wanted = str(options["task_id"])
            task = next((t for t in tasks if t.task_id == wanted), None)
            if task is None:
                raise ConfigError(f"reset(options={{'task_id': {wanted!r}}}): no such task in {len(tasks)} tasks")
        else:
            task = tasks[int(self.np_random.integers(len(tasks)))]
        self._episode = _Episode(task=task, dialogue=[], usage=Usage())
        obs = agent_prompt(task, self.max_turns)
        return obs, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode = self._require_episode()
        if episode.done:
            raise ColbenchError("episode is over: call reset() to start a new one")
        if not isinstance(action, str):
            raise ConfigError(f"action must be a str, got {type(action).__name__}")
        # An infrastructure error below leaves the episode as it was before this step, so the step can be retried.
        turn = 1 + sum(t.role == "agent" for t in episode.dialogue)
        if ANSWER_MARKER in action or turn >= self.max_turns:
            score = self.scorer.score(episode.task, action)
            episode.dialogue.append(Turn("agent", action))
            episode.done = True
            info = self._info()
            info.update(
                termination="answered" if ANSWER_MARKER in action else "turn_limit",
                answer=action,
                score=score.details(),
                success=score.success,
                pass_rate=score.pass_rate,
                tests_passed=score.tests_passed,
                tests_total=score.tests_total,
            )
            return "", float(score.pass_rate), True, False, info
        reply = self.simulator.reply(episode.task, [*episode.dialogue, Turn("agent", action)])
        episode.usage.add(reply.usage)
        episode.dialogue += [Turn("agent", action), Turn("human", reply.text)]
        return reply.text, 0.0, False, False, self._info()

    def _info(self) -> dict[str, Any]:
        episode = self._require_episode()
        info: dict[str, Any] = {
            "task_id": episode.task.task_id,
            "turn": sum(t.role == "agent" for t in episode.dialogue),
            "usage": {"simulator": episode.usage.as_dict()},
        }
        if self.expose_hidden:
            info["hidden_information"] = episode.task.hidden_information
            info["ground_truth"] = episode.task.ground_truth
        return info

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._episode is None:
            return None
        lines = [f"[task {self._episode.task.task_id}]"]
        lines += [f"{t.role}: {t.text}" for t in self._episode.dialogue]
        return "\n".join(lines)
