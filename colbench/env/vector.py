"""ColBench's vector env: N episodes stepped together on one event loop, for RL rollout workers.

``gym.make_vec(id, num_envs=N)`` returns one (every id names its class as ``vector_entry_point``). A ColBench step
is I/O-bound (a simulated human's reply from an endpoint, an answer scored in a sandbox or a browser), so the
sub-envs are stepped concurrently with ``astep`` on one event loop instead of one after another (Gymnasium's sync
mode) or in N processes (its async mode, which also works): the simulator's calls are in flight together through
one client (one HTTP pool, one rate limit), and answers are scored by the process's shared scorer (one sandbox
pool, one reference cache).

``step`` / ``reset`` run that loop in a private thread, so they work from plain code and from inside a running
loop (a notebook); ``astep`` / ``areset`` are the same calls for trainers that drive their own event loop. Gymnasium
1.x autoreset semantics: ``next_step`` (default: the step after an episode ends resets that sub-env and ignores
its action), ``same_step`` (reset at once; the last observation and info go to ``final_obs`` / ``final_info``) or
``disabled`` (a finished sub-env takes ``None`` as its action and sits the step out until reset with
``options={"reset_mask": mask}``: batches of episodes of different lengths).

An infrastructure failure in one sub-env (an endpoint down past its retries, a sandbox that died) never stops the
others and is never a reward: that sub-env's step returns ``truncated=True``, reward 0 and ``info["error"]``;
drop truncated episodes from training. The transcript of each sub-env's last finished episode stays readable
(``finished(i)``) whatever the autoreset mode, for token export (:mod:`colbench.env.tokens`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, ClassVar, TypeVar

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from colbench.env.arg_checks import shown
from colbench.env.core import TextEnv, Transcript
from colbench.env.spaces import UnicodeText
from colbench.errors import ColbenchError, ConfigError, InfraError
from colbench.llm.specs import parse_spec

T = TypeVar("T")
Step = tuple[str, float, bool, bool, dict[str, Any]]
Steps = tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def autoreset_mode_of(mode: str | AutoresetMode) -> AutoresetMode:
    """Gymnasium's enum, or its name in any spelling: ``next_step``, ``NextStep``, ``same-step``, ``disabled``."""
    if isinstance(mode, AutoresetMode):
        return mode
    wanted = str(mode).replace("_", "").replace("-", "").lower()
    for member in AutoresetMode:
        if member.value.lower() == wanted:
            return member
    names = ", ".join(m.name.lower() for m in AutoresetMode)
    raise ConfigError(f"autoreset_mode {mode!r} unknown; expected one of {names}")


