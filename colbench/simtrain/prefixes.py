"""Dialogue prefixes: the places in a dialogue where the simulated human must reply next.

A prefix is a task and the turns before a human reply, ending with the agent's turn that reply answers: exactly
what the env hands its human (``ColbenchEnv._human_reply``: the dialogue so far, human turns as the agent saw
them). They come from two places:

- **run directories** (:func:`prefixes_from_runs`): every counted ``ok`` episode of any ``colbench eval``, read once
  through :func:`colbench.runs.load_run` (its record class validates every line); one prefix per agent turn that a
  human reply followed (the final answer is not one: nobody replies to it);
- **playing** (:func:`prefixes_by_playing`): an agent (any agent spec) against the human, through the env.

Identical prefixes (same :meth:`Prefix.key`) are folded into one whose ``weight`` counts them: how often the human
meets that situation, which the static evaluation weighs by.

:func:`split_by_reference` splits prefixes into train and held-out **by reference content, not by task id**: two
tasks with different ids but the same reference (whitespace aside) are one group, as are all prefixes of one task
id, so no reference and no task is on both sides. ``write_prefixes`` / ``read_prefixes``: one JSONL row a prefix,
the task row embedded, so a prefix file is all a later stage needs.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from colbench._util.storage import canonical_json, iter_jsonl, sha256_text
from colbench.agents.agent import EpisodeContext, make_agent
from colbench.env.core import ColbenchEnv
from colbench.env.domain import Domain, get_domain
from colbench.env.registration import env_definitions, register_envs
from colbench.env.simulators import make_simulator
from colbench.errors import ColbenchError, ConfigError, DataError
from colbench.probe.draws import DRAW_SEED, seeded
from colbench.runs import EpisodeRecord, load_run
from colbench.tasks.rows import task_from_row
from colbench.tasks.sources import load
from colbench.types.chat import Message
from colbench.types.dialogue import Turn, is_answer
from colbench.types.task import Task

KEY_CHARS = 16
"""Hex digits of a prefix's key: 64 bits, unique for any prefix set colbench will meet."""
ROLES = ("agent", "human")


@dataclass(frozen=True)
class Prefix:
    """One situation the human replies in: ``task`` and ``dialogue``, which ends with the agent turn the human
    answers. ``source``: where it was first seen (``run:<run dir>/<task_id>.<trial>#<agent turn>`` or
    ``played:<agent spec>``); ``weight``: how many times it was seen (identical prefixes folded)."""

    task: Task
    dialogue: tuple[Turn, ...]
    source: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.dialogue or self.dialogue[-1].role != "agent":
            raise ConfigError(f"prefix {self.source}: the dialogue must end with an agent turn (the human replies)")
        if not self.weight > 0:
            raise ConfigError(f"prefix {self.source}: weight must be > 0, got {self.weight}")

    def key(self) -> str:
        """A stable digest of what the human is shown and judged against: the reference, the hidden information,
        the description and the dialogue's roles and texts (not the task id, nor the source or weight)."""
        return sha256_text(
            canonical_json(
                {
                    "reference": self.task.ground_truth,
                    "hidden": self.task.hidden_information,
                    "description": self.task.problem_description,
                    "dialogue": [[t.role, t.text] for t in self.dialogue],
                }
            )
        )[:KEY_CHARS]

    @property
    def question(self) -> str:
        """The agent turn the human answers (what a claim in the reply may answer)."""
        return self.dialogue[-1].text

    def to_row(self) -> dict[str, Any]:
        """One JSONL row: the key (checked on reading), source, weight, the task row with its domain, the turns."""
        return {
            "key": self.key(),
            "source": self.source,
            "weight": self.weight,
            "task": {**self.task.to_row(), "domain": self.task.domain},
            "dialogue": [{"role": t.role, "text": t.text} for t in self.dialogue],
        }

    @classmethod
    def from_row(cls, row: Any, where: str = "<row>") -> Prefix:
        """The prefix of a row ``to_row`` wrote; a malformed one is a DataError naming ``where`` and the field."""
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        task_row = row.get("task")
        if not isinstance(task_row, dict):
            raise DataError(f"{where}: field 'task': expected the task's row (an object)")
        domain = task_row.get("domain")
        if domain is not None and not isinstance(domain, str):
            raise DataError(f"{where}: field 'task.domain': expected a string")
        task = task_from_row(task_row, domain=domain, where=f"{where}: task")
        source = row.get("source")
        if not isinstance(source, str) or not source:
            raise DataError(f"{where}: field 'source': expected a non-empty string")
        weight = row.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise DataError(f"{where}: field 'weight': expected a number > 0, got {weight!r}")
        dialogue = _turns(row.get("dialogue"), f"{where}: field 'dialogue'")
        if not dialogue or dialogue[-1].role != "agent":
            raise DataError(f"{where}: field 'dialogue': must end with an agent turn (the human replies next)")
        prefix = cls(task, dialogue, source, float(weight))
        key = row.get("key")
        if key is not None and key != prefix.key():
            raise DataError(f"{where}: field 'key': {key!r} is not this row's content ({prefix.key()}): edited?")
        return prefix


