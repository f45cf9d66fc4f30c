"""TRL: multi-turn ColBench rollouts for ``GRPOTrainer(rollout_func=...)``, reward functions and diagnostics.

TRL's ``rollout_func(prompts, trainer)`` receives the prompts of one step (each repeated ``num_generations`` times by
TRL's sampler) and returns token ids. ``ColbenchRollout`` plays each prompt's task as a whole ColBench episode: the
policy (the trainer's own model, or any ``generate`` you pass, e.g. a vLLM server) writes the agent's turns, the
simulated human (its own endpoint: ``simulator`` / ``simulator_options``) answers, the answer is scored. Each episode
comes back as ``prompt_ids`` (the task prompt up to the first agent turn), ``completion_ids`` (every turn after it,
the human's included, up to the agent's last end-of-turn token) and ``env_mask`` (1 on the tokens the policy
sampled, 0 on the human's and the template's: TRL then computes no loss on them), plus the episode's outcome as
extra fields that TRL forwards to the reward functions below.

Token in, token out: every turn is generated from the ids of the conversation so far as sampled
(``colbench.env.tokens.ChatTokens``), and the ids trained on are the ids the policy sampled, never a re-tokenization
of its text. The env still gets text: each action is a ``SampledText`` (:mod:`colbench.types.sampled`).

    from colbench.integrations.trl import ColbenchRollout, DiagnosticsCallback, reward_functions
    from colbench import prompt_dataset
    rollout = ColbenchRollout("ColBench-Backend-v2", tasks="backend-sample", simulator="openai:human",
                              simulator_options={"base_url": "http://127.0.0.1:8001/v1"}, max_turns=4)
    trainer = GRPOTrainer(model=..., reward_funcs=reward_functions("reward"), train_dataset=prompt_dataset(
        "backend-sample", max_turns=4), rollout_func=rollout, callbacks=[DiagnosticsCallback(rollout)],
        args=GRPOConfig(...))

The dataset must be ``colbench.prompt_dataset`` of the same tasks and ``max_turns``: a prompt is matched to its
task by its text. Tested with trl 1.16.0 (the ``trl`` extra).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
from transformers import TrainerCallback

import colbench  # noqa: F401 (registers the ids)
from colbench.env.dataset import prompt_rows
from colbench.env.tokens import ChatTokens
from colbench.env.vector import ColbenchVectorEnv
from colbench.errors import ConfigError
from colbench.integrations.diagnostics import EpisodeOutcome, step_metrics
from colbench.integrations.env_config import default_env_id
from colbench.tasks.sources import load_shared
from colbench.types.dialogue import MAX_TURNS, after_marker
from colbench.types.sampled import SampledText

Generate = Callable[[list[tuple[int, ...]], Any], list[SampledText]]
"""``generate(contexts, trainer) -> turns``: for each context (the token ids to generate the agent's next turn
from: the conversation so far as sampled and the next turn's header), the turn the policy sampled, as a
``SampledText``: its decoded text, the ids sampled (ending with the end-of-turn token when the policy emitted one),
their log-probs under the sampling distribution if known, ``truncated=True`` when cut at the token limit, and
optionally the mean token entropy (for the diagnostics). A vLLM server, say: prompt token ids in, ``token_ids``
and ``logprobs`` out."""

#: What each reward function returns per completion, from the episode's outcome (extra fields of the rollout).
REWARDS = {
    "reward": "the env's reward: fraction of tests passed (backend), CLIP cosine (frontend)",
    "success": "1.0 when every test passed, else 0.0 (backend)",
    "leak_penalty": "minus the number of simulated-human replies flagged as leaks (add it to penalise extraction)",
}


@dataclass
class _Episode:
    """One episode of a rollout as it is played: its ids so far, the turns sampled, and once over its outcome."""

    chat: ChatTokens
    turns: list[SampledText] = field(default_factory=list)
    outcome: dict[str, Any] | None = None


class ColbenchRollout:
    """A TRL ``rollout_func``: each prompt played as a ColBench episode (see the module docstring).

    ``env_id`` and ``env_kwargs`` make the env (``tasks``, ``simulator``, ``simulator_options``, ``sandbox``,
    ``leak_policy``, ...); ``max_turns`` must match the dataset's. ``turn_tokens``: new tokens per agent turn.
    ``generate``: the policy (``Generate``; default: the trainer's model with its generation config, sampling as
    TRL does, with log-probs and entropies from the sampling distribution). ``outcomes`` holds the episodes played
    since ``DiagnosticsCallback`` last took them (``take_outcomes``).

    Lengths: TRL's ``max_completion_length`` does not apply here (TRL only passes it to its own generation): an
    episode's completion is up to ``max_turns`` agent turns of at most ``turn_tokens`` each, plus the human's replies
    and the template's headers between them, and it is never cut, because a cut episode would be trained on turns
    the env never scored. Bound it with ``max_turns`` and ``turn_tokens`` (and the human's reply cap).
    """

    def __init__(
        self,
        env_id: str | None = None,
        *,
        tasks: str = "backend-test",
        max_turns: int = MAX_TURNS,
        turn_tokens: int = 256,
        generate: Generate | None = None,
        **env_kwargs: Any,
    ) -> None:
        if turn_tokens < 1:
            raise ConfigError(f"turn_tokens must be >= 1, got {turn_tokens}")
        # One env made and closed now (milliseconds: nothing is started before an episode), so that a bad split, a
        # misspelt option or a bogus sandbox fails here, before the trainer loads a model, not at its first step.
        env_id = env_id or default_env_id()
        made_env(env_id, tasks=tasks, max_turns=max_turns, **env_kwargs).close()
        self.env_id, self.tasks, self.max_turns = env_id, tasks, max_turns
        self.turn_tokens = turn_tokens
        self.generate = generate or self._generate_with_trainer
        self.env_kwargs = env_kwargs
        self.outcomes: list[EpisodeOutcome] = []
        self.trainer: Any = None
        self._task_of_prompt: dict[str, str] | None = None

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        task_ids = [self._task_id(prompt) for prompt in prompts]
        self.trainer = trainer
        vec = gym.make_vec(
            self.env_id,
            num_envs=len(task_ids),
            autoreset_mode="disabled",
            tasks=self.tasks,
            max_turns=self.max_turns,
            **self.env_kwargs,
        )
        try:
            assert isinstance(vec, ColbenchVectorEnv)
            episodes = self._play(vec, task_ids, trainer.processing_class, trainer)
        finally:
            vec.close()
        return self._as_tokens(episodes, task_ids)

    # -- one step's episodes -------------------------------------------------------------------------------------
    def _play(self, vec: Any, task_ids: list[str], tokenizer: Any, trainer: Any) -> list[_Episode]:
        n = len(task_ids)
        observations, _ = vec.reset(options=[{"task_id": t} for t in task_ids])
        episodes = [_Episode(ChatTokens(tokenizer)) for _ in task_ids]
        for episode, observation in zip(episodes, observations, strict=True):
            episode.chat.add({"role": "user", "content": observation})
        while active := [i for i in range(n) if episodes[i].outcome is None]:
            turns = self.generate([episodes[i].chat.generation_ids() for i in active], trainer)
            if len(turns) != len(active) or not all(isinstance(t, SampledText) for t in turns):
                raise ConfigError(
                    f"generate must return one SampledText per context ({len(active)}), got "
                    f"{[type(t).__name__ for t in turns]}"
                )
            given = dict(zip(active, turns, strict=True))  # the others are over: None, as the vector env wants
            observations, rewards, terminated, truncated, infos = vec.step([given.get(i) for i in range(n)])
            for i, turn in given.items():
                episode = episodes[i]
                episode.turns.append(turn)
                # A turn the env lost (the human's endpoint or the sandbox failed) is kept as sampled, untrained.
                episode.chat.add({"role": "assistant", "content": turn})
                if terminated[i] or truncated[i]:
                    episode.outcome = _outcome(float(rewards[i]), bool(truncated[i]), infos, i)
                else:
                    episode.chat.add({"role": "user", "content": observations[i]})
        return episodes

    def _as_tokens(self, episodes: list[_Episode], task_ids: list[str]) -> dict[str, Any]:
        prompt_ids, completion_ids, env_mask, logprobs = [], [], [], []
        for episode in episodes:
            assert episode.outcome is not None
            tokens = episode.chat.episode()
            cut = tokens.learner_turns[0].start
            lost = episode.outcome["colbench_error"] is not None
            prompt_ids.append(list(tokens.input_ids[:cut]))
            completion_ids.append(list(tokens.input_ids[cut:]))
            env_mask.append([0 if lost else m for m in tokens.agent_mask[cut:]])
            logps: list[float | None] = [None] * (len(tokens) - cut)
            for span, turn in zip(tokens.learner_turns, episode.turns, strict=True):
                for k, logp in enumerate(turn.logprobs or ()):
                    logps[span.start - cut + k] = logp
            logprobs.append(logps if all(t.logprobs is not None for t in episode.turns) else None)
            episode.outcome["colbench_turns"] = len(episode.turns)  # the agent turns played, the lost one included
            episode.outcome["colbench_entropy"] = [t.entropy for t in episode.turns]
            episode.outcome["colbench_answer_chars"] = len(after_marker(episode.turns[-1]))
            self.outcomes.append(_diagnosed(episode.outcome))
        outcomes = [e.outcome for e in episodes if e.outcome is not None]
        extra = {key: [o[key] for o in outcomes] for key in outcomes[0]} if outcomes else {}
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            # The sampling log-prob of each policy token (None on the others, which TRL reads as unknown): TRL uses
            # them for its importance-sampling correction; None when the policy did not give them.
            "logprobs": logprobs if all(lp is not None for lp in logprobs) else None,
            "env_mask": env_mask,
            "task_id": task_ids,
            **extra,
        }

    def _task_id(self, prompt: Any) -> str:
        text = prompt[-1]["content"] if isinstance(prompt, list) else prompt
        if self._task_of_prompt is None:  # the prompts prompt_dataset writes, by their text
            rows = prompt_rows(load_shared(self.tasks), max_turns=self.max_turns, conversational=False)
            self._task_of_prompt = {row["prompt"]: row["task_id"] for row in rows}
        if not isinstance(text, str) or text not in self._task_of_prompt:
            raise ConfigError(
                f"a prompt does not match any task of {self.tasks!r} with max_turns={self.max_turns}: build the "
                "dataset with colbench.prompt_dataset(tasks, max_turns=...) of the same tasks and turn cap"
            )
        return self._task_of_prompt[text]

    def take_outcomes(self) -> list[EpisodeOutcome]:
        """The episodes played since the last call (``DiagnosticsCallback`` takes them), oldest first."""
        taken, self.outcomes = self.outcomes, []
        return taken

    # -- the default policy: the trainer's model -----------------------------------------------------------------
    def _generate_with_trainer(self, contexts: list[tuple[int, ...]], trainer: Any) -> list[SampledText]:
        import torch

        tokenizer = trainer.processing_class
        width = max(len(c) for c in contexts)
        pad = tokenizer.pad_token_id
        device = trainer.accelerator.device
        input_ids = torch.tensor([[pad] * (width - len(c)) + list(c) for c in contexts], device=device)
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
        with _generation_model(trainer) as model, torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                generation_config=trainer.generation_config,
                max_new_tokens=self.turn_tokens,
                pad_token_id=pad,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[:, width:]
        # The distribution each token was drawn from (after temperature, top-k, top-p): its log-prob and entropy.
        # One step at a time: a (batch, tokens, vocabulary) tensor would not fit for long turns.
        sampled_logps, entropies = [], []
        for step, scores in enumerate(out.scores):
            logps = torch.log_softmax(scores.float(), dim=-1)
            sampled_logps.append(logps.gather(-1, new[:, step : step + 1]).squeeze(-1))
            entropies.append(-(logps.exp() * logps).nan_to_num(0.0).sum(-1))
        sampled, entropy = torch.stack(sampled_logps, dim=1), torch.stack(entropies, dim=1)
        stops = set(trainer.eos_token_ids)
        turns = []
        for row in range(len(contexts)):
            ids = new[row].tolist()
            end = next((k + 1 for k, t in enumerate(ids) if t in stops), None)
            length = len(ids) if end is None else end
            turns.append(
                SampledText(
                    tokenizer.decode(ids[:length], skip_special_tokens=True),
                    ids[:length],
                    sampled[row, :length].tolist(),
                    truncated=end is None,
                    entropy=float(entropy[row, :length].mean()),
                )
            )
        return turns


class OutcomeSource(Protocol):
    """Where ``DiagnosticsCallback`` reads episodes: ``ColbenchRollout`` (rollout_func), or the factory of
    ``ColbenchToolEnv.factory`` (environment_factory)."""

    def take_outcomes(self) -> list[EpisodeOutcome]: ...


class DiagnosticsCallback(TrainerCallback):
    """Logs ``colbench.integrations.diagnostics.step_metrics`` of the episodes its sources played: reward, success,
    lost episodes, leak rate, turns, answer length, entropy per turn bucket (where the policy's sampling measured
    it: the rollout_func path).

    Training episodes and evaluation episodes are kept apart by when they were played: Transformers' loop ends each
    training step (``on_step_end``: the step's episodes, as ``colbench/...``) before it evaluates, and each
    evaluation batch (``on_prediction_step``) before it logs the evaluation: those episodes are logged once per
    evaluation, over all its batches, as ``eval_colbench/...``. They go into GRPOTrainer's own metrics, so TRL
    averages them over ``logging_steps`` and logs them with its own (``trainer.state.log_history`` and every
    ``report_to`` backend); a callback's ``on_log`` would come after the reporters.

    ``trainer``: the GRPOTrainer whose metrics take them; a ``ColbenchRollout`` source knows its trainer from its
    first call, a tool env factory does not: use ``DiagnosticsCallback.attach(trainer, factory)``."""

    def __init__(self, *sources: OutcomeSource, trainer: Any = None) -> None:
        if not sources:
            raise ConfigError("DiagnosticsCallback needs a source: a ColbenchRollout or a ColbenchToolEnv factory")
        self.sources, self.trainer = sources, trainer
        self._evaluated: list[EpisodeOutcome] = []

    @classmethod
    def attach(cls, trainer: Any, *sources: OutcomeSource) -> DiagnosticsCallback:
        """A callback logging ``sources``' episodes into ``trainer``'s metrics, added to it; returned."""
        callback = cls(*sources, trainer=trainer)
        trainer.add_callback(callback)
        return callback

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        outcomes = self._taken()
        if outcomes:
            for name, value in step_metrics(outcomes).items():
                self._store()["train"][name].append(value)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._evaluated += self._taken()
        if self._evaluated:  # the evaluation's episodes so far, as one value each (TRL logs and clears them)
            store = self._store()["eval"]
            for name, value in step_metrics(self._evaluated).items():
                store[name] = [value]

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._evaluated = []

    def _taken(self) -> list[EpisodeOutcome]:
        return [outcome for source in self.sources for outcome in source.take_outcomes()]

    def _store(self) -> Any:
        trainer = self.trainer or next((getattr(s, "trainer", None) for s in self.sources), None)
        store = getattr(trainer, "_metrics", None)
        if store is None:
            raise ConfigError(
                f"DiagnosticsCallback needs TRL's GRPOTrainer, got {type(trainer).__name__}: for an environment "
                "factory, add it with DiagnosticsCallback.attach(trainer, factory)"
            )
        return store


def made_env(env_id: str, **options: Any) -> gym.Env[Any, Any]:
    """``gym.make(env_id, **options)``, an unknown id or option reported as a one-line ``ConfigError`` (the env's
    own checks already raise one for a bad split, sandbox or simulator)."""
    try:
        return gym.make(env_id, **options)
    except gym.error.Error as exc:
        raise ConfigError(f"env {env_id!r}: {exc}") from None
    except TypeError as exc:
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if unknown is None:
            raise
        raise ConfigError(f"{env_id}: unknown option {unknown[1]!r}") from None


@contextlib.contextmanager
def _generation_model(trainer: Any) -> Iterator[Any]:
    from trl.models import unwrap_model_for_generation  # type: ignore[attr-defined]

    with unwrap_model_for_generation(
        trainer.model_wrapped,
        trainer.accelerator,
        gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
    ) as model:
        yield model


def _outcome(reward: float, truncated: bool, infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s outcome as the reward functions read it, from the vector env's batched infos. An episode
    lost to an infrastructure failure (the vector env ends it truncated, with ``info["error"]``) has no reward,
    success or leak count: None, which TRL leaves out of the group baseline instead of scoring it 0."""

    def value(key: str) -> Any:
        return infos[key][i] if key in infos and infos[f"_{key}"][i] else None

    error = value("error")
    lost = truncated or error is not None
    success = value("success")
    return {
        "colbench_reward": None if lost else reward,
        "colbench_success": None if lost or success is None else float(bool(success)),
        "colbench_leaks": None if lost else int(value("leaks") or 0),
        "colbench_error": (str(error) if error is not None else "episode truncated") if lost else None,
    }


def _diagnosed(outcome: Mapping[str, Any]) -> EpisodeOutcome:
    success = outcome["colbench_success"]
    return EpisodeOutcome(
        reward=outcome["colbench_reward"],
        success=None if success is None else bool(success),
        leaks=outcome["colbench_leaks"] or 0,
        turns=outcome["colbench_turns"],
        answer_chars=outcome["colbench_answer_chars"],
        turn_entropy=tuple(outcome["colbench_entropy"]),
        error=outcome["colbench_error"],
    )


def reward_functions(*names: str) -> list[Callable[..., list[float | None]]]:
    """TRL reward functions reading a ``ColbenchRollout``'s outcome, by name (``REWARDS``): ``reward``,
    ``success``, ``leak_penalty``. TRL sums them (weights: ``GRPOConfig.reward_weights``)."""
    made: dict[str, Callable[..., list[float | None]]] = {
        "reward": colbench_reward,
        "success": colbench_success,
        "leak_penalty": colbench_leak_penalty,
    }
    return chosen(names, made)


def chosen(
    names: Sequence[str], made: Mapping[str, Callable[..., list[float | None]]]
) -> list[Callable[..., list[float | None]]]:
    """The reward functions ``names`` picks from ``made`` (by the names of ``REWARDS``), or a one-line error; the
    ``environment_factory`` path picks its own with it too."""
    unknown = [n for n in names if n not in made]
    if unknown or not names:
        raise ConfigError(f"reward functions {unknown or '(none)'}: expected some of {', '.join(made)}")
    return [made[n] for n in names]


def colbench_reward(
    completions: Sequence[Any], colbench_reward: Sequence[float | None], **_: Any
) -> list[float | None]:
    """The env's reward of each episode (None for an episode lost to an infrastructure error)."""
    return list(colbench_reward)


def colbench_success(
    completions: Sequence[Any], colbench_success: Sequence[float | None], **_: Any
) -> list[float | None]:
    """1.0 for an episode whose answer passed every test, 0.0 otherwise."""
    return list(colbench_success)


def colbench_leak_penalty(
    completions: Sequence[Any], colbench_leaks: Sequence[int | None], **_: Any
) -> list[float | None]:
    """Minus the number of leaked replies: a policy that talks the human into dictating the answer loses reward
    (None for a lost episode, like every reward function)."""
    return [None if n is None else -float(n) for n in colbench_leaks]
