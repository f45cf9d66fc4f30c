"""SkyRL's typed config: the launch docs/integrations.md shows (block ``skyrl``) fed to SkyRL 0.3.0's own loader with
colbench's config class, and the env made from the parsed section the way SkyRL's generator makes it.

skyrl 0.3.0 is installed ``--no-deps`` by scripts/setup.sh (its trainer needs CUDA): its config dataclasses and
builder import on CPU. ``SkyRLTrainConfig.__post_init__`` imports SkyRL's inference backends (torch, and pydantic
models that need Python 3.12), so the whole ``from_cli_overrides`` runs where those import; elsewhere every section
is built by SkyRL's ``build_nested_dataclass``, the function ``from_cli_overrides`` ends in."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from doc_launches import launch, shell_words

pytest.importorskip("skyrl.train.config")
pytest.importorskip("skyrl_gym")

import skyrl_gym
from omegaconf import OmegaConf
from skyrl.train.config import EnvironmentConfig, SkyRLTrainConfig
from skyrl.train.config.config import build_nested_dataclass, validate_dict_keys_against_dataclass

from colbench.integrations.skyrl import ColbenchSkyRLEnv, skyrl_rows
from colbench.integrations.skyrl_train import ColbenchEnvConfig, ColbenchSkyRLConfig, load_config
from colbench.tasks import load

ENTRY = ["python", "-m", "colbench.integrations.skyrl_train"]
# What a CPU test can play instead of the page's simulator and sandbox (OpenAI, Docker); later overrides win.
PLAYABLE = [
    "environment.skyrl_gym.colbench.tasks=backend-sample",
    "environment.skyrl_gym.colbench.simulator=scripted",
    "environment.skyrl_gym.colbench.sandbox=bwrap",
]


def documented_overrides() -> list[str]:
    words = shell_words(launch("skyrl"))
    assert words[: len(ENTRY)] == ENTRY, words
    return words[len(ENTRY) :]


def _whole_loader_imports() -> bool:
    try:
        import skyrl.backends.skyrl_train.inference_servers.utils  # noqa: F401
    except Exception:  # SkyRL's backends: torch, and pydantic models that refuse Python 3.11
        return False
    return True


def parsed(overrides: list[str]) -> dict[str, Any]:
    """Each section of ``ColbenchSkyRLConfig`` built by SkyRL's own builder from SkyRL's own CLI parsing (what
    ``from_cli_overrides`` does, but for the top-level ``__post_init__``, which only fills defaults and needs SkyRL's
    inference backends)."""
    raw = OmegaConf.to_container(OmegaConf.from_cli(overrides), resolve=True)
    assert isinstance(raw, dict)
    validate_dict_keys_against_dataclass(ColbenchSkyRLConfig, raw)
    return {
        f.name: build_nested_dataclass(f.type, raw.get(f.name, {})) for f in dataclasses.fields(ColbenchSkyRLConfig)
    }


def test_skyrls_own_config_refuses_the_colbench_section() -> None:
    """Why the subclass exists: the documented section through SkyRL's stock ``environment`` dataclass."""
    raw = OmegaConf.to_container(OmegaConf.from_cli(documented_overrides()), resolve=True)
    assert isinstance(raw, dict)
    with pytest.raises(ValueError, match=r"Invalid fields \{'colbench'\} for SkyRLGymConfig"):
        build_nested_dataclass(EnvironmentConfig, raw["environment"])
    assert SkyRLTrainConfig.__dataclass_fields__["environment"].type is EnvironmentConfig


def test_the_documented_launch_parses_with_colbenchs_config() -> None:
    sections = parsed(documented_overrides())
    env = sections["environment"]
    assert env.env_class == "colbench"
    section = env.skyrl_gym.colbench
    assert isinstance(section, ColbenchEnvConfig)  # typed, not a loose dict
    assert (section.env_id, section.tasks, section.simulator, section.sandbox) == (
        "ColBench-Backend-v2",
        "backend-train",
        "openai:gpt-4o",
        "docker",
    )
    assert section.simulator_options == {"base_url": "https://api.openai.com/v1"}
    assert sections["generator"].max_turns == 10
    assert sections["data"].train_data == ["colbench_train.parquet"]
    assert sections["trainer"].policy.model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert env.skyrl_gym.search.topk == 3  # SkyRL's own env sections keep their defaults beside colbench's


@pytest.mark.skipif(not _whole_loader_imports(), reason="SkyRL's backends need torch and Python 3.12 (module doc)")
def test_the_whole_loader_takes_the_documented_launch() -> None:
    config = load_config(documented_overrides())
    assert isinstance(config, ColbenchSkyRLConfig)
    assert config.environment.skyrl_gym.colbench.sandbox == "docker"
    assert config.generator.max_input_length == config.trainer.max_prompt_length  # SkyRL's __post_init__ ran


@pytest.mark.parametrize(
    ("override", "refused"),
    [("environment.skyrl_gym.colbench.simulater=scripted", "simulater"), ("environment.colbench.tasks=x", "colbench")],
)
def test_a_misspelt_option_is_refused_by_skyrls_loader(override: str, refused: str) -> None:
    with pytest.raises(ValueError, match=rf"Invalid fields \{{'{refused}'\}}"):
        parsed([*documented_overrides(), override])


def test_the_env_is_made_from_the_parsed_section_as_skyrls_generator_makes_it() -> None:
    overrides = [*documented_overrides(), *PLAYABLE, "environment.skyrl_gym.colbench.options.truth_policy=flag"]
    sections = parsed(overrides)
    skyrl_gym_cfg, max_turns = sections["environment"].skyrl_gym, sections["generator"].max_turns
    row = skyrl_rows("backend-sample", max_turns=max_turns)[4]
    task = next(t for t in load("backend-sample") if t.task_id == row["extra_info"]["task_id"])
    from colbench.integrations.skyrl import register

    register()  # what colbench.integrations.skyrl_train does in SkyRL's Ray task
    # SkyRLGymGenerator: env_config = getattr(self.skyrl_gym_cfg, env_class, dict()); extras gain max_turns
    env_config = getattr(skyrl_gym_cfg, row["env_class"], {})
    extras = {"extra_info": row["extra_info"], "max_turns": max_turns}
    env = skyrl_gym.make(row["env_class"], env_config=env_config, extras=extras)
    assert isinstance(env, ColbenchSkyRLEnv) and env.max_turns == 10
    history, _ = env.init(row["prompt"])
    assert history == row["prompt"]  # the row's prompt states the same turn cap as the config
    out = env.step(f"I WANT TO ANSWER:\n{task.ground_truth}")
    assert out["done"] and out["reward"] == 1.0 and out["metadata"]["success"] is True
    json.dumps(out["metadata"])
    env.close()