def _turns(raw: Any, where: str) -> tuple[Turn, ...]:
    if not isinstance(raw, list):
        raise DataError(f"{where}: expected a list of turns")
    turns = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("role") not in ROLES or not isinstance(item.get("text"), str):
            raise DataError(f"{where}[{i}]: expected {{'role': 'agent' | 'human', 'text': string}}")
        turns.append(Turn(item["role"], item["text"]))
    return tuple(turns)


def episode_prefixes(task: Task, turns: Sequence[Turn], source: str, limit: int | None = None) -> list[Prefix]:
    """The prefixes of one episode's turns: one per agent turn that a human reply followed (turn metadata, leak and
    truth records, dropped: the human never sees them); ``source`` gets ``#<agent turn>``; at most ``limit``, the
    first ones."""
    plain = [Turn(t.role, t.text) for t in turns]
    out: list[Prefix] = []
    agent_turns = 0
    for i, turn in enumerate(plain):
        if turn.role != "agent":
            continue
        agent_turns += 1
        if i + 1 < len(plain) and plain[i + 1].role == "human":
            out.append(Prefix(task, tuple(plain[: i + 1]), f"{source}#{agent_turns}"))
    return out if limit is None else out[:limit]


def folded(prefixes: Iterable[Prefix]) -> list[Prefix]:
    """Identical prefixes (same key) as one, weights summed, in order of first appearance (the first's source)."""
    out: dict[str, Prefix] = {}
    for prefix in prefixes:
        key = prefix.key()
        held = out.get(key)
        out[key] = prefix if held is None else replace(held, weight=held.weight + prefix.weight)
    return list(out.values())


def _text_domain(domain: Domain, where: str) -> None:
    if domain.renders_pages:
        raise ConfigError(f"{where}: {domain.name} humans are shown pages; simulator training takes text domains only")


# -- from run directories -----------------------------------------------------------------------------------------
def prefixes_from_runs(run_dirs: Sequence[Path], *, max_per_episode: int | None = None) -> list[Prefix]:
    """The prefixes of every counted ``ok`` episode of ``run_dirs`` (module docstring), folded; tasks from each
    run's snapshot (``tasks.jsonl``), else its run.json task spec. ``max_per_episode``: the first N of an episode."""
    if max_per_episode is not None and max_per_episode < 1:
        raise ConfigError(f"max_per_episode must be >= 1 or None, got {max_per_episode}")
    found: list[Prefix] = []
    for run_dir in run_dirs:
        run = load_run(run_dir)
        _text_domain(run.domain, str(run_dir))
        tasks = {t.task_id: t for t in _run_tasks(run_dir, run.snapshot_tasks(), run.tasks.spec)}
        for record in run.ordered_episodes():
            if record.ok:
                found += _record_prefixes(Path(run_dir).name, record, tasks, max_per_episode)
    return folded(found)


def _run_tasks(run_dir: Path, snapshot: list[Task] | None, spec: str | None) -> list[Task]:
    if snapshot is not None:
        return snapshot
    if not spec:
        raise DataError(f"{run_dir}: the run has no task snapshot and its run.json names no task spec")
    return load(spec)


