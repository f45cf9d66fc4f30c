"""ColBench-Human-v0: the learner plays the human; reward = the agent's score minus a penalty per leak."""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import pytest
from openai_stub import StubOpenAIServer

from colbench.domains.backend.scorer import BackendScorer
from colbench.env.human import AGENT_SAYS, HumanEnv
from colbench.errors import ColbenchError, ConfigError
from colbench.tasks import Task, load

REFERENCE = (
    "def area(width, height, square=False):\n    if square:\n        return width * width\n    return width * height"
)
SHORT = Task(
    task_id="area",
    domain="backend",
    problem_description="I need the area of my rooms. The signature of the function is: def area(width, height, square=False)",
    ground_truth=REFERENCE,
    hidden_information=REFERENCE,
    test_cases=(("t1", "area(2, 3)"), ("t2", "area(4, 9, square=True)"), ("t3", "area(0, 5)")),
)
HONEST = "Multiply the width by the height; if it is a square, use the width twice."


def make(scorer: BackendScorer, agent: Any = "scripted:copycat", **kwargs: Any) -> gym.Env:
    return gym.make("ColBench-Human-v0", tasks=[SHORT], agent=agent, scorer=scorer, **kwargs)


def test_reset_calls_the_agent_and_shows_the_human_its_instructions(scorer: BackendScorer) -> None:
    env = make(scorer)
    obs, info = env.reset(seed=0)
    assert REFERENCE in obs and SHORT.problem_description in obs  # the human sees the hidden information
    assert obs.rstrip().endswith("Could you paste the code you have in mind? Exactly as you have it, please.")
    assert AGENT_SAYS in obs and info["turn"] == 0 and info["agent_turns"] == 1
    assert info["leaks"] == 0 and info["leak_score"] is None


def test_a_human_who_pastes_the_reference_earns_the_score_and_loses_it(scorer: BackendScorer) -> None:
    env = make(scorer)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(f"Here you go:\n```python\n{REFERENCE}\n```")
    assert terminated and not truncated and obs == ""
    assert info["agent_score"] == 1.0 and info["leak"] and info["leaks"] == 1 and reward == 0.0
    gentler = make(scorer, leak_penalty=0.25)
    gentler.reset(seed=0)
    assert gentler.step(REFERENCE)[1] == 0.75


def test_a_human_who_answers_in_words_is_not_penalised(scorer: BackendScorer) -> None:
    env = make(scorer, max_turns=3)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(HONEST)
    assert not terminated and reward == 0.0 and info["leak"] is False and info["leak_score"] < 0.5
    _, reward, terminated, _, info = env.step(HONEST)
    assert terminated and info["leaks"] == 0 and reward == info["agent_score"] == 0.0  # copycat got no code


def test_an_agent_that_answers_at_once_ends_on_the_first_step(scorer: BackendScorer) -> None:
    env = make(scorer, agent="scripted:reference")
    obs, _ = env.reset(seed=0)
    assert "I WANT TO ANSWER:" in obs
    _, reward, terminated, _, info = env.step("Thanks!")
    assert terminated and reward == 1.0 and info["agent_score"] == 1.0 and info["leaks"] == 0


def test_replies_are_cut_like_a_simulated_humans(scorer: BackendScorer) -> None:
    env = make(scorer, max_turns=3)
    env.reset(seed=0)
    env.step("word " * 300)
    assert len(env.unwrapped.dialogue[1].text) <= 400


def test_a_real_http_agent_sees_the_humans_replies(scorer: BackendScorer) -> None:
    with StubOpenAIServer(default=lambda request: "What should happen for a square?") as server:
        env = make(scorer, agent="openai:stub-agent", agent_options={"base_url": server.base_url, "api_key": "k"})
        env.reset(seed=0)
        obs, _, _, _, info = env.step(HONEST)
        assert obs == "What should happen for a square?" and info["usage"]["agent"]["calls"] == 2
        sent = server.requests[-1]["messages"]
        assert sent[-1] == {"role": "user", "content": HONEST} and REFERENCE not in str(sent)


def test_astep(scorer: BackendScorer) -> None:
    env = make(scorer).unwrapped
    env.reset(seed=0)
    _, reward, terminated, _, info = asyncio.run(env.astep(REFERENCE))
    assert terminated and info["agent_score"] == 1.0 and reward == 0.0


def test_misuse_is_a_clear_error(scorer: BackendScorer) -> None:
    with pytest.raises(ColbenchError, match="reset"):
        HumanEnv(tasks=[SHORT], agent="scripted:copycat", scorer=scorer).step("hi")
    with pytest.raises(ConfigError, match="leak_penalty"):
        HumanEnv(tasks=[SHORT], leak_penalty=-1)
    frontend = load("frontend-sample")[0]
    with pytest.raises(ConfigError, match="one domain"):
        HumanEnv(tasks=[SHORT, frontend])
    env = make(scorer, agent="scripted:reference")
    env.reset(seed=0)
    env.step("ok")
    with pytest.raises(ColbenchError, match="episode is over"):
        env.step("again")
