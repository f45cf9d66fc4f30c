"""verl: the colbench agent loop, run by verl 0.9.1's own AgentLoopBase in the venv set-up makes for it
(``.venv-verl``), against a fake server manager standing in for verl's inference servers: reward, the human's reply
appended with mask 0 in the chat template's markup, the policy's tokens alone with mask 1, and lost episodes masked
out. Every episode of the module plays in one subprocess (importing verl is most of its time)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from doc_launches import launch, shell_words
from failing_human import FAILING_TURNS, human_failing_at
from paths import REPO

from colbench.tasks import Task

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"

SCRIPT = r"""
import asyncio, json, os, sys
import hydra
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.protocol import DataProto
from verl.trainer.ppo.utils import create_rl_dataset, need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.import_utils import resolve_config_path
from verl.workers.rollout.replica import TokenOutput
from colbench.integrations.verl import ColbenchAgentLoop

model, plan = sys.argv[1], json.loads(sys.argv[2])
tok = AutoTokenizer.from_pretrained(model)
CONFIG_DIR = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")  # what main_ppo's @hydra.main reads

class FakeServerManager:
    def __init__(self, turns): self.turns, self.calls, self.outputs = turns, [], []
    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        self.calls.append(request_id)
        ids = tok.encode(self.turns.pop(0), add_special_tokens=False) + [tok.eos_token_id]
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")

def composed(overrides):
    # main_ppo's config: ppo_trainer from verl's packaged config dir with the command line's overrides, then the
    # checks main() runs before it starts Ray
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    return cfg

def summary(out, server):
    ids, mask = out.response_ids, out.response_mask
    return {
        "registered": "colbench" in _agent_loop_registry,
        "reward": out.reward_score, "turns": out.num_turns, "one_request": len(set(server.calls)) == 1,
        "policy": tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True),
        "env": tok.decode([t for t, m in zip(ids, mask) if not m]),
        "text": tok.decode(out.prompt_ids + ids),
        "trained": sum(mask), "generated": sum(len(t) for t in server.outputs),
        # the tokens marked 1 are, in order, exactly the tokens the server sampled
        "trained_as_sampled": [t for t, m in zip(ids, mask) if m] == [t for o in server.outputs for t in o],
        "lost": out.extra_fields["colbench_lost"], "error": out.extra_fields["colbench_error"],
    }

async def play(task_id, turns, options):
    os.environ["COLBENCH_VERL"] = json.dumps(options)  # read when the episode starts
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 4096}}, "data": {}})
    server = FakeServerManager(turns)
    loop = ColbenchAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok, processor=None,
                             dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    out = await loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"task_id": task_id}, agent_name="colbench")
    return summary(out, server)

async def documented(overrides, task_id, turns, options):
    # docs -> verl: the launch composed, the data block's parquet read by verl's RLHFDataset and collate_fn into a
    # batch, the loop file loaded and the row's loop made as AgentLoopWorker does, the episode run with the row
    cfg = composed(overrides)
    os.environ["COLBENCH_VERL"] = json.dumps(options)
    rollout = cfg.actor_rollout_ref.rollout
    for entry in OmegaConf.load(resolve_config_path(rollout.agent.agent_loop_config_path)):
        _agent_loop_registry[entry.name] = entry
    dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tok, None, is_train=True)
    rows = [dataset[i] for i in range(len(dataset))]
    batch = DataProto.from_single_dict(collate_fn([r for r in rows if r["task_id"] == task_id]))
    if "agent_name" not in batch.non_tensor_batch:  # AgentLoopWorker.generate_sequences
        batch.non_tensor_batch["agent_name"] = [rollout.agent.default_agent_loop]
    row = {k: v[0] for k, v in batch.non_tensor_batch.items()}
    server = FakeServerManager(turns)
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry[row.pop("agent_name")], trainer_config=DictConfigWrap(config=cfg),
        server_manager=server, tokenizer=tok, processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data), tools=ToolListWrap([]),
    )
    out = await loop.run({"temperature": 1.0}, **row)
    return summary(out, server) | {"loop": type(loop).__name__, "rows": len(rows)}

def checked(overrides):
    try:
        cfg = composed(overrides)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    rollout = cfg.actor_rollout_ref.rollout
    return {"ok": True, "n": rollout.n, "response_length": rollout.response_length,
            "loops": rollout.agent.agent_loop_config_path, "default": rollout.agent.default_agent_loop,
            "multi_turn": rollout.multi_turn.enable, "prompt_key": cfg.data.prompt_key}

async def main():
    done = {name: await play(**episode) for name, episode in plan["episodes"].items()}
    done |= {f"compose/{name}": checked(overrides) for name, overrides in plan["compose"].items()}
    done["documented"] = await documented(**plan["documented"])
    print(json.dumps(done))