def _record_prefixes(
    run_name: str, record: EpisodeRecord, tasks: Mapping[str, Task], limit: int | None
) -> list[Prefix]:
    task = tasks.get(record.task_id)
    if task is None:
        raise DataError(f"{record.where}: task {record.task_id!r} is not among the run's tasks")
    turns = [Turn(turn.role, turn.text) for turn in record.dialogue_turns]
    return episode_prefixes(task, turns, f"run:{run_name}/{record.task_id}.{record.trial}", limit)


# -- by playing ---------------------------------------------------------------------------------------------------
def env_domain(env_id: str) -> Domain:
    """The domain of a registered env id (a ConfigError listing the ids for an unknown one)."""
    definition = next((d for d in env_definitions() if d.id == env_id), None)
    if definition is None:
        known = ", ".join(d.id for d in env_definitions())
        raise ConfigError(f"env id {env_id!r}: unknown; the ids are {known}")
    return get_domain(definition.domain)


def prefixes_by_playing(
    tasks: Sequence[Task],
    *,
    env_id: str,
    agent: str,
    simulator: str,
    simulator_options: Mapping[str, Any],
    max_turns: int,
    seed: int,
    agent_options: Mapping[str, Any] | None = None,
    concurrency: int = 4,
) -> list[Prefix]:
    """Play each task once, ``agent`` (any agent spec, with ``agent_options``) against the human ``simulator``
    (a spec, with ``simulator_options`` as the env takes them) through ``env_id``'s env, and return the prefixes
    of the dialogues, folded. ``seed`` seeds each reset (``seed + i`` for task ``i``) and is the seed every human
    request carries (:class:`~colbench.probe.draws.SeededClient`), so a model human plays the same dialogues
    again. Leaks and claims are not policed here (``leak_policy="flag"``, ``truth_policy="off"``): every reply is
    shown as the human gave it."""
    if not tasks:
        raise ConfigError("prefixes_by_playing: no tasks")
    if max_turns < 2:
        raise ConfigError(f"max_turns must be >= 2 (a human reply needs a turn after it), got {max_turns}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    domain = env_domain(env_id)
    _text_domain(domain, env_id)
    wrong = next((t for t in tasks if t.domain != domain.name), None)
    if wrong is not None:
        raise ConfigError(f"task {wrong.task_id} is a {wrong.domain} task; {env_id} takes {domain.name} tasks")
    register_envs()
    human = make_simulator(domain, simulator, **dict(simulator_options))
    drawn, client = seeded(human)
    player = make_agent(agent, tasks=tasks, options=agent_options, answer_prefill=domain.answer_prefill)

    async def play_all() -> list[list[Turn]]:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int, task: Task) -> list[Turn]:
            async with gate:
                return await _play(env_id, task, drawn, player, max_turns, seed + i, domain.name)

        try:
            return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))
        finally:
            await player.aclose()
            await human.aclose()
            if client is not None:
                await client.aclose()

    token = DRAW_SEED.set(seed)  # asyncio.run copies this context: the human's requests carry the seed
    try:
        dialogues = asyncio.run(play_all())
    finally:
        DRAW_SEED.reset(token)
    found: list[Prefix] = []
    for task, turns in zip(tasks, dialogues, strict=True):
        found += episode_prefixes(task, turns, f"played:{agent}")
    return folded(found)


async def _play(env_id: str, task: Task, human: Any, agent: Any, max_turns: int, seed: int, domain: str) -> list[Turn]:
    """One episode, the eval player's loop (the agent's conversation: observations as user turns); its dialogue up
    to the final turn, which is not played (no human answers it: no prefix, and no answer to score)."""
    env = gym.make(
        gym.spec(env_id),
        disable_env_checker=True,
        tasks=[task],
        simulator=human,
        max_turns=max_turns,
        leak_policy="flag",
        truth_policy="off",
    ).unwrapped
    if not isinstance(env, ColbenchEnv):
        raise ConfigError(f"env {env_id!r} is not a ColBench env (the learner plays the agent there)")
    try:
        observation, info = env.reset(seed=seed, options={"task_id": task.task_id})
        messages: list[Message] = [{"role": "user", "content": observation}]
        while True:
            context = EpisodeContext(
                task_id=task.task_id, domain=domain, turn=int(info.get("turn", 0)) + 1, max_turns=max_turns
            )
            reply = await agent.aact(messages, context)
            if is_answer(reply.text) or context.turn >= max_turns:
                return list(env.dialogue)  # the final turn: nobody replies to it, and scoring it is not needed
            observation, _, terminated, truncated, info = await env.astep(reply.text)
            if terminated or truncated:
                return list(env.dialogue)
            messages += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": observation}]
    except ColbenchError as exc:
        raise type(exc)(f"task {task.task_id}: {exc}") from exc
    finally:
        env.close()


