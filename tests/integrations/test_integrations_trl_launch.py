"""TRL launches as the docs show them, checked by the parsers they go through: each marked command line (the GPU
launch in docs/integrations.md, the commands in examples/trl_grpo/README.md) by its script's own
``HfArgumentParser`` (an unknown flag fails there), then the config the script makes from it by TRL's
``GRPOConfig``; each ``GRPOConfig(...)`` of the TRL section's Python blocks by ``GRPOConfig`` itself."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from doc_launches import launch, launches, shell_words
from paths import REPO

pytest.importorskip("trl")

EXAMPLES = REPO / "examples" / "trl_grpo"
README = EXAMPLES / "README.md"


def example(script: str) -> ModuleType:
    """The example script as a module (its directory on the path, as when it runs: it imports grpo_lib)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"trl_example_{script}", EXAMPLES / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def parsed(block: str) -> tuple[ModuleType, Any]:
    """The script a documented command runs, and its ``Config`` as the script's own parser reads the flags."""
    from transformers import HfArgumentParser

    words = shell_words(block)
    assert words[0] == "python" and words[1].startswith("examples/trl_grpo/"), words[:2]
    module = example(Path(words[1]).stem)
    (config,) = HfArgumentParser(module.Config).parse_args_into_dataclasses(args=words[2:])
    return module, config


def trl_config(module: ModuleType, config: Any, tmp_path: Path) -> Any:
    """The ``GRPOConfig`` the script makes from ``config`` (its output under ``tmp_path``). On a machine without a
    GPU, ``--bf16`` is checked as parsed and the config made for the CPU: Transformers refuses bf16 there as a fact
    about the machine, not the flags."""
    import torch
    from grpo_lib import grpo_config  # the examples' shared module (on the path once an example is loaded)

    machine = {} if torch.cuda.is_available() or not config.bf16 else {"bf16": False, "cpu": True}
    config = dataclasses.replace(config, out=str(tmp_path), **machine)
    if hasattr(module, "tool_settings"):
        return grpo_config(config, [config.leak_weight], module.tool_settings(config))
    return grpo_config(config, [1.0, config.leak_weight])


def test_the_documented_gpu_launch_parses_and_makes_trls_config(tmp_path: Path) -> None:
    module, config = parsed(launch("trl"))
    assert (config.model, config.tasks, config.max_turns, config.turn_tokens) == (
        "Qwen/Qwen2.5-7B-Instruct",
        "backend-train",
        10,
        512,
    )
    assert config.simulator_base_url == "http://human:8000/v1" and config.bf16
    grpo = trl_config(module, config, tmp_path)
    assert (grpo.num_generations, grpo.per_device_train_batch_size, grpo.max_steps) == (8, 8, 500)
    assert grpo.reward_weights == [1.0, 1.0]


def test_an_unknown_flag_fails_in_the_scripts_parser() -> None:
    from transformers import HfArgumentParser

    words = shell_words(launch("trl"))
    module = example("train_grpo")
    with pytest.raises(ValueError, match="n_samples_per_prompt"):
        HfArgumentParser(module.Config).parse_args_into_dataclasses(args=[*words[2:], "--n_samples_per_prompt", "8"])


@pytest.mark.parametrize("name", sorted(launches(README)))
def test_each_readme_command_parses_and_makes_trls_config(name: str, tmp_path: Path) -> None:
    module, config = parsed(launches(README)[name])
    grpo = trl_config(module, config, tmp_path)
    assert grpo.num_generations == config.num_generations and grpo.max_steps == config.max_steps
    if hasattr(module, "tool_settings"):  # the tools path: TRL's own length and tool-loop bounds
        assert grpo.max_completion_length == config.max_completion_length
        assert grpo.max_tool_calling_iterations == config.max_turns + 1


def test_the_readme_marks_every_command(tmp_path: Path) -> None:
    """Each example's CPU and GPU commands are marked, so none escapes the parser."""
    assert sorted(launches(README)) == [
        "train_grpo-cpu",
        "train_grpo-gpu",
        "train_grpo_tools-cpu",
        "train_grpo_tools-gpu",
    ]


def grpo_config_calls(block: str) -> list[dict[str, Any]]:
    """The keyword arguments of each ``GRPOConfig(...)`` call in a Python block (a ``...`` among them: left out)."""
    calls = []
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "GRPOConfig":
            assert all(isinstance(a, ast.Constant) and a.value is Ellipsis for a in node.args)
            calls.append({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None})
    return calls


@pytest.mark.parametrize("name", ["trl-python", "trl-tools-python"])
def test_the_python_blocks_grpo_config_is_trls(name: str, tmp_path: Path) -> None:
    """TRL's own dataclass takes the block's arguments (a misspelt one is a TypeError there), on the CPU here."""
    from trl import GRPOConfig

    (arguments,) = grpo_config_calls(launch(name))
    GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, **arguments)
    with pytest.raises(TypeError, match="n_samples_per_prompt"):
        GRPOConfig(output_dir=str(tmp_path), n_samples_per_prompt=8, **arguments)