asyncio.run(main())
"""

OPTIONS = {"tasks": "backend-sample", "max_turns": 3, "sandbox": "bwrap"}
pytestmark = pytest.mark.timeout(900)  # the subprocess takes about 70 s; a loaded machine has taken ten times that
QUESTION = "What should happen with an empty input?"


def documented_launch() -> tuple[dict[str, Any], list[str]]:
    """The launch docs/integrations.md shows: the env's options it exports, and main_ppo's Hydra overrides."""
    words = shell_words(launch("verl"))
    start = words.index("python3")
    assert words[start : start + 3] == ["python3", "-m", "verl.trainer.main_ppo"], words
    assert words[0] == "export" and words[1].startswith("COLBENCH_VERL=") and start == 2
    return json.loads(words[1].split("=", 1)[1]), words[start + 3 :]


# a key verl's config does not have (the env's turn cap belongs in COLBENCH_VERL), and one misspelt
UNKNOWN = ["actor_rollout_ref.rollout.agent.max_turns=10", "actor_rollout_ref.rollout.agent.agent_loop_config=x.yaml"]


@pytest.fixture(scope="module")
def episodes(exported_model: Path, bundled_tasks: list[Task], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every episode and composed config the tests look at, by name, in one verl subprocess."""
    if not VERL_PYTHON.exists():
        pytest.skip("the verl venv is not there (scripts/setup.sh makes .venv-verl)")
    answer = f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}"
    wrong = ["Hi?", "Hm?", "def f(): pass"]
    plays: dict[str, dict[str, Any]] = {
        "answered": {"task_id": bundled_tasks[2].task_id, "turns": [QUESTION, answer], "options": OPTIONS},
        "capped": {"task_id": bundled_tasks[0].task_id, "turns": wrong, "options": OPTIONS},
    }
    # the docs' blocks, run here: the data block on the bundled split, the env's options with the scripted human
    options, overrides = documented_launch()
    where = tmp_path_factory.mktemp("verl")
    data = launch("verl-data")
    assert f'"{options["tasks"]}"' in data
    subprocess.run(
        [str(VERL_PYTHON), "-c", data.replace(f'"{options["tasks"]}"', '"backend-sample"')], cwd=where, check=True
    )
    loops = launch("verl-loops")
    key = "actor_rollout_ref.rollout.agent.agent_loop_config_path="
    (where / next(o.removeprefix(key) for o in overrides if o.startswith(key))).write_text(loops)
    env = {k: v for k, v in options.items() if k != "simulator_options"}
    env |= {"tasks": "backend-sample", "simulator": "scripted", "sandbox": "bwrap"}
    documented = {"overrides": overrides, "task_id": bundled_tasks[2].task_id, "turns": [QUESTION, answer]}
    compose = {"documented": overrides} | {f"unknown {key}": [*overrides, key] for key in UNKNOWN}
    with human_failing_at(1) as first, human_failing_at(2) as later:
        for turn, human in zip(FAILING_TURNS, (first, later), strict=True):
            plays[f"lost at {turn}"] = {"task_id": bundled_tasks[0].task_id, "turns": wrong, "options": OPTIONS | human}
        plan = {"episodes": plays, "compose": compose, "documented": documented | {"options": env}}
        done = subprocess.run(
            [str(VERL_PYTHON), "-c", SCRIPT, str(exported_model), json.dumps(plan)],
            capture_output=True,
            text=True,
            timeout=840,
            env=os.environ,
            cwd=where,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_verl_runs_a_colbench_episode(episodes: dict, bundled_tasks: list[Task]) -> None:
    out, answer = episodes["answered"], f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}"
    assert out["registered"] and out["one_request"] and out["reward"] == 1.0 and out["turns"] == 4
    assert out["trained"] == out["generated"] and out["trained_as_sampled"] and not out["lost"] and out["error"] is None
    assert out["policy"] == QUESTION + answer  # mask 1: the policy's two turns, nothing else
    reply = "I don't know."  # the scripted human's default
    assert out["env"] == f"\n<|im_start|>user\n{reply}<|im_end|>\n<|im_start|>assistant\n"  # mask 0: the human's turn
    assert f"<|im_start|>assistant\n{QUESTION}<|im_end|>\n<|im_start|>user\n{reply}" in out["text"]


def test_the_turn_cap_ends_a_verl_episode(episodes: dict) -> None:
    out = episodes["capped"]
    assert out["reward"] == 0.0 and out["turns"] == 6 and not out["lost"]


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_a_lost_verl_episode_trains_nothing_and_is_flagged(turn: int, episodes: dict) -> None:
    out = episodes[f"lost at {turn}"]
    assert out["lost"] and "HTTP 400" in out["error"] and out["turns"] == 2 * turn  # ended at the failing turn
    assert out["generated"] > 0 and out["trained"] == 0 and out["reward"] == 0.0  # sampled, then masked out


def test_the_documented_launch_composes_with_verls_own_config(episodes: dict) -> None:
    out = episodes["compose/documented"]
    assert out["ok"], out.get("error")
    assert out["loops"] == "colbench_loops.yaml" and out["default"] == "colbench" and out["multi_turn"] is True
    assert out["n"] == 8 and out["response_length"] == 8192 and out["prompt_key"] == "prompt"
    _, overrides = documented_launch()
    assert not [o for o in overrides if o.startswith("+")]  # "+key" would add a key verl's config lacks


@pytest.mark.parametrize("key", UNKNOWN)
def test_a_key_verls_config_lacks_fails_the_composition(key: str, episodes: dict) -> None:
    out = episodes[f"compose/unknown {key}"]
    assert not out["ok"] and "ConfigCompositionException" in out["error"] and key.split("=")[0] in out["error"]


def test_the_documented_data_and_loop_file_play_an_episode(episodes: dict, bundled_tasks: list[Task]) -> None:
    out, answer = episodes["documented"], f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}"
    assert out["loop"] == "ColbenchAgentLoop" and out["rows"] == len(bundled_tasks)
    assert out["reward"] == 1.0 and out["turns"] == 4 and not out["lost"] and out["trained_as_sampled"]
    assert out["policy"] == QUESTION + answer
