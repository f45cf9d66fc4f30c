"""verl: the colbench agent loop, run by verl 0.9.1's own AgentLoopBase in the venv set-up makes for it
(``.venv-verl``), against a fake server manager standing in for verl's inference servers: reward, the human's reply
appended with mask 0 in the chat template's markup, the policy's tokens alone with mask 1."""

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
import asyncio, json, sys
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.workers.rollout.replica import TokenOutput
from colbench.integrations.verl import ColbenchAgentLoop

model, task_id, turns = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(model)

class FakeServerManager:
    def __init__(self): self.calls, self.outputs = [], []
    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        self.calls.append(request_id)
        ids = tok.encode(turns.pop(0), add_special_tokens=False) + [tok.eos_token_id]
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")

async def main():
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 4096}}, "data": {}})
    server = FakeServerManager()
    loop = ColbenchAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok, processor=None,
                             dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    out = await loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"task_id": task_id}, agent_name="colbench")
    ids, mask = out.response_ids, out.response_mask
    print(json.dumps({
        "registered": "colbench" in _agent_loop_registry,
        "reward": out.reward_score, "turns": out.num_turns, "one_request": len(set(server.calls)) == 1,
        "policy": tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True),
        "env": tok.decode([t for t, m in zip(ids, mask) if not m]),
        "text": tok.decode(out.prompt_ids + ids),
        "trained": sum(mask), "generated": sum(len(t) for t in server.outputs),
        "lost": out.extra_fields["colbench_lost"], "error": out.extra_fields["colbench_error"],
    }))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def verl_python() -> Path:
    if not VERL_PYTHON.exists():
        pytest.skip("the verl venv is not there (scripts/setup.sh makes .venv-verl)")
    return VERL_PYTHON


def run(verl_python: Path, model: Path, task: Task, turns: list[str], tmp_path: Path, **options: Any) -> dict:
    options = {"tasks": "backend-sample", "max_turns": 3, "sandbox": "bwrap"} | options
    env = {"COLBENCH_VERL": json.dumps(options)}
    done = subprocess.run(
        [str(verl_python), "-c", SCRIPT, str(model), task.task_id, json.dumps(turns)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_verl_runs_a_colbench_episode(
    verl_python: Path, exported_model: Path, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    task = bundled_tasks[2]
    question, answer = "What should happen with an empty input?", f"I WANT TO ANSWER:\n{task.ground_truth}"
    out = run(verl_python, exported_model, task, [question, answer], tmp_path)
    assert out["registered"] and out["one_request"] and out["reward"] == 1.0 and out["turns"] == 4
    assert out["trained"] == out["generated"] and not out["lost"] and out["error"] is None
    assert out["policy"] == question + answer  # mask 1: the policy's two turns, nothing else
    reply = "I don't know."  # the scripted human's default
    assert out["env"] == f"\n<|im_start|>user\n{reply}<|im_end|>\n<|im_start|>assistant\n"  # mask 0: the human's turn
    assert f"<|im_start|>assistant\n{question}<|im_end|>\n<|im_start|>user\n{reply}" in out["text"]


def test_the_turn_cap_ends_a_verl_episode(
    verl_python: Path, exported_model: Path, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    out = run(verl_python, exported_model, bundled_tasks[0], ["Hi?", "Hm?", "def f(): pass"], tmp_path)
    assert out["reward"] == 0.0 and out["turns"] == 6


@pytest.mark.parametrize("turn", FAILING_TURNS)
def test_a_lost_verl_episode_trains_nothing_and_is_flagged(
    turn: int, verl_python: Path, exported_model: Path, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    with human_failing_at(turn) as human:
        out = run(verl_python, exported_model, bundled_tasks[0], ["Hi?", "Hm?", "def f(): pass"], tmp_path, **human)
    assert out["lost"] and "HTTP 400" in out["error"] and out["turns"] == 2 * turn  # ended at the failing turn
    assert out["generated"] > 0 and out["trained"] == 0 and out["reward"] == 0.0  # sampled, then masked out
