"""The frontend env end to end: real Chromium renders, a vision human over real HTTP, the test embedder."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import gymnasium as gym
import pytest
from openai_stub import StubOpenAIServer

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.frontend.env import FrontendEnv
from colbench.errors import ConfigError, InfraError
from colbench.humans.simulator import ScriptedSimulator
from colbench.render import Renderer
from colbench.tasks import Task, load
from colbench.types.dialogue import Turn

pytestmark = pytest.mark.browser

RUNAWAY = "<html><body><h1>spin</h1><script>while (true) {}</script></body></html>"


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load("frontend-sample")


@pytest.fixture(scope="module")
def renderer() -> Iterator[Renderer]:
    with Renderer() as shared:
        yield shared


def make_env(tasks: list[Task], renderer: Renderer, **kwargs: object) -> FrontendEnv:
    kwargs.setdefault("simulator", ScriptedSimulator(["Make the header darker."]))
    return FrontendEnv(tasks=tasks, embedder="test", renderer=renderer, **kwargs)  # type: ignore[arg-type]


def perturbed(html: str) -> str:
    """The same page with its colours changed: similar, not identical."""
    return html.replace("bg-", "bg-red-500 x-", 3)


def test_episode_through_a_real_http_vision_human(tasks: list[Task], renderer: Renderer) -> None:
    task = tasks[2]
    with StubOpenAIServer(default=lambda request: "The header should be dark and wider.") as server:
        env = gym.make(
            "ColBench-Frontend-v0",
            tasks=tasks,
            simulator="openai:vision-human",
            simulator_options={"base_url": server.base_url, "api_key": "k"},
            embedder="test",
            renderer=renderer,
        ).unwrapped
        obs, info = env.reset(options={"task_id": task.task_id})
        assert task.problem_description in obs and task.ground_truth not in obs
        assert "tailwindcss@2.2.19" in obs and not info["has_page"]

        # Turn 1: a question, no page: the human sees the reference and is told there is no page yet.
        obs, reward, terminated, _, info = env.step("Which colours do you like?")
        assert obs == "The header should be dark and wider." and reward == 0.0 and not terminated
        content = server.requests[-1]["messages"][1]["content"]
        images = [p for p in content if p["type"] == "image_url"]
        assert len(images) == 1  # the reference only
        reference_png = base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1])
        assert reference_png.startswith(b"\x89PNG")

        # Turn 2: a page: rendered and shown next to the reference.
        obs, reward, terminated, _, info = env.step(f"First draft:\n```html\n{perturbed(task.ground_truth)}\n```")
        assert not terminated and info["has_page"] and env.page_png is not None
        content = server.requests[-1]["messages"][1]["content"]
        shown = [base64.b64decode(p["image_url"]["url"].split(",", 1)[1]) for p in content if p["type"] == "image_url"]
        assert shown == [reference_png, env.page_png]
        assert env.dialogue[-2].image == env.page_png  # the agent turn keeps its screenshot

        # Final turn: the reference page itself scores the maximum.
        _, reward, terminated, truncated, info = env.step("I WANT TO ANSWER:\n" + task.ground_truth)
        assert terminated and not truncated and info["termination"] == "answered"
        assert reward == pytest.approx(1.0, abs=1e-6) and info["similarity"] == reward
        assert info["score"]["status"] == "ok" and info["answer_html"] == task.ground_truth.strip()
        assert info["usage"]["simulator"]["calls"] == 2
        env.close()


def test_rewards_rank_identical_above_similar_above_unrelated(tasks: list[Task], renderer: Renderer) -> None:
    env = make_env(tasks, renderer)
    task, other = tasks[0], tasks[7]
    rewards = {}
    for name, page in {
        "same": task.ground_truth,
        "similar": perturbed(task.ground_truth),
        "other": other.ground_truth,
    }.items():
        env.reset(options={"task_id": task.task_id})
        _, rewards[name], terminated, _, _ = env.step("I WANT TO ANSWER:\n" + page)
        assert terminated
    assert rewards["same"] == pytest.approx(1.0, abs=1e-6)
    assert rewards["same"] > rewards["similar"] > rewards["other"] > 0.0


def test_the_last_page_is_the_answer_at_the_turn_cap(tasks: list[Task], renderer: Renderer) -> None:
    env = make_env(tasks, renderer, max_turns=3)
    task = tasks[1]
    env.reset(options={"task_id": task.task_id})
    env.step(task.ground_truth)  # the reference page in turn 1
    env.step("Do you want a footer?")  # no page in turn 2
    _, reward, terminated, _, info = env.step("Thanks, that is all.")  # turn 3: no page, the cap ends it
    assert terminated and info["termination"] == "turn_limit"
    assert reward == pytest.approx(1.0, abs=1e-6) and info["answer_html"] == task.ground_truth.strip()


def test_no_page_and_unrenderable_pages_score_the_floor(tasks: list[Task], renderer: Renderer) -> None:
    env = make_env(tasks, renderer)
    env.reset(options={"task_id": tasks[3].task_id})
    _, reward, terminated, _, info = env.step("I WANT TO ANSWER: I could not build it.")
    assert terminated and reward == 0.0 and info["score"]["status"] == "no_answer"

    env.reset(options={"task_id": tasks[3].task_id})
    _, reward, terminated, _, info = env.step("I WANT TO ANSWER:\n" + RUNAWAY)
    assert terminated and reward == 0.0 and info["score"]["status"] == "render_failed"
    assert info["score"]["answer_render_status"] == "timeout"

    # The harness is unharmed: the next episode renders and scores normally.
    env.reset(options={"task_id": tasks[3].task_id})
    _, reward, _, _, _ = env.step("I WANT TO ANSWER:\n" + tasks[3].ground_truth)
    assert reward == pytest.approx(1.0, abs=1e-6)


def test_a_reference_that_cannot_render_is_an_infrastructure_error(renderer: Renderer) -> None:
    broken = Task("broken", "frontend", "A page that never loads.", RUNAWAY, RUNAWAY)
    env = make_env([broken], renderer)
    env.reset()
    with pytest.raises(InfraError, match="reference page did not render"):
        env.step("What should it show?")
    assert env.dialogue == ()  # the failed step changed nothing: it can be retried
    with pytest.raises(InfraError, match="broken"):
        env.step("I WANT TO ANSWER:\n<html><body>x</body></html>")


def test_astep_runs_episodes_concurrently(tasks: list[Task], renderer: Renderer) -> None:
    seen: list[bool] = []

    def human(task: Task, dialogue: list[Turn]) -> str:
        seen.append(dialogue[-1].image is not None)
        return "Closer."

    envs = [make_env(tasks, renderer, simulator=ScriptedSimulator(human)) for _ in range(4)]

    async def episode(env: FrontendEnv, task: Task) -> float:
        env.reset(options={"task_id": task.task_id})
        await env.astep(perturbed(task.ground_truth))
        _, reward, terminated, _, info = await env.astep("I WANT TO ANSWER:\n" + task.ground_truth)
        assert terminated and info["score"]["status"] == "ok", info["score"]
        return reward

    async def main() -> list[float]:
        return await asyncio.gather(*(episode(env, task) for env, task in zip(envs, tasks, strict=False)))

    assert asyncio.run(main()) == [pytest.approx(1.0, abs=1e-6)] * 4
    assert seen == [True] * 4


def test_wrong_domain_is_a_clear_error(bundled_tasks: list[Task], renderer: Renderer) -> None:
    with pytest.raises(ConfigError, match="needs frontend tasks"):
        make_env(bundled_tasks, renderer)
