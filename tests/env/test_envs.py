"""Every registered env id passes Gymnasium's checker with offline parts (scripted human, local sandbox, test embedder),
and rejects bad arguments when it is made or reset, in one line, before any model is called."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from openai_stub import StubOpenAIServer

import colbench  # noqa: F401 (registers the ids)
from colbench.domains.backend.scorer import BackendScorer
from colbench.env.registration import env_ids
from colbench.errors import ColbenchError, ConfigError
from colbench.humans.simulator import ScriptedSimulator
from colbench.tasks import Task, load
from colbench.types.task import PlusTests


def offline_kwargs(env_id: str, request: pytest.FixtureRequest) -> dict[str, object]:
    human = ScriptedSimulator(["Make it simpler."])
    if env_id in ("ColBench-Backend-v0", "ColBench-Backend-v1", "ColBench-Backend-v2"):
        tasks: list[Task] = request.getfixturevalue("bundled_tasks")
        kwargs = gym.spec(env_id).kwargs
        plus = bool(kwargs.get("plus_tests"))
        if plus:  # v2 judges plus tests: each task's first call again, under a name of its own
            tasks = [replace(t, plus=PlusTests((("plus1", t.test_cases[0][1]),), "hand/0")) for t in tasks]
        scorer = BackendScorer(request.getfixturevalue("bwrap_sandbox"), rules=kwargs["rules"], plus=plus)
        return {"tasks": tasks, "simulator": human, "scorer": scorer}
    if env_id == "ColBench-Human-v0":
        tasks = request.getfixturevalue("bundled_tasks")
        return {"tasks": tasks, "agent": "scripted:copycat", "scorer": request.getfixturevalue("scorer")}
    if env_id in ("ColBench-Frontend-v0", "ColBench-Frontend-v1"):
        request.applymarker(pytest.mark.browser)
        return {
            "tasks": load("frontend-sample"),
            "simulator": human,
            "embedder": "test",  # the process's shared renderer: gym deep-copies kwargs, a browser cannot be copied
        }
    raise AssertionError(f"{env_id} is registered but has no offline configuration in this test: add one")


@pytest.mark.parametrize("env_id", env_ids())
def test_check_env_on_every_registered_id(env_id: str, request: pytest.FixtureRequest) -> None:
    env = gym.make(env_id, **offline_kwargs(env_id, request))
    check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset(seed=1)
    assert isinstance(obs, str) and info["turn"] == 0
    if env_id != "ColBench-Human-v0":  # the human's env scores the agent's answer, under the backend's current id
        assert info["env_id"] == env_id
    env.close()


# -- arguments checked when the env is made, before any model, sandbox or task is touched ------------------------------

ENDPOINT_ROLE = {"ColBench-Human-v0": "agent"}  # the other ids' model is their simulated human
COMMON_BAD: list[tuple[dict[str, object], str]] = [
    ({"max_turns": 0}, "max_turns=0"),
    ({"max_turns": "10"}, "max_turns='10'"),
    ({"max_turns": True}, "max_turns=True"),
    ({"render_mode": "human"}, "render_mode='human'"),
    ({"tasks": 42}, "tasks=42"),
    ({"tasks": "no-such-split"}, "tasks='no-such-split'"),
    ({"tasks": [1, 2]}, "found a int"),
    ({"scorer": "bwrap"}, "scorer='bwrap'"),
]
SIMULATED_HUMAN_BAD: list[tuple[dict[str, object], str]] = [
    ({"expose_hidden": "yes"}, "expose_hidden='yes'"),
    ({"leak_policy": 3}, "leak_policy=3"),
    ({"leak_policy": "sometimes"}, "'sometimes'"),
    ({"simulator": 42}, "simulator=42"),
    ({"simulator": "openai:"}, "'openai:'"),
    ({"simulator_options": "fast"}, "simulator_options='fast'"),
    ({"simulator_options": {"temprature": 0.0}}, "temprature"),
    ({"simulator_options": {"temperature": "hot"}}, "simulator_options['temperature']='hot': expected float"),
    ({"simulator_options": {"max_tokens": 0}}, "simulator_options['max_tokens']=0"),
    ({"simulator_options": {"extra_body": [1]}}, "expected Mapping or None"),
    ({"simulator": ScriptedSimulator(["Hm."]), "simulator_options": {"max_tokens": 5}}, "simulator_options="),
]
BAD: dict[str, list[tuple[dict[str, object], str]]] = {
    "backend": [
        ({"sandbox": "vm"}, "sandbox='vm': expected one of 'auto', 'docker', 'bwrap'"),
        ({"sandbox": 3}, "sandbox=3"),
        ({"rules": 4}, "rules=4"),
        ({"plus_tests": "yes"}, "plus_tests='yes'"),
        ({"rules": 2, "plus_tests": True}, "no env id scores so"),
        ({"tasks": "frontend-sample"}, "split 'frontend-sample' holds frontend tasks"),
    ],
    "frontend": [
        ({"embedder": "resnet"}, "embedder='resnet'"),
        ({"embedder": 3}, "embedder=3"),
        ({"renderer": "chromium"}, "renderer='chromium'"),
        ({"reward": "pixels"}, "reward='pixels': expected one of 'clip', 'visual'"),
        ({"tasks": "backend-sample"}, "split 'backend-sample' holds backend tasks"),
    ],
    "human": [
        ({"agent": 42}, "agent=42"),
        ({"agent": "gpt-4o"}, "'gpt-4o'"),
        ({"agent_options": [1]}, "agent_options=[1]"),
        ({"agent_options": {"timeout_s": "slow"}}, "agent_options['timeout_s']='slow'"),
        ({"leak_penalty": -1}, "leak_penalty=-1"),
        ({"leak_penalty": "1"}, "leak_penalty='1'"),
    ],
}


def family(env_id: str) -> str:
    return "human" if env_id == "ColBench-Human-v0" else gym.spec(env_id).entry_point.split(".")[2]


def bad_cases() -> list[object]:
    cases = []
    for env_id in env_ids():
        own = BAD[family(env_id)] + COMMON_BAD + (SIMULATED_HUMAN_BAD if family(env_id) != "human" else [])
        cases += [pytest.param(env_id, bad, says, id=f"{env_id}-{says[:40]}") for bad, says in own]
    return cases


def endpoint_kwargs(env_id: str, stub: StubOpenAIServer) -> dict[str, object]:
    """A model spec pointed at ``stub`` (which counts what it is sent) and tasks of the id's domain."""
    role = ENDPOINT_ROLE.get(env_id, "simulator")
    tasks = "frontend-sample" if family(env_id) == "frontend" else "backend-sample"
    extra: dict[str, object] = {"embedder": "test"} if family(env_id) == "frontend" else {}
    return {"tasks": tasks, role: "openai:m", f"{role}_options": {"base_url": stub.base_url, "api_key": "k"}, **extra}


