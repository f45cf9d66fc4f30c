"""TRL ``environment_factory``: ``ColbenchToolEnv``'s contract on its own (ask, submit, the turn cap, refusals, a
human endpoint that fails, its prompt, its reward through ``get_reward``), then the real GRPOTrainer training 2 CPU
steps through its tools, with the diagnostics in its log.

In the trainer run everything is real (TRL 1.16's GRPOTrainer, its prompt rendering with the tool schemas, its
tool-call parsing and tool loop, its masks and loss; the exported SmolLM2; a local HTTP human; bwrap scoring) except
what the 135M model writes: a logits processor forces each of its turns to a scripted tool call, because SmolLM2
never emits one on its own. The model still samples every token through ``generate``; the test records those ids
and checks that TRL trains on exactly them.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from example_scripts import run_example
from openai_stub import StubOpenAIServer
from trl_cpu import cpu_grpo_config

from colbench.env.dataset import prompt_rows
from colbench.errors import ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.integrations.trl_environment import (
    ColbenchPageToolEnv,
    ColbenchToolEnv,
    environment_rewards,
    tool_prompt,
    tool_rows,
)
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.task import Task

pytest.importorskip("trl")

HUMAN = "Keep it short and return an int."
REWARDS = ("success", "leak_penalty")


def rewards(env: ColbenchToolEnv) -> list[float | None]:
    """The env's reward (``get_reward``, as TRL reads it), then each reward function's."""
    return [env.get_reward(), *(f(environments=[env])[0] for f in environment_rewards(*REWARDS))]


def tool_env(tasks: list[Task], scorer: Any, max_turns: int = 3, **kwargs: Any) -> ColbenchToolEnv:
    kwargs.setdefault("simulator", ScriptedSimulator([HUMAN]))
    return ColbenchToolEnv.factory("ColBench-Backend-v1", tasks=tasks, max_turns=max_turns, scorer=scorer, **kwargs)()


def test_a_rollout_asks_submits_and_is_scored_as_the_env_scores(bundled_tasks: list[Task], scorer: Any) -> None:
    task = bundled_tasks[0]
    env = tool_env(bundled_tasks, scorer)
    note = env.reset(**tool_rows(bundled_tasks, max_turns=3)[0])
    assert note is None  # the row's prompt is the tools prompt: nothing to add
    assert env.ask_human("Int or float?") == HUMAN
    assert env.submit_answer(task.ground_truth) == "Answer received; the session is over."
    assert rewards(env) == [1.0, 1.0, 0.0]
    assert (env.outcome.termination, env.outcome.turns) == ("answered", 2)
    # Over: a second answer (even a wrong one) and a late question are refused and nothing is scored again.
    assert env.submit_answer("def nope(): pass").startswith("Refused: the session is over")
    assert env.ask_human("Still there?").startswith("Refused: the session is over")
    assert rewards(env) == [1.0, 1.0, 0.0] and env.outcome.turns == 2
    # The pooled instance starts clean on the next row.
    env.reset(**tool_rows(bundled_tasks, max_turns=3)[1])
    assert env.outcome.termination is None and rewards(env) == [0.0, 0.0, 0.0]


def test_the_last_turn_is_scored_as_the_answer_at_the_cap(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer, max_turns=2)
    env.reset(**tool_rows(bundled_tasks, max_turns=2)[0])
    assert env.ask_human("Int or float?") == HUMAN
    assert env.ask_human("And negatives?").startswith("That was your last turn")
    assert env.outcome.termination == "turn_limit" and rewards(env) == [0.0, 0.0, 0.0]
    assert env.submit_answer(bundled_tasks[0].ground_truth).startswith("Refused")
    assert rewards(env) == [0.0, 0.0, 0.0]


def test_a_rollout_that_never_answers_scores_zero(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer)
    env.reset(**tool_rows(bundled_tasks, max_turns=3)[0])
    env.ask_human("Int or float?")
    assert env.outcome.termination is None and rewards(env) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("failing_turn", [1, 2])
def test_a_human_endpoint_down_loses_the_episode_never_scores_it(
    bundled_tasks: list[Task], scorer: Any, failing_turn: int
) -> None:
    with StubOpenAIServer() as server:
        server.script([("text", HUMAN)] * (failing_turn - 1) + [("status", 503)] * 5)
        env = tool_env(
            bundled_tasks,
            scorer,
            simulator="openai:human",
            simulator_options={"base_url": server.base_url, "api_key": "k", "max_retries": 0},
        )
        env.reset(**tool_rows(bundled_tasks, max_turns=3)[0])
        for _ in range(failing_turn - 1):
            assert env.ask_human("Int or float?") == HUMAN
        assert "not scored" in env.ask_human("And negatives?")  # no exception out of the tool
        assert env.submit_answer(bundled_tasks[0].ground_truth).startswith("Refused: the session was lost")
        assert server.request_count == failing_turn  # nothing called after the failure
    assert rewards(env) == [None, None, None]
    assert env.outcome.error is not None and "LLMError" in env.outcome.error


def test_bad_rows_and_names_fail_with_one_line(bundled_tasks: list[Task], scorer: Any) -> None:
    env = tool_env(bundled_tasks, scorer)
    with pytest.raises(ConfigError, match="no task_id column"):
        env.reset(prompt=[{"role": "user", "content": "Solve this."}])
    with pytest.raises(ConfigError, match="max_turns=3"):  # a dataset made for another turn cap
        env.reset(**tool_rows(bundled_tasks, max_turns=5)[0])
    with pytest.raises(ConfigError, match="tool_dataset"):  # the text protocol's prompt: I WANT TO ANSWER
        env.reset(**prompt_rows(bundled_tasks, max_turns=3)[0])
    with pytest.raises(ConfigError, match="reset"):
        env.ask_human("Hello?")
    with pytest.raises(ConfigError, match="expected some of"):
        environment_rewards("accuracy")
    with pytest.raises(ConfigError, match="count it twice"):  # the env's reward is get_reward's
        environment_rewards("reward", "leak_penalty")
    with pytest.raises(ConfigError, match="unknown option 'simulatr'"):
        ColbenchToolEnv.factory("ColBench-Backend-v1", tasks=bundled_tasks, simulatr="scripted")()
    with pytest.raises(ConfigError, match="ColbenchPageToolEnv"):  # a frontend env behind the backend's tools
        ColbenchToolEnv.factory("ColBench-Frontend-v1", tasks="frontend-sample", embedder="test")()


def test_a_row_without_a_prompt_gets_the_tools_prompt(bundled_tasks: list[Task], scorer: Any) -> None:
    """TRL lets an env own the data: a row with no prompt (TRL's empty user message) gets it from reset."""
    env = tool_env(bundled_tasks, scorer)
    assert env.reset(task_id=bundled_tasks[0].task_id, prompt=[{"role": "user", "content": ""}]) == tool_prompt(
        bundled_tasks[0], 3
    )


@pytest.mark.parametrize(
    ("cls", "tasks"), [(ColbenchToolEnv, "backend-sample"), (ColbenchPageToolEnv, "frontend-sample")]
)
def test_the_tools_prompt_asks_for_the_tools_not_the_answer_marker(cls: type[Any], tasks: str) -> None:
    """The tools path's task prompt names the env's tools (the ones TRL exposes) and never the text protocol's
    marker, which no tool call could carry."""
    tools = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if n[0] != "_"]
    tools = [n for n in tools if n not in ("reset", "get_reward")]  # TRL's rule for what becomes a tool
    for row in tool_rows(tasks, max_turns=4):
        text = row["prompt"][0]["content"]
        assert ANSWER_MARKER not in text and "4 turns" in text
        assert all(name in text for name in tools), tools


