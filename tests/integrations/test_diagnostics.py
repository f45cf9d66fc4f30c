"""Training diagnostics (colbench.integrations.diagnostics): the per-step figures on known episodes, and an episode's
outcome read from a real env's transcript with sampled turns."""

from __future__ import annotations

import gymnasium as gym

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.humans.simulator import ScriptedSimulator
from colbench.integrations.diagnostics import EpisodeOutcome, outcome_of, step_metrics
from colbench.tasks import Task
from colbench.types.sampled import SampledText


def test_diagnostics_of_known_episodes() -> None:
    outcomes = [
        EpisodeOutcome(reward=1.0, success=True, leaks=0, turns=3, answer_chars=40, turn_entropy=(1.0, 2.0, 4.0, 6.0)),
        EpisodeOutcome(reward=0.5, success=False, leaks=2, turns=1, answer_chars=20, turn_entropy=(3.0,)),
        EpisodeOutcome(reward=None, success=None, leaks=0, turns=1, answer_chars=0, error="LLMError: 503"),
    ]
    metrics = step_metrics(outcomes)
    assert metrics == {
        "colbench/episodes": 3.0,
        "colbench/lost": 1.0,
        "colbench/reward": 0.75,
        "colbench/success": 0.5,
        "colbench/leak_rate": 0.5,
        "colbench/turns": 2.0,
        "colbench/answer_chars": 30.0,
        "colbench/entropy/turn_1": 2.0,
        "colbench/entropy/turn_2": 2.0,
        "colbench/entropy/turn_3+": 5.0,
    }
    assert step_metrics(outcomes[2:]) == {"colbench/episodes": 1.0, "colbench/lost": 1.0}  # no mean of nothing


def test_an_outcome_from_a_transcript(bundled_tasks: list[Task], scorer: BackendScorer) -> None:
    task = bundled_tasks[0]
    env = gym.make("ColBench-Backend-v1", tasks=bundled_tasks, scorer=scorer, simulator=ScriptedSimulator(["Ints."]))
    env.reset(options={"task_id": task.task_id})
    env.step(SampledText("What type?", [1, 2], entropy=1.5))
    answer = f"I WANT TO ANSWER:\n{task.ground_truth}"
    _, reward, *_ = env.step(answer)  # a plain-text turn: no entropy measured
    outcome = outcome_of(env.unwrapped.transcript(), float(reward))
    assert outcome == EpisodeOutcome(
        reward=1.0, success=True, leaks=0, turns=2, answer_chars=len(task.ground_truth) + 1, turn_entropy=(1.5, None)
    )
    metrics = step_metrics([outcome, outcome_of(env.unwrapped.transcript(), None, error="LLMError: down")])
    assert metrics["colbench/lost"] == 1 and metrics["colbench/entropy/turn_1"] == 1.5
    assert "colbench/entropy/turn_2" not in metrics
