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
from failing_human import FAILING_TURNS, human_failing_at
from paths import REPO

from colbench.tasks import Task

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"

SCRIPT = r"""
import asyncio, json, os, sys
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.workers.rollout.replica import TokenOutput
from colbench.integrations.verl import ColbenchAgentLoop

model, episodes = sys.argv[1], json.loads(sys.argv[2])
tok = AutoTokenizer.from_pretrained(model)

class FakeServerManager:
    def __init__(self, turns): self.turns, self.calls, self.outputs = turns, [], []
    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        self.calls.append(request_id)
        ids = tok.encode(self.turns.pop(0), add_special_tokens=False) + [tok.eos_token_id]
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")

async def play(task_id, turns, options):
    os.environ["COLBENCH_VERL"] = json.dumps(options)  # read when the episode starts
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 4096}}, "data": {}})
    server = FakeServerManager(turns)
    loop = ColbenchAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok, processor=None,
                             dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    out = await loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"task_id": task_id}, agent_name="colbench")
    ids, mask = out.response_ids, out.response_mask
    return {
        "registered": "colbench" in _agent_loop_registry,
        "reward": out.reward_score, "turns": out.num_turns, "one_request": len(set(server.calls)) == 1,
        "policy": tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True),
        "env": tok.decode([t for t, m in zip(ids, mask) if not m]),
        "text": tok.decode(out.prompt_ids + ids),
        "trained": sum(mask), "generated": sum(len(t) for t in server.outputs),
        "lost": out.extra_fields["colbench_lost"], "error": out.extra_fields["colbench_error"],
    }

async def main():
    print(json.dumps({name: await play(**episode) for name, episode in episodes.items()}))

asyncio.run(main())
"""

OPTIONS = {"tasks": "backend-sample", "max_turns": 3, "sandbox": "bwrap"}
pytestmark = pytest.mark.timeout(900)  # the subprocess takes about 70 s; a loaded machine has taken ten times that
QUESTION = "What should happen with an empty input?"


@pytest.fixture(scope="module")
def episodes(exported_model: Path, bundled_tasks: list[Task], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every episode the tests look at, by name, played in one verl subprocess."""
    if not VERL_PYTHON.exists():
        pytest.skip("the verl venv is not there (scripts/setup.sh makes .venv-verl)")
    answer = f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}"
    wrong = ["Hi?", "Hm?", "def f(): pass"]
    plays: dict[str, dict[str, Any]] = {
        "answered": {"task_id": bundled_tasks[2].task_id, "turns": [QUESTION, answer], "options": OPTIONS},
        "capped": {"task_id": bundled_tasks[0].task_id, "turns": wrong, "options": OPTIONS},
    }
    with human_failing_at(1) as first, human_failing_at(2) as later:
        for turn, human in zip(FAILING_TURNS, (first, later), strict=True):
            plays[f"lost at {turn}"] = {"task_id": bundled_tasks[0].task_id, "turns": wrong, "options": OPTIONS | human}
        done = subprocess.run(
            [str(VERL_PYTHON), "-c", SCRIPT, str(exported_model), json.dumps(plays)],
            capture_output=True,
            text=True,
            timeout=840,
            env=os.environ,
            cwd=tmp_path_factory.mktemp("verl"),
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_verl_runs_a_colbench_episode(episodes: dict, bundled_tasks: list[Task]) -> None:
    out, answer = episodes["answered"], f"I WANT TO ANSWER:\n{bundled_tasks[2].ground_truth}"
    assert out["registered"] and out["one_request"] and out["reward"] == 1.0 and out["turns"] == 4
    assert out["trained"] == out["generated"] and not out["lost"] and out["error"] is None
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