def test_the_factory_pickles_and_reports_each_episode_once(bundled_tasks: list[Task], scorer: Any) -> None:
    """AsyncGRPOTrainer pickles the factory into its rollout process; each finished episode is reported for the
    diagnostics when TRL asks for its reward, once."""
    import pickle

    factory = ColbenchToolEnv.factory("ColBench-Backend-v1", tasks="backend-sample", max_turns=3, sandbox="bwrap")
    assert pickle.loads(pickle.dumps(factory)).options == factory.options
    env = factory()
    env.reset(**tool_rows("backend-sample", max_turns=3)[0])
    env.ask_human("Int or float?")
    assert env.get_reward() == 0.0 and env.get_reward() == 0.0  # never answered: the policy failed
    (outcome,) = factory.take_outcomes()
    assert (outcome.reward, outcome.success, outcome.turns, outcome.lost) == (0.0, False, 1, False)
    assert factory.take_outcomes() == []


def test_its_tools_are_the_two_methods_trl_will_expose() -> None:
    """TRL exposes every public function of the class but ``reset`` and ``get_reward`` as a tool, with a schema
    from its docstring."""
    from transformers.utils import get_json_schema

    public = [n for n, _ in inspect.getmembers(ColbenchToolEnv, predicate=inspect.isfunction) if n[0] != "_"]
    assert public == ["ask_human", "get_reward", "reset", "submit_answer"]
    schema = get_json_schema(ColbenchToolEnv.submit_answer)["function"]
    assert schema["parameters"]["required"] == ["answer"]
    assert "complete Python code" in schema["parameters"]["properties"]["answer"]["description"]