# -- the split ------------------------------------------------------------------------------------------------------
def reference_group(task: Task) -> str:
    """What identifies a task's reference across ids: the digest of its reference with whitespace collapsed."""
    return sha256_text(" ".join(task.ground_truth.split()))[:KEY_CHARS]


def split_by_reference(prefixes: Sequence[Prefix], *, held_out: float, seed: int) -> tuple[list[Prefix], list[Prefix]]:
    """Train and held-out prefixes: groups of prefixes sharing a reference (whitespace aside) or a task id, shuffled
    by ``seed``, go to held-out until it holds at least ``held_out`` of the prefixes (both sides get at least one
    group). No reference and no task id is on both sides (checked: a DataError if ever they were)."""
    if not 0 < held_out < 1:
        raise ConfigError(f"held_out must be a fraction between 0 and 1, got {held_out}")
    groups = groups_by_reference(prefixes)
    if len(groups) < 2:
        raise ConfigError(f"{len(prefixes)} prefixes share {len(groups)} reference(s): a split needs at least two")
    order = sorted(groups)  # the union-find roots, sorted: the same groups shuffle alike on every machine
    random.Random(seed).shuffle(order)
    wanted = held_out * len(prefixes)
    held: set[str] = set()
    count = 0
    for root in order[:-1]:  # the last group always trains
        if count >= wanted and held:
            break
        held.add(root)
        count += len(groups[root])
    train = [p for root in order if root not in held for p in groups[root]]
    test = [p for root in order if root in held for p in groups[root]]
    for name, side in (("reference", reference_group), ("task", lambda t: t.task_id)):
        shared = {side(p.task) for p in train} & {side(p.task) for p in test}
        if shared:
            raise DataError(f"split: {name} {sorted(shared)[0]} is on both sides")
    return _in_order(prefixes, train), _in_order(prefixes, test)


def _in_order(prefixes: Sequence[Prefix], chosen: Sequence[Prefix]) -> list[Prefix]:
    ids = {id(p) for p in chosen}
    return [p for p in prefixes if id(p) in ids]


def groups_by_reference(prefixes: Sequence[Prefix]) -> dict[str, list[Prefix]]:
    """Prefixes joined when they share a reference (whitespace aside) or a task id (union-find over both), by a
    stable name of each group: the units the split keeps apart and the evaluation's bootstrap resamples."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in prefixes:
        a, b = find("ref:" + reference_group(p.task)), find("id:" + p.task.task_id)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[Prefix]] = {}
    for p in prefixes:
        groups.setdefault(find("ref:" + reference_group(p.task)), []).append(p)
    return groups


# -- files ----------------------------------------------------------------------------------------------------------
def write_prefixes(path: str | Path, prefixes: Iterable[Prefix]) -> int:
    """Write one row a prefix (:meth:`Prefix.to_row`); the number written."""
    rows = [json.dumps(p.to_row(), ensure_ascii=False) + "\n" for p in prefixes]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(rows), encoding="utf-8")
    return len(rows)


def read_prefixes(path: str | Path) -> list[Prefix]:
    """The prefixes of a file ``write_prefixes`` wrote; a bad row is a one-line DataError naming ``file:line``."""
    prefixes = [Prefix.from_row(row, where) for where, row in iter_jsonl(path)]
    if not prefixes:
        raise DataError(f"{path}: no prefixes in the file")
    return prefixes
