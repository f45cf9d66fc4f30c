"""TRL: the real GRPOTrainer trains 2 steps on CPU with ColBench episodes as rollouts (the embedded model exported
to transformers, a scripted human), on exactly the ids the policy sampled; the simulated human's tokens are out of
the loss, TRL sees which completions were cut at the token limit, an episode lost to the human's endpoint is no
score, and the diagnostics land in the trainer's log, the evaluation's apart from training's."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from example_scripts import run_example
from openai_stub import StubOpenAIServer
from trl_cpu import cpu_grpo_config

from colbench.errors import ConfigError
from colbench.types.sampled import SampledText

HUMAN = "Keep it short and return an int."
EOT = 2  # SmolLM2's <|im_end|>: its end-of-turn token, eos and pad
EPISODES = 2  # per GRPO step: one group of 2 (each costs a CPU forward of its ~300-token prompt per turn)
pytest.importorskip("trl")


@dataclass
class GrpoRun:
    """What one 2-step GRPO run saw: per step, what the rollout returned and what TRL computed the loss on; every
    turn the policy sampled, with the context it sampled it from."""

    trainer: Any
    tokenizer: Any
    rollouts: list[dict[str, Any]]
    trained: list[dict[str, list[list[int]]]]
    sampled: list[tuple[tuple[int, ...], SampledText]]
    evaluated: list[dict[str, Any]]

    def turns_of(self, step: int, row: int) -> list[SampledText]:
        """The turns the policy sampled in episode ``row`` of ``step``, in order."""
        out = self.rollouts[step]
        full = (*out["prompt_ids"][row], *out["completion_ids"][row])
        return [
            turn
            for context, turn in self.sampled
            if full[: len(context)] == context
            and full[len(context) : len(context) + len(turn.token_ids)] == turn.token_ids
        ]


@pytest.fixture(scope="module")
def grpo(exported_model: Path, tmp_path_factory: pytest.TempPathFactory) -> GrpoRun:
    """One GRPOTrainer, 2 CPU steps of ``EPISODES`` episodes (max_turns 2, 8 tokens a turn; the end-of-turn token made
    likely so that some turns end and some are cut): ``mask_truncated_completions`` off in step 1, on in step 2. An
    evaluation of ``EPISODES`` episodes of another task runs before training (``eval_on_start``), its turns scripted
    (two questions at entropy 1.5)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from colbench import prompt_dataset
    from colbench.humans.simulator import ScriptedSimulator
    from colbench.integrations.trl import ColbenchRollout, DiagnosticsCallback, reward_functions

    rollout = ColbenchRollout(
        "ColBench-Backend-v1",
        tasks="backend-sample",
        max_turns=2,
        turn_tokens=8,
        simulator=ScriptedSimulator([HUMAN]),
        sandbox="bwrap",
    )
    run = GrpoRun(None, AutoTokenizer.from_pretrained(exported_model), [], [], [], [])
    policy = rollout.generate

    question = [*run.tokenizer("What type is the input?", add_special_tokens=False)["input_ids"], EOT]

    def sampling(contexts: list[tuple[int, ...]], trainer: Any) -> list[SampledText]:
        if not trainer.model.training:  # the evaluation's policy asks, scripted: no draw from the model's RNG
            return [SampledText("What type is the input?", question, [-0.5] * len(question), entropy=1.5)] * len(
                contexts
            )
        turns = policy(contexts, trainer)
        run.sampled += zip(contexts, turns, strict=True)
        return turns

    def recording(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if not trainer.model.training:
            run.evaluated.append(rollout(prompts, trainer))
            return run.evaluated[-1]
        trainer.mask_truncated_completions = len(run.rollouts) == 1
        out = rollout(prompts, trainer)
        run.rollouts.append(out)
        return out

    rollout.generate = sampling
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(exported_model),
        processing_class=run.tokenizer,
        reward_funcs=reward_functions("reward", "leak_penalty"),
        train_dataset=prompt_dataset("backend-sample", max_turns=2).select(range(2)),
        eval_dataset=prompt_dataset("backend-sample", max_turns=2).select([2]),
        rollout_func=recording,
        callbacks=[DiagnosticsCallback(rollout)],
        args=cpu_grpo_config(
            tmp_path_factory.mktemp("grpo"),
            per_device_train_batch_size=EPISODES,
            per_device_eval_batch_size=EPISODES,
            eval_strategy="steps",
            eval_steps=100,  # never within the 2 steps: the one evaluation is the one before training
            eval_on_start=True,
            generation_kwargs={"sequence_bias": [[[EOT], 4.0]]},
        ),
    )
    prepare = trainer._generate_and_score_completions

    def trained_on(inputs: Any) -> dict[str, Any]:  # what TRL computes the loss on, as it computed it
        out = prepare(inputs)
        if trainer.model.training:
            mask = out["completion_mask"] * out["tool_mask"]
            run.trained.append({"completion_ids": out["completion_ids"].tolist(), "loss_mask": mask.tolist()})
        return out  # type: ignore[no-any-return]

    trainer._generate_and_score_completions = trained_on
    trainer.train()
    run.trainer = trainer
    return run


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_trains_exactly_the_sampled_ids(grpo: GrpoRun) -> None:
    losses = [entry["loss"] for entry in grpo.trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert len(grpo.rollouts) == len(grpo.trained) == 2
    for step, (out, trained) in enumerate(zip(grpo.rollouts, grpo.trained, strict=True)):
        assert len(out["completion_ids"]) == EPISODES
        for row, ids in enumerate(out["completion_ids"]):
            turns = grpo.turns_of(step, row)
            assert len(turns) == out["colbench_turns"][row] >= 1
            cut = turns[-1].truncated
            # TRL's view: the completion ends at the last end-of-turn token unless the last turn was cut.
            assert (ids[-1] != EOT) == cut
            kept = [t for t, m in zip(trained["completion_ids"][row], trained["loss_mask"][row], strict=True) if m]
            masked_off = step == 1 and cut  # mask_truncated_completions, on in step 2
            assert kept == ([] if masked_off else [t for turn in turns for t in turn.token_ids])
            rollout_mask = out["env_mask"][row]
            assert sum(rollout_mask) == sum(len(turn.token_ids) for turn in turns)
            context = grpo.tokenizer.decode([t for t, m in zip(ids, rollout_mask, strict=True) if not m])
            if len(turns) > 1:  # the human's reply is in the context, never in the loss
                assert HUMAN in context
            # TRL's importance-sampling input: the sampling log-prob of each policy token, None elsewhere
            logps = out["logprobs"][row]
            assert [lp is not None for lp in logps] == [bool(m) for m in rollout_mask]
            assert all(lp <= 0.0 for lp in logps if lp is not None)
        for ids in out["prompt_ids"]:  # the task prompt is the prompt, never part of the completion
            assert "You are working with a person who needs a Python function" in grpo.tokenizer.decode(ids)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_logs_the_clipped_ratio_and_the_diagnostics(grpo: GrpoRun) -> None:
    logged = [entry for entry in grpo.trainer.state.log_history if "loss" in entry]
    all_cut = []
    for step, entry in enumerate(logged):
        cut = [grpo.turns_of(step, row)[-1].truncated for row in range(EPISODES)]
        all_cut += cut
        assert entry["completions/clipped_ratio"] == pytest.approx(sum(cut) / EPISODES)
        assert entry["colbench/episodes"] == EPISODES and entry["colbench/lost"] == 0
        assert entry["colbench/reward"] == pytest.approx(sum(grpo.rollouts[step]["colbench_reward"]) / EPISODES)
        for key in ("success", "leak_rate", "turns", "answer_chars", "entropy/turn_1"):
            assert math.isfinite(entry[f"colbench/{key}"]), key
        assert entry["colbench/entropy/turn_1"] > 0.0
    assert 0 < sum(all_cut) < len(all_cut)  # both kinds of completion were seen


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_evaluation_episodes_are_logged_apart_from_training(grpo: GrpoRun) -> None:
    """Each evaluation (the one before training, and Transformers' one at the end) played its own episodes: they
    are logged as ``eval_colbench/...`` with that evaluation, never counted in a training step's ``colbench/...``."""
    evaluations = [e for e in grpo.trainer.state.log_history if "eval_loss" in e]
    assert len(evaluations) == len(grpo.evaluated) >= 1
    for evaluation, played in zip(evaluations, grpo.evaluated, strict=True):
        assert len(played["completion_ids"]) == EPISODES
        assert evaluation["eval_colbench/episodes"] == EPISODES and evaluation["eval_colbench/lost"] == 0
        assert evaluation["eval_colbench/reward"] == pytest.approx(sum(played["colbench_reward"]) / EPISODES)
        assert evaluation["eval_colbench/entropy/turn_1"] == evaluation["eval_colbench/entropy/turn_2"] == 1.5
        assert not [key for key in evaluation if key.startswith("colbench/")]
    training = [e for e in grpo.trainer.state.log_history if "loss" in e]
    assert [e["colbench/episodes"] for e in training] == [EPISODES, EPISODES]
    assert not [key for e in training for key in e if key.startswith("eval_")]


def test_a_lost_episode_is_no_score_at_the_first_or_a_later_turn(exported_model: Path) -> None:
    """The human's endpoint answers once, then fails: one episode is lost at its first turn, the other at its
    second. The rollout returns; every reward function gives None for both; nothing of them is trained."""
    from transformers import AutoTokenizer

    from colbench import prompt_dataset
    from colbench.integrations.trl import ColbenchRollout, reward_functions

    tokenizer = AutoTokenizer.from_pretrained(exported_model)
    question = [*tokenizer("What type is the input?", add_special_tokens=False)["input_ids"], EOT]

    def ask(contexts: list[tuple[int, ...]], trainer: Any) -> list[SampledText]:
        return [SampledText("What type is the input?", question, [-0.5] * len(question)) for _ in contexts]

    with StubOpenAIServer() as human:
        human.script([("text", "A list of ints.")] + [("status", 400)] * 20)
        rollout = ColbenchRollout(
            tasks="backend-sample",
            max_turns=3,
            generate=ask,
            sandbox="bwrap",
            simulator="openai:human",
            simulator_options={"base_url": human.base_url, "api_key": "k", "max_retries": 0},
        )
        prompts = prompt_dataset("backend-sample", max_turns=3)["prompt"][:2]
        out = rollout(prompts, SimpleNamespace(processing_class=tokenizer))  # the policy is ask, not a model
    assert sorted(out["colbench_turns"]) == [1, 2]  # lost at the first turn and at the second
    assert all(error and "400" in error for error in out["colbench_error"])
    for reward in reward_functions("reward", "success", "leak_penalty"):
        assert reward(out["completion_ids"], **out) == [None, None]
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert ids and set(mask) == {0}  # TRL gets tokens to look at and nothing to train
    assert [o.lost for o in rollout.outcomes] == [True, True]


def test_rollout_refuses_prompts_of_other_tasks() -> None:
    from colbench.integrations.trl import ColbenchRollout, reward_functions

    rollout = ColbenchRollout(tasks="backend-sample", max_turns=3)
    with pytest.raises(ConfigError, match="prompt_dataset"):
        rollout([[{"role": "user", "content": "Solve this."}]], trainer=None)
    with pytest.raises(ConfigError, match="expected some of"):
        reward_functions("accuracy")
    with pytest.raises(ConfigError, match="turn_tokens"):
        ColbenchRollout(turn_tokens=0)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"tasks": "backend-tset"}, "tasks='backend-tset': expected a JSONL file or one of the splits"),
        ({"tasks": "backend-sample", "simulatr": "scripted"}, "unknown option 'simulatr'"),
        ({"tasks": "backend-sample", "sandbox": "bogus"}, "sandbox='bogus'"),
        ({"tasks": "backend-sample", "env_id": "ColBench-Backnd-v1"}, "ColBench-Backnd-v1"),
    ],
)
def test_a_bad_option_fails_when_the_rollout_is_made(options: dict[str, Any], says: str) -> None:
    """Before the trainer loads a model: a bad split, a misspelt option, a bogus sandbox, an unknown env id."""
    from colbench.integrations.trl import ColbenchRollout

    with pytest.raises(ConfigError, match=re.escape(says)) as raised:
        ColbenchRollout(max_turns=2, **options)
    assert "\n" not in str(raised.value)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_grpo_example_runs_a_step(exported_model: Path, tmp_path: Path) -> None:
    """One step (the trainer test above trains two): the script runs, logs its loss and the diagnostics, saves."""
    args = ["--model", str(exported_model), "--max_steps", "1", "--cpu", "--sandbox", "bwrap", "--limit", "2"]
    metrics = run_example("trl_grpo/train_grpo.py", [*args, "--turn_tokens", "8"], tmp_path / "run", timeout=850)
    assert len(metrics["loss"]) == 1 and all(math.isfinite(x) for x in metrics["loss"])
    assert len(metrics["colbench/entropy/turn_1"]) == 1  # the diagnostics, logged each step
    assert (tmp_path / "run" / "model" / "config.json").is_file()