# -- the real GRPOTrainer, 2 CPU steps through the tools ----------------------------------------------------------
QUESTIONS = ("Which inputs can be empty?", "Any rounding rules?")
ANSWER = "def solution(values):\n    return sorted(values)"


def call(name: str, argument: str, value: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {{"{argument}": "{value}"}}}}\n</tool_call>'


SCRIPT = [
    call("ask_human", "question", QUESTIONS[0]),
    call("ask_human", "question", QUESTIONS[1]) + "\n" + call("submit_answer", "answer", ANSWER.replace("\n", "\\n")),
    "",
]
"""What the policy writes at each of its turns, chosen by how many tool responses its context holds (0, 1, 3): a
question; a second question and the answer in one turn (TRL runs both calls in order); nothing more."""


def split_one_token(tokenizer: Any, ids: list[int], start: int) -> list[int]:
    """``ids`` with its first token from ``start`` on that splits into two vocabulary tokens written as those two:
    the same text, ids a re-tokenization would never give back (the drift a text round trip causes)."""
    vocab = tokenizer.get_vocab()
    for i in range(start, len(ids)):
        piece = tokenizer.convert_ids_to_tokens(ids[i])
        for k in range(1, len(piece)):
            if piece[:k] in vocab and piece[k:] in vocab:
                return [*ids[:i], vocab[piece[:k]], vocab[piece[k:]], *ids[i + 1 :]]
    raise AssertionError("no token of the script splits in two")


def scripted_turns(tokenizer: Any) -> list[list[int]]:
    """The token ids of each scripted turn, ending with the end-of-turn token; the answer's code is written with a
    non-canonical split."""
    turns = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in SCRIPT]
    code_at = len(tokenizer(SCRIPT[1].split("def ", 1)[0], add_special_tokens=False)["input_ids"])
    turns[1] = split_one_token(tokenizer, turns[1], code_at)
    return [[*ids, tokenizer.eos_token_id] for ids in turns]


class ForcedTurns:
    """A logits processor that leaves one token possible at each step: the scripted turn of each row, chosen by how
    many tool responses the row's context holds. The model's ``generate`` still samples every token."""

    def __init__(self, tokenizer: Any, turns: list[list[int]]) -> None:
        self.tokenizer, self.turns = tokenizer, turns
        self.rows: list[list[int]] | None = None
        self.start = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.rows is None:
            self.start = input_ids.shape[1]
            contexts = self.tokenizer.batch_decode(input_ids)
            self.rows = [self.turns[min(c.count("<tool_response>"), 2)] for c in contexts]
        step = input_ids.shape[1] - self.start
        forced = scores.new_full(scores.shape, -math.inf)
        for row, turn in enumerate(self.rows):
            forced[row, turn[step] if step < len(turn) else self.tokenizer.eos_token_id] = 0.0
        return forced


def failing_human(task: Task) -> Callable[[dict[str, Any]], str]:
    """The human's endpoint, down (the connection dropped) for ``task``'s first request and for any second question
    about it: its group's first rollout is lost on its first turn, the second on a later turn (TRL runs the
    rollouts' tool calls one after another, in order)."""
    asked: list[int] = []

    def reply(body: dict[str, Any]) -> str:
        questions = sum(m["role"] == "user" for m in body["messages"])
        if task.problem_description in body["messages"][0]["content"]:
            asked.append(questions)
            if len(asked) == 1 or questions > 1:
                raise ConnectionAbortedError("the human's endpoint is down")
        return HUMAN

    return reply