class LoopThread:
    """An event loop in a daemon thread: coroutines submitted from any thread (or from inside another running
    loop) run there, one loop for the vector env's lifetime, so HTTP pools bound to it stay usable."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on the loop; its future is done when it is."""
        return asyncio.run_coroutine_threadsafe(coro, self._started())

    @property
    def started(self) -> bool:
        return self._loop is not None

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class ColbenchVectorEnv(VectorEnv[tuple[str, ...], tuple[str, ...], np.ndarray]):
    """``num_envs`` sub-envs of ``env_class``, made with the same keyword arguments (tasks, simulator or agent
    specs are resolved once and shared: see ``TextEnv.shared_kwargs``). Observations and actions are tuples of
    strings; rewards, terminations and truncations numpy arrays; infos Gymnasium's dict of arrays with ``_key``
    masks. ``reset(options=...)`` takes one options dict for every sub-env (``{"task_id": ID}`` starts all N on
    one task, as group-relative methods want) or a list of N dicts."""

    env_class: ClassVar[type[TextEnv]]
    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["ansi"]}  # noqa: RUF012

    def __init__(
        self,
        num_envs: int = 1,
        *,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        # The first sub-env checks every argument (before any model or task is touched) and makes the parts the
        # others share: its simulator or agent (one client, its HTTP pool sized to N requests at once), its tasks.
        first = self.env_class(render_mode=render_mode, **pooled(env_kwargs, num_envs))
        shared = first.shared_kwargs(env_kwargs)
        self.envs: list[TextEnv] = [first] + [
            self.env_class(render_mode=render_mode, **shared) for _ in range(num_envs - 1)
        ]
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.single_observation_space = UnicodeText()
        self.single_action_space = UnicodeText()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._observations: list[str] = [""] * num_envs
        self._needs_reset = np.zeros(num_envs, dtype=np.bool_)
        self._finished: list[Transcript | None] = [None] * num_envs
        self._runner = LoopThread(f"colbench-vector-{type(self).__name__}")

    # -- the Gymnasium API ------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: Any = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        return self._runner.run(self.areset(seed=seed, options=options))

    def step(
        self, actions: Sequence[str]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        return self._runner.run(self.astep(actions))

    async def areset(
        self, *, seed: int | Sequence[int | None] | None = None, options: Any = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """``reset`` on the caller's event loop."""
        per_env, mask = options_for(options, self.num_envs)
        infos: dict[str, Any] = {}
        for i, (_, info) in (await self.areset_each(seeds_for(seed, self.num_envs), per_env, mask)).items():
            infos = self._add_info(infos, info, i)
        return tuple(self._observations), infos

    async def areset_each(
        self, seeds: Sequence[int | None], options: Sequence[dict[str, Any] | None], mask: np.ndarray
    ) -> dict[int, tuple[str, dict[str, Any]]]:
        """Reset the sub-envs ``mask`` selects, one seed and options each: their observation and info by index
        (the per-sub-env form a sharded vector env such as ``colbench.ray.RayVectorEnv`` gathers)."""
        chosen = [i for i in range(self.num_envs) if mask[i]]
        results = await asyncio.gather(*(self.envs[i].areset(seed=seeds[i], options=options[i]) for i in chosen))
        for i, (observation, _) in zip(chosen, results, strict=True):
            self._observations[i] = observation
            self._needs_reset[i] = False
        return dict(zip(chosen, results, strict=True))

    async def astep(self, actions: Sequence[str]) -> Steps:
        """``step`` on the caller's event loop: every sub-env steps concurrently."""
        results = await self.astep_each(actions)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, (_, reward, terminated, truncated, info) in enumerate(results):
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            infos = self._add_info(infos, info, i)
        return tuple(self._observations), rewards, terminations, truncations, infos

    async def astep_each(self, actions: Sequence[str]) -> list[Step]:
        """Step every sub-env concurrently: one ``(observation, reward, terminated, truncated, info)`` each."""
        actions = self._actions(actions)
        results = await asyncio.gather(*(self._step_one(i, action) for i, action in enumerate(actions)))
        for i, result in enumerate(results):
            self._observations[i] = result[0]
        return list(results)

    def mark_finished(self) -> None:
        """Treat every sub-env's episode as over (a replacement shard whose predecessor's episodes were lost):
        the next step resets them as autoreset says, or, with autoreset disabled, they wait for a masked reset."""
        self._needs_reset[:] = True

    def finished(self, index: int) -> Transcript | None:
        """The transcript of sub-env ``index``'s last finished episode (None before one has finished)."""
        return self._finished[index]

    def render(self) -> tuple[Any, ...] | None:
        """Each sub-env's ``ansi`` rendering (``render_mode="ansi"``)."""
        if self.render_mode != "ansi":
            return None
        return tuple(env.render() for env in self.envs)

    async def aclose(self) -> None:
        """``close`` for a vector env driven with ``astep`` on the caller's loop: the model clients' async HTTP
        pools opened on that loop are closed on it, before it ends."""
        await self._aclose_envs()
        self.close()

    def close_extras(self, **kwargs: Any) -> None:
        if self._runner.started:
            self._runner.run(self._aclose_envs())
        self._runner.close()
        for env in self.envs:
            env.close()

    async def _aclose_envs(self) -> None:
        for env in self.envs:  # sub-envs share their clients: the first closes them, the rest find them closed
            await env.aclose()

    # -- one sub-env --------------------------------------------------------------------------------------------
    async def _step_one(self, index: int, action: str) -> Step:
        env = self.envs[index]
        if self._needs_reset[index]:
            if self.autoreset_mode is AutoresetMode.DISABLED:  # a finished sub-env sits the step out
                return self._observations[index], 0.0, False, False, {}
            return await self._autoreset(index, (0.0, False, False), {})
        try:
            result = await env.astep(action)
        except InfraError as exc:
            result = ("", 0.0, False, True, {"error": f"{type(exc).__name__}: {exc}"})
        observation, reward, terminated, truncated, info = result
        if terminated or truncated:
            self._finished[index] = env.transcript()
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                extra = {"final_obs": observation, "final_info": info}
                return await self._autoreset(index, (reward, terminated, truncated), extra)
            self._needs_reset[index] = True
        return result

    async def _autoreset(self, index: int, outcome: tuple[float, bool, bool], extra: dict[str, Any]) -> Step:
        """The step result of sub-env ``index``'s automatic reset. A reset that fails (an env whose reset calls a
        model) comes back truncated with ``info["error"]`` and is tried again on the next step."""
        reward, terminated, truncated = outcome
        try:
            observation, info = await self.envs[index].areset()
        except InfraError as exc:
            self._needs_reset[index] = True
            return "", reward, terminated, True, {**extra, "error": f"{type(exc).__name__}: {exc}"}
        self._needs_reset[index] = False
        return observation, reward, terminated, truncated, {**extra, **info}

    # -- arguments ------------------------------------------------------------------------------------------------
    def _actions(self, actions: Sequence[str]) -> list[str]:
        if isinstance(actions, str):
            raise ConfigError(f"actions must be a sequence of {self.num_envs} strings, got one string")
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ConfigError(f"expected {self.num_envs} actions, got {len(actions)}")
        for i, action in enumerate(actions):
            if not isinstance(action, str) and not (self._needs_reset[i] and action is None):
                raise ConfigError(f"actions[{i}] must be a str, got {type(action).__name__}")
            if self._needs_reset[i] and action is not None and self.autoreset_mode is AutoresetMode.DISABLED:
                raise ColbenchError(
                    f"sub-env {i}'s episode is over and autoreset is disabled: give it None as its action, "
                    "or reset it with reset(options={'reset_mask': mask})"
                )
        return actions


def pooled(kwargs: Mapping[str, Any], num_envs: int) -> dict[str, Any]:
    """``kwargs`` whose model spec (``simulator`` or ``agent``, given as a string) keeps ``num_envs`` HTTP
    connections open: the N requests of a step go out at once, none waits for a connection and none opens one
    anew every step (the openai client's default keeps 100 alive). A ``max_connections`` the caller set stays."""
    out = dict(kwargs)
    for role, options in (("simulator", "simulator_options"), ("agent", "agent_options")):
        spec, given = out.get(role), out.get(options) or {}
        if isinstance(spec, str) and isinstance(given, Mapping) and _is_model(spec, role):
            out[options] = {"max_connections": num_envs, **given}
    return out


def _is_model(spec: str, role: str) -> bool:
    try:
        return parse_spec(spec, role).is_model
    except ConfigError:  # the sub-env's own check reports it, with the env's name
        return False


def seeds_for(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    """One seed per sub-env: ``s + i`` for an int, as Gymnasium's vector envs do."""
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        return [int(seed) + i for i in range(num_envs)]
    if not isinstance(seed, Sequence | np.ndarray) or isinstance(seed, str | bytes):
        raise ConfigError(f"reset(seed={shown(seed)}): expected an integer, {num_envs} seeds or None")
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ConfigError(f"reset(seed=[...]): expected {num_envs} seeds, got {len(seeds)}")
    return seeds


def options_for(options: Any, num_envs: int) -> tuple[list[dict[str, Any] | None], np.ndarray]:
    """One options dict per sub-env and the reset mask (``options['reset_mask']``; all True without one)."""
    mask = np.ones(num_envs, dtype=np.bool_)
    if options is None:
        return [None] * num_envs, mask
    if isinstance(options, Mapping):
        options = dict(options)
        if "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.dtype != np.bool_ or mask.shape != (num_envs,) or not mask.any():
                raise ConfigError(
                    f"reset(options={{'reset_mask': ...}}): expected a bool array of shape ({num_envs},) "
                    f"with at least one True, got {mask!r}"
                )
        return [options or None] * num_envs, mask
    per_env = list(options)
    if len(per_env) != num_envs or not all(o is None or isinstance(o, Mapping) for o in per_env):
        raise ConfigError(f"reset(options=[...]): expected {num_envs} dicts (or None), got {options!r}")
    return [dict(o) if o else None for o in per_env], mask
