"""A vector env whose sub-envs run in Ray actors across the cluster, behind Gymnasium's ``VectorEnv`` API.

For trainers whose learner sits on a GPU node while rollouts and scoring run on CPU nodes: ``RayVectorEnv(id,
num_envs=N)`` splits the N sub-envs into shards, one ColBench vector env (:mod:`colbench.env.vector`) per actor, each
on a node with the ``colbench_sandbox`` resource (its own sandbox pool or browser, its own simulator client). A
step sends each shard its slice of the actions at once and gathers the per-sub-env results into one batch:
observations, rewards, terminations, truncations and infos exactly as the local vector env gives them, with the same
seeds (``s + i``), options, autoreset modes and ``finished(i)``.

A shard whose actor is lost (its node died) loses the episodes it held, never a reward: those sub-envs return
``truncated=True``, reward 0 and ``info["error"]`` (drop truncated episodes from training, as with any
infrastructure error), and a new actor takes the shard over on a node with room; its sub-envs start again as
autoreset says (the next step resets them; ``same_step`` resets them at once; ``disabled`` waits for a masked
reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from colbench.env.core import Transcript
from colbench.env.spaces import UnicodeText
from colbench.env.vector import ColbenchVectorEnv, LoopThread, Step, Steps, autoreset_mode_of, options_for, seeds_for
from colbench.errors import ConfigError, InfraError
from colbench.ray.cluster import NodeActor, actor_options, connect, default_workers, lost_errors
from colbench.ray.workers import START_S, cause, wait_started


class VectorShard(NodeActor):
    """A slice of the sub-envs in one actor (``ray.remote`` is applied by :class:`RayVectorEnv`)."""

    def __init__(self, env_id: str, num_envs: int, autoreset_mode: str, env_kwargs: dict[str, Any]) -> None:
        env = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=autoreset_mode, **env_kwargs)
        if not isinstance(env, ColbenchVectorEnv):
            raise ConfigError(f"{env_id!r} has no ColBench vector env")
        self.env = env

    async def reset(
        self, seeds: list[int | None], options: list[dict[str, Any] | None], mask: np.ndarray
    ) -> dict[int, tuple[str, dict[str, Any]]]:
        return await self.env.areset_each(seeds, options, mask)

    async def step(self, actions: list[str]) -> list[Step]:
        return await self.env.astep_each(actions)

    def finished(self, index: int) -> Transcript | None:
        return self.env.finished(index)

    def mark_finished(self) -> None:
        self.env.mark_finished()

    async def close(self) -> None:
        await self.env.aclose()


class RayVectorEnv(VectorEnv[tuple[str, ...], tuple[str, ...], np.ndarray]):
    """``num_envs`` sub-envs of ``env_id`` over ``workers`` actors (default: one per ``colbench_sandbox`` unit, at
    most one per sub-env). ``address``: the cluster (None: what ``ray.init()`` picks; a process already connected
    stays on its cluster). ``env_kwargs`` go to every shard's ``gym.make_vec`` (specs, not objects: each node makes
    its own simulator and scorer)."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        workers: int | None = None,
        address: str | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        **env_kwargs: Any,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.num_envs = num_envs
        self.single_observation_space = UnicodeText()
        self.single_action_space = UnicodeText()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._ray = connect(address)
        count = min(workers or default_workers(self._ray), num_envs)
        bounds = np.linspace(0, num_envs, count + 1).astype(int)
        self._slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._remote = self._ray.remote(VectorShard).options(**actor_options(self._ray, max_concurrency=4))
        self._args = (env_id, self.autoreset_mode.value, env_kwargs)
        self._lost = lost_errors(self._ray)
        self._shards = [self._remote.remote(env_id, s.stop - s.start, *self._args[1:]) for s in self._slices]
        wait_started(self._ray, self._shards, "rollout worker")
        self._observations: list[str] = [""] * num_envs
        self.losses = 0
        self._runner = LoopThread("colbench-ray-vector")

    # -- the Gymnasium API ------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: Any = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        return self._runner.run(self.areset(seed=seed, options=options))

    def step(self, actions: Sequence[str]) -> Steps:
        return self._runner.run(self.astep(actions))

    async def areset(
        self, *, seed: int | Sequence[int | None] | None = None, options: Any = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """``reset`` on the caller's event loop."""
        seeds = seeds_for(seed, self.num_envs)
        per_env, mask = options_for(options, self.num_envs)
        calls = [
            (k, s, self._shards[k].reset.remote(seeds[s], per_env[s], mask[s]))
            for k, s in enumerate(self._slices)
            if mask[s].any()
        ]
        infos: dict[str, Any] = {}
        for k, s, ref in calls:
            try:
                done = await ref
            except self._lost as exc:
                raise InfraError(f"rollout worker {k} was lost during reset: {type(exc).__name__}") from None
            for i, (observation, info) in done.items():
                self._observations[s.start + i] = observation
                infos = self._add_info(infos, info, s.start + i)
        return tuple(self._observations), infos

    async def astep(self, actions: Sequence[str]) -> Steps:
        """``step`` on the caller's event loop: every shard steps at once."""
        if isinstance(actions, str) or len(actions) != self.num_envs:
            raise ConfigError(f"expected {self.num_envs} actions, got {actions!r:.80}")
        actions = list(actions)
        refs = [self._shards[k].step.remote(actions[s]) for k, s in enumerate(self._slices)]
        shard_results = await asyncio.gather(*(self._gathered(k, ref) for k, ref in enumerate(refs)))
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for s, results in zip(self._slices, shard_results, strict=True):
            for offset, (observation, reward, terminated, truncated, info) in enumerate(results):
                i = s.start + offset
                self._observations[i] = observation
                rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
                infos = self._add_info(infos, info, i)
        return tuple(self._observations), rewards, terminations, truncations, infos

    def finished(self, index: int) -> Transcript | None:
        """The transcript of sub-env ``index``'s last finished episode (None before one, or after its shard was
        lost)."""
        for k, s in enumerate(self._slices):
            if s.start <= index < s.stop:
                try:
                    done: Transcript | None = self._ray.get(self._shards[k].finished.remote(index - s.start))
                except self._lost:
                    return None
                return done
        raise IndexError(f"sub-env {index} out of range (num_envs={self.num_envs})")

    def close_extras(self, **kwargs: Any) -> None:
        for shard in self._shards:
            with contextlib.suppress(Exception):  # a shard lost with its node has nothing to close
                self._ray.get(shard.close.remote(), timeout=30)
            self._ray.kill(shard)
        self._runner.close()

    # -- losses -----------------------------------------------------------------------------------------------
    async def _gathered(self, k: int, ref: Any) -> list[Step]:
        try:
            results: list[Step] = await ref
            return results
        except self._lost as exc:
            return await self._take_over(k, f"rollout worker lost: {type(exc).__name__}")

    async def _take_over(self, k: int, error: str) -> list[Step]:
        """A new actor for shard ``k``; what its sub-envs return for the step whose episodes were lost."""
        self.losses += 1
        s = self._slices[k]
        n = s.stop - s.start
        shard = self._remote.remote(self._args[0], n, *self._args[1:])
        try:
            await asyncio.wait_for(shard.ready.remote(), START_S)
        except TimeoutError:
            raise InfraError(f"rollout worker {k} was lost; no node had room for another in {START_S:.0f}s") from None
        except Exception as exc:
            raise InfraError(f"rollout worker {k} was lost and its replacement failed: {cause(exc)}") from None
        self._shards[k] = shard
        lost: dict[str, Any] = {"error": error}
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            reset = await shard.reset.remote([None] * n, [None] * n, np.ones(n, dtype=np.bool_))
            final = {"final_obs": "", "final_info": lost}
            return [(reset[i][0], 0.0, False, True, {**reset[i][1], **final}) for i in range(n)]
        await shard.mark_finished.remote()
        return [("", 0.0, False, True, dict(lost)) for _ in range(n)]