# The fixture's two steps take about 60 s here. CI once took 400 s a step: TRL trains in bf16 by default, which a CPU
# without AVX512-BF16 multiplies in a slow generic loop; the config now says fp32.
@pytest.fixture(scope="module")
def grpo_run(
    exported_model: Path, bundled_tasks: list[Task], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Two GRPO steps (one task each, 2 rollouts; the second task's human endpoint fails) through
    ``ColbenchToolEnv``, with ``DiagnosticsCallback``; what the model sampled, what TRL prepared for the loss, what
    each reward function returned and the trainer's log."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList
    from trl import GRPOTrainer

    from colbench.integrations.chatml_tools import with_tool_calling
    from colbench.integrations.trl import DiagnosticsCallback
    from colbench.integrations.trl_environment import tool_dataset

    tasks = bundled_tasks[:2]
    tokenizer = with_tool_calling(AutoTokenizer.from_pretrained(exported_model))
    tokenizer.padding_side = "left"
    turns = scripted_turns(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(exported_model)
    run: dict[str, Any] = {"sampled": [], "prepared": [], "rewards": {n: [] for n in REWARDS}, "tokenizer": tokenizer}
    generate = model.generate

    def sampling(*args: Any, **kwargs: Any) -> Any:
        out = generate(*args, logits_processor=LogitsProcessorList([ForcedTurns(tokenizer, turns)]), **kwargs)
        for row in out[:, kwargs["input_ids"].shape[1] :].tolist():
            run["sampled"].append(row[: row.index(tokenizer.eos_token_id) + 1])
        return out

    model.generate = sampling

    def recording(name: str, func: Callable[..., list[float | None]]) -> Callable[..., list[float | None]]:
        @functools.wraps(func)
        def record(**kwargs: Any) -> list[float | None]:
            values = func(**kwargs)
            run["rewards"][name].append((values, [e.outcome for e in kwargs["environments"]]))
            return values

        return record

    with StubOpenAIServer(default=failing_human(tasks[1])) as server:
        factory = ColbenchToolEnv.factory(
            "ColBench-Backend-v1",
            tasks=tasks,
            max_turns=3,
            simulator="openai:human",
            simulator_options={"base_url": server.base_url, "api_key": "k", "max_retries": 0},
            sandbox="bwrap",
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[recording(n, f) for n, f in zip(REWARDS, environment_rewards(*REWARDS), strict=True)],
            train_dataset=tool_dataset(tasks, max_turns=3),
            environment_factory=factory,
            args=cpu_grpo_config(
                tmp_path_factory.mktemp("grpo_tools"),
                per_device_train_batch_size=2,
                max_completion_length=320,
                max_tool_calling_iterations=3,
                gradient_checkpointing=False,  # on, generation recomputes the whole context at each token
            ),
        )
        prepare = trainer._generate_and_score_completions

        def prepared(inputs: Any) -> Any:
            out = prepare(inputs)
            run["prepared"].append(out)
            return out

        trainer._generate_and_score_completions = prepared
        DiagnosticsCallback.attach(trainer, factory)
        trainer.train()
    run["log"] = trainer.state.log_history
    run["turns"] = turns
    yield run


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_grpo_trains_through_the_tools(grpo_run: dict[str, Any], bundled_tasks: list[Task]) -> None:
    steps = [e for e in grpo_run["log"] if "loss" in e]
    assert len(steps) == 2 and all(math.isfinite(e["loss"]) for e in steps)
    assert all(e["tools/call_frequency"] == 3.0 for e in steps)  # ask, ask, submit in every rollout
    assert all(e["completions/clipped_ratio"] == 0.0 for e in steps)  # every completion ends at its end-of-turn
    outcomes = [o for _, step in grpo_run["rewards"]["success"] for o in step]
    answered = [o for o in outcomes if o.task_id == bundled_tasks[0].task_id]
    assert len(outcomes) == 4 and len(answered) == 2
    assert all(o.error is None and o.termination == "answered" and o.turns == 3 for o in answered)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_trl_trains_exactly_the_ids_the_model_sampled(grpo_run: dict[str, Any]) -> None:
    tokenizer, turns = grpo_run["tokenizer"], grpo_run["turns"]
    # The scripted answer's ids are not what its text tokenizes to: a text round trip would change them.
    assert tokenizer(tokenizer.decode(turns[1][:-1]), add_special_tokens=False)["input_ids"] != turns[1][:-1]
    assert sorted(grpo_run["sampled"]) == sorted(t for t in turns for _ in range(4))  # 4 rollouts, 3 turns each
    rollouts = 0
    for out in grpo_run["prepared"]:
        for ids, mask, tool in zip(out["completion_ids"], out["completion_mask"], out["tool_mask"], strict=True):
            kept = mask.bool()
            ids, tool = ids[kept].tolist(), tool[kept].tolist()
            assert (
                runs(ids, tool, 1) == turns
            )  # the model's turns, id for id as sampled, each ending at its end-of-turn
            context = [tokenizer.decode(r) for r in runs(ids, tool, 0)]
            assert len(context) == 2 and all("<tool_response>" in c for c in context)  # out of the loss
            rollouts += 1
    assert rollouts == 4


def runs(ids: list[int], mask: list[int], value: int) -> list[list[int]]:
    """The maximal stretches of ``ids`` whose mask is ``value``."""
    found: list[list[int]] = []
    for i, (t, m) in enumerate(zip(ids, mask, strict=True)):
        if m == value:
            if i == 0 or mask[i - 1] != value:
                found.append([])
            found[-1].append(t)
    return found


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_lost_episodes_get_none_from_every_reward_function(grpo_run: dict[str, Any], bundled_tasks: list[Task]) -> None:
    lost = bundled_tasks[1].task_id
    for name in REWARDS:
        lost_turns = []
        for values, outcomes in grpo_run["rewards"][name]:
            for value, outcome in zip(values, outcomes, strict=True):
                if outcome.task_id == lost:
                    assert value is None and outcome.error is not None and outcome.termination is None
                    lost_turns.append(outcome.turns)
                else:
                    assert value == 0.0  # a wrong answer, scored by the env's final step
        assert sorted(lost_turns) == [0, 1]  # lost on the first turn, and on the second


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_env_reward_and_the_diagnostics_are_in_the_trainers_log(
    grpo_run: dict[str, Any], bundled_tasks: list[Task]
) -> None:
    """TRL adds ``get_reward`` as a reward column of its own (the env's reward, once: no reward function repeats
    it) and leaves a lost episode out (None); ``DiagnosticsCallback`` logs each step's episodes from the factory."""
    steps = [e for e in grpo_run["log"] if "loss" in e]
    for entry, (_, outcomes) in zip(steps, grpo_run["rewards"]["success"], strict=True):
        assert len({o.task_id for o in outcomes}) == 1 and entry["colbench/episodes"] == 2
        if outcomes[0].task_id == bundled_tasks[1].task_id:  # the human's endpoint down: both episodes lost
            assert entry["rewards/ColbenchToolEnv/mean"] is None and entry["colbench/lost"] == 2
            assert "colbench/reward" not in entry and "colbench/leak_rate" not in entry
        else:  # a wrong answer, scored 0 by the env; no leaks from the stub human
            assert entry["rewards/ColbenchToolEnv/mean"] == 0.0 and entry["colbench/lost"] == 0
            assert (entry["colbench/reward"], entry["colbench/success"], entry["colbench/leak_rate"]) == (0, 0, 0)
            assert entry["colbench/turns"] == 3 and entry["colbench/answer_chars"] == len(ANSWER) + 1
    assert sorted(k for k in steps[0] if k.startswith("rewards/") and k.endswith("/mean")) == [
        "rewards/ColbenchToolEnv/mean",
        "rewards/environment_leak_penalty/mean",
        "rewards/environment_success/mean",
    ]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_tools_example_runs_a_step(exported_model: Path, tmp_path: Path) -> None:
    args = ["--model", str(exported_model), "--max_steps", "1", "--cpu", "--sandbox", "bwrap", "--limit", "1"]
    metrics = run_example(
        "trl_grpo/train_grpo_tools.py", [*args, "--max_completion_length", "16"], tmp_path / "run", timeout=550
    )
    assert len(metrics["loss"]) == 1 and all(math.isfinite(x) for x in metrics["loss"])
    assert len(metrics["tool_calls"]) == 1 and (tmp_path / "run" / "model" / "config.json").is_file()
    assert metrics["colbench/episodes"] == [2.0]  # the diagnostics of the tools path, logged by the example
