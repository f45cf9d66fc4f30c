"""TRL: multi-turn ColBench rollouts for ``GRPOTrainer(rollout_func=...)`` and reward functions.

TRL's ``rollout_func(prompts, trainer)`` receives the prompts of one step (each repeated ``num_generations`` times by
TRL's sampler) and returns token ids. ``ColbenchRollout`` plays each prompt's task as a whole ColBench episode: the
policy (the trainer's own model, or any ``generate`` you pass, e.g. a vLLM server) writes the agent's turns, the
simulated human (its own endpoint: ``simulator`` / ``simulator_options``) answers, the answer is scored. Each episode
comes back as ``prompt_ids`` (the task prompt up to the first agent turn), ``completion_ids`` (every turn after it,
the human's included, as the chat template renders them) and ``env_mask`` (1 on the agent's tokens, 0 on the
human's: TRL then computes no loss on them), plus the episode's outcome as extra fields that TRL forwards to the
reward functions below.

    from colbench.integrations.trl import ColbenchRollout, reward_functions
    from colbench.tasks import prompt_dataset
    rollout = ColbenchRollout("ColBench-Backend-v1", tasks="backend-sample", simulator="openai:human",
                              simulator_options={"base_url": "http://127.0.0.1:8001/v1"}, max_turns=4)
    trainer = GRPOTrainer(model=..., reward_funcs=reward_functions("reward"), train_dataset=prompt_dataset(
        "backend-sample", max_turns=4), rollout_func=rollout, args=GRPOConfig(...))

The dataset must be ``colbench.prompt_dataset`` of the same tasks and ``max_turns``: a prompt is matched to its
task by its text. Tested with trl 1.16.0 (the ``trl`` extra).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym

import colbench  # noqa: F401 (registers the ids)
from colbench.env.dataset import prompt_rows
from colbench.env.tokens import tokenize_transcript
from colbench.env.vector import ColbenchVectorEnv
from colbench.errors import ConfigError
from colbench.tasks.sources import load_shared
from colbench.types.chat import Message
from colbench.types.dialogue import MAX_TURNS

Generate = Callable[[list[list[Message]], Any], list[str]]

#: What each reward function returns per completion, from the episode's outcome (extra fields of the rollout).
REWARDS = {
    "reward": "the env's reward: fraction of tests passed (backend), CLIP cosine (frontend)",
    "success": "1.0 when every test passed, else 0.0 (backend)",
    "leak_penalty": "minus the number of simulated-human replies flagged as leaks (add it to penalise extraction)",
}


class ColbenchRollout:
    """A TRL ``rollout_func``: each prompt played as a ColBench episode (see the module docstring).

    ``env_id`` and ``env_kwargs`` make the env (``tasks``, ``simulator``, ``simulator_options``, ``sandbox``,
    ``leak_policy``, ...); ``max_turns`` must match the dataset's. ``turn_tokens``: new tokens per agent turn.
    ``generate(conversations, trainer) -> texts``: the policy's next turn for each conversation (default: the
    trainer's model with its generation config, sampling as TRL does).
    """

    def __init__(
        self,
        env_id: str = "ColBench-Backend-v1",
        *,
        tasks: str = "backend-test",
        max_turns: int = MAX_TURNS,
        turn_tokens: int = 256,
        generate: Generate | None = None,
        **env_kwargs: Any,
    ) -> None:
        if turn_tokens < 1:
            raise ConfigError(f"turn_tokens must be >= 1, got {turn_tokens}")
        self.env_id, self.tasks, self.max_turns = env_id, tasks, max_turns
        self.turn_tokens = turn_tokens
        self.generate = generate or self._generate_with_trainer
        self.env_kwargs = env_kwargs
        self._task_of_prompt: dict[str, str] | None = None

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        task_ids = [self._task_id(prompt) for prompt in prompts]
        vec = gym.make_vec(
            self.env_id,
            num_envs=len(task_ids),
            autoreset_mode="disabled",
            tasks=self.tasks,
            max_turns=self.max_turns,
            **self.env_kwargs,
        )
        try:
            outcomes = self._play(vec, task_ids, trainer)
            assert isinstance(vec, ColbenchVectorEnv)
            transcripts = [vec.finished(i) for i in range(len(task_ids))]
        finally:
            vec.close()
        return self._as_tokens(transcripts, outcomes, task_ids, trainer.processing_class)

    # -- one step's episodes -------------------------------------------------------------------------------------
    def _play(self, vec: Any, task_ids: list[str], trainer: Any) -> list[dict[str, Any]]:
        n = len(task_ids)
        observations, _ = vec.reset(options=[{"task_id": t} for t in task_ids])
        chats: list[list[Message]] = [[{"role": "user", "content": o}] for o in observations]
        outcomes: list[dict[str, Any] | None] = [None] * n
        while any(o is None for o in outcomes):
            active = [i for i in range(n) if outcomes[i] is None]
            texts = self.generate([chats[i] for i in active], trainer)
            actions: list[str | None] = [None] * n
            for i, text in zip(active, texts, strict=True):
                actions[i] = text
                chats[i].append({"role": "assistant", "content": text})
            observations, rewards, terminated, truncated, infos = vec.step(actions)
            for i in active:
                if terminated[i] or truncated[i]:
                    outcomes[i] = _outcome(float(rewards[i]), bool(truncated[i]), infos, i)
                else:
                    chats[i].append({"role": "user", "content": observations[i]})
        return [o for o in outcomes if o is not None]

    def _as_tokens(
        self, transcripts: list[Any], outcomes: list[dict[str, Any]], task_ids: list[str], tokenizer: Any
    ) -> dict[str, Any]:
        prompt_ids, completion_ids, env_mask = [], [], []
        for transcript in transcripts:
            tokens = tokenize_transcript(tokenizer, transcript)
            cut = tokens.learner_turns[0].start
            prompt_ids.append(list(tokens.input_ids[:cut]))
            completion_ids.append(list(tokens.input_ids[cut:]))
            env_mask.append(list(tokens.agent_mask[cut:]))
        extra = {key: [o[key] for o in outcomes] for key in outcomes[0]} if outcomes else {}
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": None,  # TRL computes the policy's log-probs itself on these ids
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

    # -- the default policy: the trainer's model -----------------------------------------------------------------
    def _generate_with_trainer(self, conversations: list[list[Message]], trainer: Any) -> list[str]:
        import torch

        tokenizer = trainer.processing_class
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
        side, tokenizer.padding_side = tokenizer.padding_side, "left"
        try:
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tokenizer.padding_side = side
        batch = {k: v.to(trainer.accelerator.device) for k, v in batch.items()}
        with _generation_model(trainer) as model, torch.no_grad():
            out = model.generate(
                **batch,
                generation_config=trainer.generation_config,
                max_new_tokens=self.turn_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[:, batch["input_ids"].shape[1] :]
        return [str(t) for t in tokenizer.batch_decode(new, skip_special_tokens=True)]


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
    """Sub-env ``i``'s outcome as the reward functions read it, from the vector env's batched infos; an episode lost
    to an infrastructure failure has no reward (None: TRL leaves it out of the reward, never scores it 0)."""

    def value(key: str) -> Any:
        return infos[key][i] if key in infos and infos[f"_{key}"][i] else None

    success = value("success")
    return {
        "colbench_reward": None if truncated else reward,
        "colbench_success": None if truncated or success is None else float(bool(success)),
        "colbench_leaks": int(value("leaks") or 0),
        "colbench_turns": int(value("turn") or 0),
        "colbench_error": value("error"),
    }


def reward_functions(*names: str) -> list[Callable[..., list[float | None]]]:
    """TRL reward functions reading a ``ColbenchRollout``'s outcome, by name (``REWARDS``): ``reward``,
    ``success``, ``leak_penalty``. TRL sums them (weights: ``GRPOConfig.reward_weights``)."""
    unknown = [n for n in names if n not in REWARDS]
    if unknown or not names:
        raise ConfigError(f"reward functions {unknown or '(none)'}: expected some of {', '.join(REWARDS)}")
    made: dict[str, Callable[..., list[float | None]]] = {
        "reward": colbench_reward,
        "success": colbench_success,
        "leak_penalty": colbench_leak_penalty,
    }
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


def colbench_leak_penalty(completions: Sequence[Any], colbench_leaks: Sequence[int], **_: Any) -> list[float | None]:
    """Minus the number of leaked replies: a policy that talks the human into dictating the answer loses reward."""
    return [-float(n) for n in colbench_leaks]
