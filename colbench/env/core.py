"""The episode every ColBench env runs, whatever its domain: task selection, the dialogue, the turn cap, ``info``,
text rendering (the contract of docs/episode.md).

A domain's env (``colbench/domains/<name>/env.py``) says how a turn ends the episode and how the final answer is
scored; the episode contract (seeded ``reset`` without LLM calls, the answer marker or the turn cap ending with
``terminated=True``, infrastructure errors raised and leaving the episode as it was) lives here once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, TypedDict

import gymnasium as gym
import numpy as np

from colbench.env.arg_checks import (
    check_bool,
    check_choice,
    check_endpoint_options,
    check_has,
    check_int,
    check_options,
    check_reset_options,
    check_seed,
    check_tasks,
    fail,
)
from colbench.env.claim_check import ClaimChecker, check
from colbench.env.domain import Domain, Scorer, get_domain
from colbench.env.simulators import make_simulator
from colbench.env.spaces import UnicodeText
from colbench.env.versions import env_id_for
from colbench.errors import ColbenchError, ConfigError
from colbench.humans.simulator import SimReply, Simulator
from colbench.types.chat import Message, Usage
from colbench.types.claims import RESAMPLE_NOTE as TRUTH_NOTE
from colbench.types.claims import Claim, Grounded, TruthCheck, TruthPolicy, parse_grounding, untrue
from colbench.types.dialogue import MAX_TURNS, Turn, is_answer
from colbench.types.leaks import REDACTED, RESAMPLE_NOTE, LeakCheck, LeakPolicy
from colbench.types.task import Task


@dataclass
class Episode:
    task: Task
    dialogue: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    done: bool = False

    @property
    def agent_turns(self) -> int:
        return sum(t.role == "agent" for t in self.dialogue)

    @property
    def leaks(self) -> int:
        """Human replies flagged as leaks so far (whatever the policy then did)."""
        return sum(bool(t.leak and t.leak.leak) for t in self.dialogue)

    @property
    def untrue_replies(self) -> int:
        """Human replies whose first draw held a false claim so far (whatever the policy then did)."""
        return sum(bool(t.truth and t.truth.untrue) for t in self.dialogue)


@dataclass(frozen=True)
class Transcript:
    """An episode as the learner lived it, for trainers: ``messages`` is its chat (each observation a ``user``
    message, each action an ``assistant`` message, in order), ``step_infos[k]`` the ``info`` of the step that took
    the k-th action, ``reset_info`` the ``info`` of the reset. An action is kept as it was given: a
    ``SampledText`` keeps the token ids (and log-probs) the policy sampled, which ``colbench.env.tokens`` trains on."""

    messages: tuple[Message, ...]
    reset_info: Mapping[str, Any]
    step_infos: tuple[Mapping[str, Any], ...]

    @property
    def done(self) -> bool:
        return bool(self.step_infos) and self.step_infos[-1].get("termination") is not None


class TextEnv(gym.Env[str, str]):
    """What every ColBench env shares: text actions and observations (``UnicodeText``), tasks loaded on first use
    (making an env must be cheap and offline), one task per episode, its dialogue, the learner's transcript
    (``transcript()``), ``areset`` beside ``reset``, and the ``ansi`` rendering. ``_episode`` is set by ``reset``;
    subclasses pass what ``reset`` and each completed step return through ``_began`` and ``_stepped``."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (Gymnasium's declared attribute)

    def __init__(self, tasks: str | Sequence[Task], render_mode: str | None) -> None:
        self.render_mode = check_choice(type(self).__name__, "render_mode", render_mode, (None, "ansi"))
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self._episode: Any = None
        self._transcript: tuple[list[Message], dict[str, Any], list[dict[str, Any]]] | None = None
        self._tasks_spec = tasks
        self._tasks: list[Task] | None = None if isinstance(tasks, str) else list(tasks)
        if self._tasks is not None:
            self._check_tasks(self._tasks)

    @property
    def tasks(self) -> list[Task]:
        if self._tasks is None:
            # task loaders (and the manifest's validation) only for tasks given by name
            from colbench.tasks.sources import load_shared

            assert isinstance(self._tasks_spec, str)
            tasks = load_shared(self._tasks_spec)
            self._check_tasks(tasks)
            self._tasks = tasks
        return self._tasks

    def _check_tasks(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            raise ConfigError("no tasks given")

    @property
    def task(self) -> Task:
        return self._require_episode().task  # type: ignore[no-any-return]

    @property
    def dialogue(self) -> tuple[Turn, ...]:
        return tuple(self._require_episode().dialogue)

    def _require_episode(self) -> Any:
        if self._episode is None:
            raise ColbenchError("call reset() before step()")
        return self._episode

    def _check_step(self, action: str) -> Any:
        """The episode a step continues, once the step's action is checked."""
        episode = self._require_episode()
        if episode.done:
            raise ColbenchError("episode is over: call reset() to start a new one")
        if not isinstance(action, str):
            raise ConfigError(f"action must be a str, got {type(action).__name__}")
        return episode

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._episode is None:
            return None
        return dialogue_text(self._episode.task, self._episode.dialogue)

    def shared_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """``kwargs`` (what this env was made with) for more copies of it that share its parts (the vector env makes
        its other sub-envs with them): the simulator or agent it made from a spec, so N episodes use one client,
        and the tasks it loaded."""
        shared = dict(kwargs)
        if self._tasks is not None:
            shared["tasks"] = self._tasks
        return shared

    def _reseed(self, seed: int | None, options: Any) -> dict[str, Any]:
        """``reset``'s first part: its arguments checked (one-line errors, an unknown option key is not ignored),
        the generator reseeded; the options as a dict."""
        where = type(self).__name__
        checked = check_reset_options(where, options)
        super().reset(seed=check_seed(where, seed))
        return checked

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """``reset`` for asyncio harnesses (an env whose reset calls a model awaits it here)."""
        return self.reset(seed=seed, options=options)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """``step`` for asyncio harnesses: model calls are awaited, scoring runs in a worker thread, so many envs
        step at once on one event loop; the contract is ``step``'s."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the async HTTP pools this env's model clients opened on the running loop (call it before that loop
        ends when you drive the env with ``astep``); then ``close``."""
        await self._aclose_models()
        self.close()

    async def _aclose_models(self) -> None:
        """Close the models this env talks to (its simulator, or its agent): ``aclose`` of their protocols."""

    def transcript(self) -> Transcript:
        """The current (or just finished) episode's chat and infos (``colbench.env.tokens`` turns it into token ids
        with the learner's mask)."""
        if self._transcript is None:
            raise ColbenchError("call reset() before transcript()")
        messages, reset_info, step_infos = self._transcript
        return Transcript(tuple(messages), reset_info, tuple(step_infos))

    def _began(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._transcript = ([{"role": "user", "content": observation}], info, [])
        return observation, info

    def _stepped(
        self, action: str, result: tuple[str, float, bool, bool, dict[str, Any]]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self._transcript is not None
        messages, _, step_infos = self._transcript
        observation, _, terminated, truncated, info = result
        messages.append({"role": "assistant", "content": action})
        if not (terminated or truncated):
            messages.append({"role": "user", "content": observation})
        step_infos.append(info)
        return result


class EnvOptions(TypedDict, total=False):
    """The keywords every ColBench env takes, whatever its domain (docs/episode.md, "Constructor"): a domain's env
    takes them as ``**options: Unpack[EnvOptions]`` and passes them on to ``ColbenchEnv.__init__``, which checks each
    (a one-line ``ConfigError`` naming the env, the argument and what it accepts).

    ``simulator_options``: what completes a simulator spec (``base_url``, ``api_key``, ``cache_dir``, ...; None with
    a ``Simulator`` object). ``max_turns``: agent turns per episode, the answer included (default ``MAX_TURNS``).
    ``expose_hidden``: put the hidden information in ``info`` (default False). ``leak_policy``, ``truth_policy``,
    ``human_grounding``: as ``ColbenchEnv`` says (defaults ``flag``, ``flag``, ``off``). ``render_mode``: None or
    ``ansi`` (``render()`` returns the dialogue as text).
    """

    simulator_options: dict[str, Any] | None
    max_turns: int
    expose_hidden: bool
    leak_policy: str | LeakPolicy
    truth_policy: str | TruthPolicy
    human_grounding: str
    render_mode: str | None


class ColbenchEnv(TextEnv):
    """One episode = one task; actions and observations are plain text (``UnicodeText``).

    Subclasses set ``domain_name`` and implement ``_finish`` (score the final turn with ``self.scorer``) and, where
    the simulator needs more than the dialogue, ``_human_reply``. ``scorer``: the domain's scorer to use (default:
    the process's shared one, ``Domain.shared_scorer``). ``leak_policy``: what happens to a human reply that gives
    the hidden information away, before the agent sees it (:mod:`colbench.types.leaks`; default ``flag``).
    ``truth_policy``: what happens to a human reply that says something false about the reference (its claims
    are checked by running it, :mod:`colbench.types.claims`; default ``flag``: recorded only).
    ``human_grounding``: ``off`` (default) or ``exec``: before the human answers, the reference's results on a few
    literal calls of the agent's turn are put in the human's instructions for that turn (never shown to the
    agent). Neither changes how answers are scored.
    """

    domain_name: ClassVar[str]

    def __init__(
        self,
        tasks: str | Sequence[Task] | None = None,
        simulator: str | Simulator = "scripted",
        *,
        simulator_options: dict[str, Any] | None = None,
        max_turns: int = MAX_TURNS,
        expose_hidden: bool = False,
        scorer: Scorer | None = None,
        leak_policy: str | LeakPolicy = "flag",
        truth_policy: str | TruthPolicy = "flag",
        human_grounding: str = "off",
        render_mode: str | None = None,
    ) -> None:
        where = type(self).__name__
        tasks = self.domain.default_tasks if tasks is None else tasks
        check_tasks(where, tasks, self.domain_name)
        self.max_turns = check_int(where, "max_turns", max_turns, minimum=1)
        self.expose_hidden = check_bool(where, "expose_hidden", expose_hidden)
        if not isinstance(leak_policy, str | LeakPolicy):
            fail(where, "leak_policy", leak_policy, "'off', 'flag', 'redact', 'resample:N' or a LeakPolicy")
        self.leak_policy = LeakPolicy.parse(leak_policy)
        if not isinstance(truth_policy, str | TruthPolicy):
            fail(where, "truth_policy", truth_policy, "'off', 'flag', 'resample', 'resample:N' or a TruthPolicy")
        self.truth_policy = TruthPolicy.parse(truth_policy)
        self.human_grounding = parse_grounding(human_grounding, f"{where}: human_grounding")
        options = check_options(where, "simulator_options", simulator_options)
        check_endpoint_options(where, "simulator_options", options)
        if not isinstance(simulator, str):
            check_has(where, "simulator", simulator, ("reply", "areply", "aclose"), "a simulator spec or a Simulator")
            if options:
                fail(where, "simulator_options", options, "None with a Simulator object (options are for a spec)")
        if scorer is not None:
            check_has(where, "scorer", scorer, ("score",), f"None or a {self.domain_name} Scorer")
        super().__init__(tasks, render_mode)
        # every argument is checked: only now may a model (the embedded one starts its server here) be touched
        self.simulator = make_simulator(self.domain, simulator, **options) if isinstance(simulator, str) else simulator
        self._scorer = scorer

    @cached_property
    def domain(self) -> Domain:
        """The env's domain, looked up once (its info and leak checks ask it on every step)."""
        return get_domain(self.domain_name)

    @cached_property
    def claim_checker(self) -> ClaimChecker:
        """The domain's claims checker, settling claims with this env's scorer (made only when a claim needs it)."""
        return self.domain.claim_checker(lambda: self.scorer)

    async def _aclose_models(self) -> None:
        await self.simulator.aclose()  # every client behind it (the spec human's writer's too)

    def shared_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        shared = super().shared_kwargs(kwargs)
        shared.pop("simulator_options", None)
        shared["simulator"] = self.simulator
        return shared

    @property
    def env_id(self) -> str | None:
        """The env id whose rules score this env's answers (``info["env_id"]``): the registered id of its scoring
        options (:mod:`colbench.env.versions`), so an env made with other options than its id's says so; for a
        domain whose envs are registered with Gymnasium alone, the id it was made as (None if made directly)."""
        return self._scoring_id or (self.spec.id if self.spec is not None else None)

    @cached_property
    def _scoring_id(self) -> str | None:
        """The registered id of this env's scoring options, found once (they are fixed when the env is made)."""
        return env_id_for(self.domain, self.scoring_options())

    def scoring_options(self) -> dict[str, Any]:
        """This env's values of its domain's ``scoring_kwargs`` (none by default)."""
        return {}

    @property
    def scorer(self) -> Scorer:
        """The scorer of final answers (made on first use: making an env must be cheap and offline)."""
        if self._scorer is None:
            self._scorer = self._default_scorer()
        return self._scorer

    def _default_scorer(self) -> Scorer:
        return self.domain.shared_scorer({})

    def _check_tasks(self, tasks: Sequence[Task]) -> None:
        super()._check_tasks(tasks)
        bad = next((t for t in tasks if t.domain != self.domain_name), None)
        if bad is not None:
            raise ConfigError(
                f"task {bad.task_id} ({bad.source}) is a {bad.domain} task; this env needs {self.domain_name} tasks"
            )

    def _require_episode(self) -> Episode:
        episode = super()._require_episode()
        assert isinstance(episode, Episode)
        return episode

    # -- the Gymnasium API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        options = self._reseed(seed, options)  # first: it reseeds np_random
        task = choose_task(self.tasks, self.np_random, options)
        self._episode = self._new_episode(task)
        return self._began(self.domain.agent_prompt(task, self.max_turns), self._info())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode: Episode = self._check_step(action)
        # Everything that can fail runs before the episode changes, so a step that raised can be retried.
        turn = self._agent_turn(episode, action)
        if self._is_final(episode, action):
            return self._ended(episode, turn, self._finish(episode, turn))
        grounding = self._grounding(episode, turn)
        asked = self._asked(turn, grounding)
        replies = [self._human_reply(episode, asked)]
        claims = [self._claims(episode, turn, replies[-1])]
        while (note := self._resample_note(episode, replies, claims)) is not None:
            replies.append(self._human_reply(episode, replace(asked, text=f"{asked.text}\n\n{note}")))
            claims.append(self._claims(episode, turn, replies[-1]))
        return self._answered(episode, turn, replies, claims, grounding)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode: Episode = self._check_step(action)
        turn = await self._aagent_turn(episode, action)
        if self._is_final(episode, action):
            return self._ended(episode, turn, await asyncio.to_thread(self._finish, episode, turn))
        grounding = await self._agrounding(episode, turn)
        asked = self._asked(turn, grounding)
        replies = [await self._ahuman_reply(episode, asked)]
        claims = [await self._aclaims(episode, turn, replies[-1])]
        while (note := self._resample_note(episode, replies, claims)) is not None:
            replies.append(await self._ahuman_reply(episode, replace(asked, text=f"{asked.text}\n\n{note}")))
            claims.append(await self._aclaims(episode, turn, replies[-1]))
        return self._answered(episode, turn, replies, claims, grounding)

    def _is_final(self, episode: Episode, action: str) -> bool:
        return is_answer(action) or episode.agent_turns + 1 >= self.max_turns

    def _ended(
        self, episode: Episode, turn: Turn, scored: tuple[float, dict[str, Any]]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        reward, details = scored
        episode.dialogue.append(turn)
        episode.done = True
        info = self._info()
        info.update(termination="answered" if is_answer(turn.text) else "turn_limit", answer=turn.text, **details)
        return self._stepped(turn.text, ("", reward, True, False, info))

    def _answered(
        self,
        episode: Episode,
        turn: Turn,
        replies: list[SimReply],
        claims: list[tuple[Claim, ...] | None],
        grounding: tuple[Grounded, ...],
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        for reply in replies:
            episode.usage.add(reply.usage)
        human = self._screened(episode, replies)
        if self.truth_policy.checked:
            draws = tuple((r.text, c or ()) for r, c in zip(replies, claims, strict=True))
            shown = len(replies) - 1 if human.text == replies[-1].text else None
            human = replace(human, truth=TruthCheck(draws, shown, grounding))
        episode.dialogue += [turn, human]
        self._turn_done(episode, turn)
        return self._stepped(turn.text, (human.text, 0.0, False, False, self._info()))

    # -- the leak policy: measured on every reply, applied before the agent sees it ----------------------------
    def _resample_note(
        self, episode: Episode, replies: Sequence[SimReply], claims: Sequence[tuple[Claim, ...] | None]
    ) -> str | None:
        """The note to ask the human again with: when the leak policy resamples and the last reply leaked, or the
        truth policy resamples and it said something false (each policy counts every draw of the turn)."""
        policy = self.leak_policy
        if (
            policy.mode == "resample"
            and len(replies) <= policy.retries
            and self.domain.leak_score(episode.task, replies[-1].text) >= self.domain.leak_threshold
        ):
            return f"({RESAMPLE_NOTE} Try {len(replies)} of {policy.retries}.)"
        truth = self.truth_policy
        last = claims[-1] or ()
        if truth.mode == "resample" and len(replies) <= truth.retries and untrue(last):
            wrong = "; ".join(f"you said {c.call} gives {c.stated}" for c in last if c.verdict == "false")
            return f"({TRUTH_NOTE.format(wrong=wrong)} Try {len(replies)} of {truth.retries}.)"
        return None

    # -- claims: checked on every reply (the reference settles them), grounding before the human answers ---------
    def _claims(self, episode: Episode, turn: Turn, reply: SimReply) -> tuple[Claim, ...] | None:
        """The reply's claims (None when not checked); the reference runs only when the reply makes a claim."""
        if not self.truth_policy.checked:
            return None
        return check(self.claim_checker, episode.task, reply.text, turn.text)

    async def _aclaims(self, episode: Episode, turn: Turn, reply: SimReply) -> tuple[Claim, ...] | None:
        if not self.truth_policy.checked:
            return None
        found = self.claim_checker.find(episode.task, reply.text, turn.text)  # on the host, cheap
        if not found:
            return ()
        settled = await asyncio.to_thread(self.claim_checker.settle, episode.task, [found])
        return settled[0]

    def _grounding(self, episode: Episode, turn: Turn) -> tuple[Grounded, ...]:
        if self.human_grounding != "exec":
            return ()
        return self.claim_checker.ground(episode.task, turn.text)

    async def _agrounding(self, episode: Episode, turn: Turn) -> tuple[Grounded, ...]:
        if self.human_grounding != "exec":
            return ()
        return await asyncio.to_thread(self.claim_checker.ground, episode.task, turn.text)

    @staticmethod
    def _asked(turn: Turn, grounding: Sequence[Grounded]) -> Turn:
        """The agent's turn as the human reads it: a grounded human's private note first, then the turn (facts
        before the question, as a prompt gives context; the dialogue keeps the turn as the agent wrote it, and the
        agent never sees the note)."""
        if not grounding:
            return turn
        told = "; ".join(g.told() for g in grounding)
        note = (
            "(A private note for you alone; the assistant cannot see it. You ran your function on the calls in the "
            f"message below: {told}. Answer with these true results; never say a value is right when it is not.)"
        )
        return replace(turn, text=f"{note}\n\n{turn.text}")

    def _screened(self, episode: Episode, replies: Sequence[SimReply]) -> Turn:
        """The human turn the agent gets: the reply as it came, a clean resample, or the redaction notice."""
        if not self.leak_policy.measured:
            return Turn("human", replies[-1].text)
        scores = [self.domain.leak_score(episode.task, reply.text) for reply in replies]
        flagged = [score >= self.domain.leak_threshold for score in scores]
        if not flagged[-1] or self.leak_policy.mode == "flag":
            action = "resampled" if len(replies) > 1 else "shown"
            text = replies[-1].text
        else:
            action, text = "redacted", REDACTED
        withheld = tuple(r.text for r, leaked in zip(replies, flagged, strict=True) if leaked and r.text != text)
        spans = self.domain.leak_spans(episode.task, replies[0].text) if scores[0] else []
        return Turn("human", text, leak=LeakCheck(tuple(scores), flagged[0], action, withheld, tuple(spans)))

    # -- what a domain decides -------------------------------------------------------------------------------
    def _new_episode(self, task: Task) -> Episode:
        return Episode(task=task)

    def _agent_turn(self, episode: Episode, action: str) -> Turn:
        """The agent's turn as the simulator sees it (must not change the episode)."""
        return Turn("agent", action)

    async def _aagent_turn(self, episode: Episode, action: str) -> Turn:
        return self._agent_turn(episode, action)

    def _human_reply(self, episode: Episode, turn: Turn) -> SimReply:
        return self.simulator.reply(episode.task, [*episode.dialogue, turn])

    async def _ahuman_reply(self, episode: Episode, turn: Turn) -> SimReply:
        return await self.simulator.areply(episode.task, [*episode.dialogue, turn])

    def _turn_done(self, episode: Episode, turn: Turn) -> None:
        """Called once a non-final turn has been answered (the step can no longer fail)."""

    def _finish(self, episode: Episode, turn: Turn) -> tuple[float, dict[str, Any]]:
        """Score the final turn: the reward and the ``info`` entries that describe the score."""
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:
        episode = self._require_episode()
        info: dict[str, Any] = {
            "env_id": self.env_id,
            "task_id": episode.task.task_id,
            "turn": episode.agent_turns,
            "termination": None,
            "usage": {"simulator": episode.usage.as_dict()},
        }
        last = episode.dialogue[-1] if episode.dialogue and episode.dialogue[-1].role == "human" else None
        if self.leak_policy.measured:
            check = last.leak if last is not None else None
            info.update(
                leak_score=check.score if check else None,
                leak=bool(check and check.leak),
                leak_action=check.action if check else None,
                leaks=episode.leaks,
            )
        if self.truth_policy.checked:
            truth = last.truth if last is not None else None
            info.update(
                claims=[c.as_dict() for c in truth.claims] if truth else [],
                untrue=bool(truth and truth.untrue),
                truth_action=truth.action if truth else None,
                untrue_replies=episode.untrue_replies,
            )
        if self.expose_hidden:
            info["hidden_information"] = episode.task.hidden_information
            info["ground_truth"] = episode.task.ground_truth
        return info


def choose_task(tasks: Sequence[Task], rng: np.random.Generator, options: Mapping[str, Any] | None) -> Task:
    """The task a reset starts: ``options["task_id"]`` (compared as a string), else one drawn with the env's
    seeded generator."""
    options = options or {}
    if "task_id" in options:
        wanted = str(options["task_id"])
        task = next((t for t in tasks if t.task_id == wanted), None)
        if task is None:
            raise ConfigError(f"reset(options={{'task_id': {wanted!r}}}): no such task in {len(tasks)} tasks")
        return task
    return tasks[int(rng.integers(len(tasks)))]


def dialogue_text(task: Task, dialogue: Sequence[Turn]) -> str:
    """The ``ansi`` rendering of an episode: the task id, then one line per turn."""
    return "\n".join([f"[task {task.task_id}]", *(f"{t.role}: {t.text}" for t in dialogue)])
