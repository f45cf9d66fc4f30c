"""``ColBench-Human-v0``: the learner plays the simulated human; an agent asks, and the learner must help it without
giving the hidden answer away.

This is the env a team needs to train a simulated human that does not leak (docs/leaks.md): the reward is what the
collaboration achieved, the agent's final score on the task, minus ``leak_penalty`` for every reply the domain's
leak detector flags. A human that dictates the reference gets the score and loses it again; a human that answers
in plain words gets the score the agent earns from them.

- ``reset`` picks a task and **calls the agent** for its first turn: the observation is the human's instructions
  (the domain's simulator prompt, with the hidden information) and the agent's first message.
- ``step(reply)``: the learner's reply, cut to the domain's reply length like any simulated human's, is scored
  for leaks and shown to the agent, which answers. When the agent delivers (``I WANT TO ANSWER:``) or reaches
  ``max_turns``, its answer is scored by the domain's scorer and the episode ends (``terminated=True``); else the
  observation is the agent's next message.
- An agent that delivers in its very first turn (before any reply) ends the episode on the next ``step``, whose
  reply the agent never reads.

``agent``: any agent spec (``openai:MODEL``, ``llamacpp``, ``module.path:Attr``, ``scripted:copycat``, ...) or an
``Agent``; ``agent_options`` its endpoint fields. Infrastructure failures raise ``InfraError``, never a reward.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.agents.agent import Agent, AgentReply, EpisodeContext, make_agent
from colbench.env.arg_checks import (
    check_endpoint_options,
    check_has,
    check_int,
    check_number,
    check_options,
    check_tasks,
    fail,
)
from colbench.env.core import Episode, TextEnv, choose_task
from colbench.env.domain import Domain, Score, Scorer, get_domain
from colbench.env.vector import ColbenchVectorEnv
from colbench.errors import ConfigError, InfraError
from colbench.humans.simulator import truncate
from colbench.llm.specs import parse_spec
from colbench.types.chat import Message
from colbench.types.dialogue import MAX_TURNS, Turn, is_answer
from colbench.types.leaks import LeakCheck
from colbench.types.task import Task

AGENT_SAYS = "The assistant says:"
DEFAULT_AGENT = "llamacpp"
DEFAULT_TASKS = "backend-test"


@dataclass
class _Episode(Episode):
    messages: list[Message] = field(default_factory=list)  # the agent's conversation: prompt, turns, human replies
    last_leak: LeakCheck | None = None  # the leak check of the reply the last step took

    @property
    def answer(self) -> str:
        return next(t.text for t in reversed(self.dialogue) if t.role == "agent")


class HumanEnv(TextEnv):
    """One episode = one task, the learner in the human's seat (see the module docstring).

    ``tasks``: a split name, a JSONL file or tasks of one domain (default: the backend test split).
    ``leak_penalty``: subtracted from the reward per flagged reply. ``scorer``: the domain's scorer to use
    (default: the process's shared one).
    """

    def __init__(
        self,
        tasks: str | Sequence[Task] | None = None,
        agent: str | Agent = DEFAULT_AGENT,
        *,
        agent_options: Mapping[str, Any] | None = None,
        max_turns: int = MAX_TURNS,
        leak_penalty: float = 1.0,
        scorer: Scorer | None = None,
        render_mode: str | None = None,
    ) -> None:
        where = type(self).__name__
        tasks = DEFAULT_TASKS if tasks is None else tasks
        check_tasks(where, tasks, None)
        self.max_turns = check_int(where, "max_turns", max_turns, minimum=1)
        self.leak_penalty = check_number(where, "leak_penalty", leak_penalty, minimum=0.0)
        options = check_options(where, "agent_options", agent_options)
        check_endpoint_options(where, "agent_options", options)
        if isinstance(agent, str):
            parse_spec(agent, "agent")  # a malformed spec fails here; the agent itself is made on first use
        else:
            check_has(where, "agent", agent, ("act", "aact", "aclose"), "an agent spec or an Agent")
            if options:
                fail(where, "agent_options", options, "None with an Agent object (options are for a spec)")
        if scorer is not None:
            check_has(where, "scorer", scorer, ("score",), "None or a Scorer")
        self._agent_spec = agent
        self._agent_options = options
        self._agent: Agent | None = None if isinstance(agent, str) else agent
        self._scorer = scorer
        super().__init__(tasks, render_mode)

    # -- what the env is made of, loaded on first use -------------------------------------------------------------
    def _check_tasks(self, tasks: Sequence[Task]) -> None:
        super()._check_tasks(tasks)
        domains = sorted({t.domain for t in tasks})
        if len(domains) > 1:
            raise ConfigError(f"ColBench-Human-v0 takes the tasks of one domain, got {', '.join(domains)}")

    @property
    def domain(self) -> Domain:
        return get_domain(self.tasks[0].domain)

    def shared_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        shared = super().shared_kwargs({**kwargs, "tasks": self.tasks})  # the agent is made for the loaded tasks
        shared.pop("agent_options", None)
        shared["agent"] = self.agent
        return shared

    async def _aclose_models(self) -> None:
        if self._agent is not None:  # never made: nothing opened
            await self._agent.aclose()

    @property
    def agent(self) -> Agent:
        if self._agent is None:
            assert isinstance(self._agent_spec, str)
            self._agent = _make_agent(self._agent_spec, self.tasks, self._agent_options)
        return self._agent

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            self._scorer = self.domain.shared_scorer({})
        return self._scorer

    def _require(self) -> _Episode:
        episode = self._require_episode()
        assert isinstance(episode, _Episode)
        return episode

    # -- the Gymnasium API ----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        episode = self._new_episode(seed, options)
        return self._opened(episode, self.agent.act(episode.messages, self._context(episode)))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        episode = self._new_episode(seed, options)
        return self._opened(episode, await self.agent.aact(episode.messages, self._context(episode)))

    def _new_episode(self, seed: int | None, options: dict[str, Any] | None) -> _Episode:
        options = self._reseed(seed, options)  # first: it reseeds np_random
        task = choose_task(self.tasks, self.np_random, options)
        return _Episode(task, messages=[{"role": "user", "content": self.domain.agent_prompt(task, self.max_turns)}])

    def _opened(self, episode: _Episode, reply: AgentReply) -> tuple[str, dict[str, Any]]:
        self._agent_said(episode, reply)
        self._episode = episode
        first = f"{self.domain.simulator_prompt(episode.task)}\n\n{AGENT_SAYS}\n{reply.text}"
        return self._began(first, self._info())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode, human = self._human_turn(action)
        if not self._agent_done(episode):
            messages = [*episode.messages, {"role": "user", "content": human.text}]
            reply = self.agent.act(messages, self._context(episode))
            if not self._answered(episode, human, messages, reply):
                return self._stepped(action, (reply.text, 0.0, False, False, self._info()))
        else:
            self._heard(episode, human)
        return self._stepped(action, self._final(episode, self.scorer.score(episode.task, episode.answer)))

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode, human = self._human_turn(action)
        if not self._agent_done(episode):
            messages = [*episode.messages, {"role": "user", "content": human.text}]
            reply = await self.agent.aact(messages, self._context(episode))
            if not self._answered(episode, human, messages, reply):
                return self._stepped(action, (reply.text, 0.0, False, False, self._info()))
        else:
            self._heard(episode, human)
        score = await asyncio.to_thread(self.scorer.score, episode.task, episode.answer)
        return self._stepped(action, self._final(episode, score))

    # -- the turns ------------------------------------------------------------------------------------------------
    def _context(self, episode: _Episode) -> EpisodeContext:
        return EpisodeContext(
            task_id=episode.task.task_id,
            domain=episode.task.domain,
            turn=episode.agent_turns + 1,
            max_turns=self.max_turns,
        )

    def _agent_said(self, episode: _Episode, reply: AgentReply) -> None:
        episode.usage.add(reply.usage)
        episode.messages.append({"role": "assistant", "content": reply.text})
        episode.dialogue.append(Turn("agent", reply.text))

    def _agent_done(self, episode: _Episode) -> bool:
        last = episode.dialogue[-1].text
        return is_answer(last) or episode.agent_turns >= self.max_turns

    def _human_turn(self, action: str) -> tuple[_Episode, Turn]:
        """The learner's reply as the agent will see it, scored for leaks (the episode is not changed yet)."""
        episode: _Episode = self._check_step(action)
        text = truncate(action, self.domain.max_reply_chars)
        score = self.domain.leak_score(episode.task, text)
        leaked = score >= self.domain.leak_threshold
        spans = tuple(self.domain.leak_spans(episode.task, text)) if score else ()
        return episode, Turn("human", text, leak=LeakCheck((score,), leaked, "shown", spans=spans))

    def _answered(self, episode: _Episode, human: Turn, messages: list[Message], reply: AgentReply) -> bool:
        """Take the human's reply and the agent's answer to it; whether the agent is now done (its answer is
        then scored)."""
        episode.messages = messages
        self._heard(episode, human)
        self._agent_said(episode, reply)
        return self._agent_done(episode)

    def _heard(self, episode: _Episode, human: Turn) -> None:
        episode.dialogue.append(human)
        episode.last_leak = human.leak

    def _final(self, episode: _Episode, score: Score) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode.done = True
        if not score.judged:
            raise InfraError(f"task {episode.task.task_id}: the agent's answer could not be judged ({score.status})")
        agent_score = float(score.reward)
        info = self._info()
        termination = "answered" if is_answer(episode.answer) else "turn_limit"
        info.update(
            agent_score=agent_score,
            success=score.success,
            score=score.details(),
            answer=episode.answer,
            termination=termination,
        )
        return "", agent_score - self.leak_penalty * episode.leaks, True, False, info

    def _info(self) -> dict[str, Any]:
        episode = self._require()
        check = episode.last_leak
        return {
            "task_id": episode.task.task_id,
            "turn": sum(t.role == "human" for t in episode.dialogue),
            "agent_turns": episode.agent_turns,
            "termination": None,
            "leak_score": check.score if check else None,
            "leak": bool(check and check.leak),
            "leaks": episode.leaks,
            "usage": {"agent": episode.usage.as_dict()},
        }


def _make_agent(spec: str, tasks: Sequence[Task], options: Mapping[str, Any]) -> Agent:
    """The agent of ``spec`` for ``tasks`` (of one domain: an embedded agent's answer starts in its format)."""
    if not tasks:  # no domain: the env's own check of its tasks says what is wrong
        return make_agent(spec, tasks=tasks, options=options)
    return make_agent(spec, tasks=tasks, options=options, answer_prefill=get_domain(tasks[0].domain).answer_prefill)


class HumanVectorEnv(ColbenchVectorEnv):
    """N ``HumanEnv`` episodes stepped together (``gym.make_vec``; :mod:`colbench.env.vector`): the agent's turns
    are in flight together."""

    env_class = HumanEnv
