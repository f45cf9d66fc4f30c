"""verifiers: the taskset id the docs give loads with no user file. The launch docs/integrations.md shows (block
``verifiers``) is parsed by verifiers' own eval CLI config and the env loaded by id with its loader, in a fresh
interpreter started outside the checkout (so only what the install put on the path can answer the id)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from doc_launches import launch, shell_words

pytest.importorskip("verifiers.v1")
pytestmark = pytest.mark.slow  # importing verifiers in a fresh interpreter: 7-15 s each

LOAD = textwrap.dedent(
    """
    import json, sys
    from pydantic_config import cli
    import verifiers.v1 as vf
    from verifiers.v1.cli.resolve import narrow_config, with_positional_taskset
    from verifiers.v1.configs.cli.eval import EvalConfig

    argv = with_positional_taskset(json.loads(sys.argv[1]))  # what verifiers' `eval` main does first
    imported_before = "colbench.integrations.verifiers" in sys.modules or "colbench_verifiers" in sys.modules
    config_type = narrow_config(EvalConfig, argv)
    sys.argv = ["eval", *argv]
    config = cli(config_type)
    env = vf.load_environment(config.env)
    import colbench_verifiers
    print(json.dumps({
        "imported_before": imported_before, "env": type(env).__module__ + "." + type(env).__name__,
        "config": type(config.env).__name__, "taskset": config.env.taskset.id, "tasks": config.env.taskset.tasks,
        "max_turns": config.env.taskset.max_turns, "env_options": config.env.env_options,
        "rollouts": config.num_rollouts, "model": config.model, "module": colbench_verifiers.__file__,
    }))
    """
)


def load_in_fresh_process(argv: list[str], cwd: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    done = subprocess.run(
        [sys.executable, "-c", LOAD, json.dumps(argv)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_the_documented_eval_launch_loads_colbench_by_its_id(tmp_path: Path) -> None:
    words = shell_words(launch("verifiers"))
    assert words[0] == "eval"  # verifiers' console script for verifiers.v1.cli.eval.main
    result = load_in_fresh_process(words[1:], tmp_path)
    assert result["imported_before"] is False
    assert result["env"] == "colbench.integrations.verifiers.ColbenchEnv"
    assert (result["config"], result["taskset"]) == ("ColbenchEnvConfig", "colbench_verifiers")
    assert (result["tasks"], result["max_turns"], result["rollouts"], result["model"]) == (
        "backend-test",
        10,
        4,
        "my-policy",
    )
    assert result["env_options"] == {
        "simulator": "openai:gpt-4o",
        "simulator_options": {"base_url": "https://api.openai.com/v1"},
    }
    assert not (tmp_path / "colbench_verifiers.py").exists()  # nothing written by the user
    assert Path(str(result["module"])).parts[-2:] == ("colbench_verifiers", "__init__.py")


def test_the_hyphenated_id_loads_too(tmp_path: Path) -> None:
    result = load_in_fresh_process(["--env.taskset.id", "colbench-verifiers", "--env.taskset.tasks", "x"], tmp_path)
    assert result["env"] == "colbench.integrations.verifiers.ColbenchEnv" and result["tasks"] == "x"