@pytest.mark.parametrize(("env_id", "bad", "says"), bad_cases())
def test_a_bad_argument_fails_at_make_in_one_line_before_any_model_call(
    env_id: str, bad: dict[str, object], says: str, stub: StubOpenAIServer
) -> None:
    kwargs = {**endpoint_kwargs(env_id, stub), **bad}
    if "simulator" in bad or "agent" in bad:
        kwargs.pop(f"{ENDPOINT_ROLE.get(env_id, 'simulator')}_options")
        kwargs.update({k: v for k, v in bad.items() if k.endswith("_options")})
    for make in (lambda: gym.make(env_id, **kwargs), lambda: gym.make_vec(env_id, num_envs=2, **kwargs)):
        with pytest.raises(ConfigError) as caught:
            make()
        message = str(caught.value)
        assert says in message and "\n" not in message, message
    assert stub.request_count == 0


@pytest.mark.parametrize("env_id", env_ids())
@pytest.mark.parametrize(
    ("seed", "options", "says"),
    [
        (None, "task", "reset(options)='task'"),
        (None, {"taks_id": "x"}, "unknown: taks_id"),
        (None, {"task_id": None}, "reset(options['task_id'])=None"),
        ("1", None, "reset(seed)='1'"),
        (-1, None, "reset(seed)=-1"),
    ],
)
def test_bad_reset_arguments_are_errors_not_ignored(
    env_id: str, seed: object, options: object, says: str, request: pytest.FixtureRequest
) -> None:
    env = gym.make(env_id, **offline_kwargs(env_id, request))
    with pytest.raises(ConfigError) as caught:
        env.reset(seed=seed, options=options)  # type: ignore[arg-type]
    assert says in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ColbenchError, match=r"call reset\(\) before"):  # the failed reset started nothing
        env.step("Hello?")
    env.close()


@pytest.mark.parametrize("env_id", env_ids())
def test_step_before_reset_raises_colbench_error(env_id: str, request: pytest.FixtureRequest) -> None:
    """docs/episode.md: ``gym.make`` returns the env itself (no order-enforcing wrapper), which raises ColbenchError."""
    env = gym.make(env_id, **offline_kwargs(env_id, request))
    assert env is env.unwrapped
    with pytest.raises(ColbenchError, match=r"^call reset\(\) before step\(\)$"):
        env.step("Hello?")


@pytest.mark.parametrize("env_id", ["ColBench-Frontend-v0", "ColBench-Frontend-v1"])
@pytest.mark.parametrize("embedder", ["clip", "clip-center-crop", "clip:/no/such/weights.pt"])
def test_a_frontend_env_without_clip_weights_refuses_to_start_unless_the_test_embedder_is_named(
    env_id: str, embedder: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """Never random weights, never a failure at the first score: the env is not made at all."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    for name in ("COLBENCH_CLIP_WEIGHTS", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # open_clip's own download cache, ~/.cache/clip
    with pytest.raises(ConfigError) as caught:
        gym.make(env_id, tasks="frontend-sample", embedder=embedder)
    message = str(caught.value)
    assert f"embedder={embedder!r}" in message and "embedder='test'" in message and "\n" not in message, message
    env = gym.make(env_id, tasks="frontend-sample", embedder="test")  # named: made, nothing loaded yet
    assert env.unwrapped.env_id == env_id
    env.close()
