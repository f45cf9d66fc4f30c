"""The SWEET-RL reference trainer (examples/sweet_rl): its math on hand-checkable tensors, the pair rules, the
chat-template turn masks, the trajectory importers, and (slow) the whole pipeline on CPU with SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

torch = pytest.importorskip("torch")

SWEET = REPO / "examples" / "sweet_rl"
sys.path.insert(0, str(SWEET))

import sweet_lib as L  # noqa: E402

# ---------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def smollm_dir(exported_model: Path) -> Path:
    return exported_model


def tiny_llama(layers: int = 3, vocab_size: int = 64, **options: Any) -> Any:
    """A randomly initialised Llama (seed 0) with a 64-token vocabulary unless told: real architecture, instant
    forward passes; ``options``: more ``LlamaConfig`` fields."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        **{"max_position_embeddings": 128, **options},
    )
    return transformers.LlamaForCausalLM(config).eval()


def traj(task: str, trial: int, reward: float, domain: str = "backend") -> L.Trajectory:
    return L.Trajectory(
        task_id=task,
        trial=trial,
        domain=domain,
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": f"a{trial}"}],
        hidden_information="gt",
        reward=reward,
        success=reward >= 1.0 if domain == "backend" else None,
    )


# ---------------------------------------------------------------------------------------------------- the math


def test_turn_advantages_by_hand() -> None:
    # one sequence, 6 tokens: token 0 context, tokens 1-2 turn 0, token 3 context, tokens 4-5 turn 1
    logp = torch.tensor([[0.0, -1.0, -2.0, -5.0, -1.0, -1.0]])
    ref = torch.tensor([[0.0, -2.0, -2.0, -1.0, -3.0, -2.0]])
    turns = torch.tensor([[-1, 0, 0, -1, 1, 1]])
    adv = L.turn_advantages(logp, ref, turns, n_turns=2, beta=0.1)
    # turn 0: mean(+1, 0) = 0.5 -> 0.05; turn 1: mean(+2, +1) = 1.5 -> 0.15; the context token (-4) counts nowhere
    assert adv.shape == (1, 2)
    assert adv[0].tolist() == pytest.approx([0.05, 0.15])
    # the original code's variant: one mean over all 4 agent tokens = (1 + 0 + 2 + 1) / 4 = 1.0 -> 0.1
    assert L.all_token_advantage(logp, ref, turns, beta=0.1).tolist() == pytest.approx([0.1])


def test_turn_advantages_batch_padding_and_empty_turn() -> None:
    logp = torch.tensor([[0.0, -1.0, -1.0, 0.0], [0.0, -3.0, 0.0, 0.0]])
    ref = torch.zeros(2, 4)
    turns = torch.tensor([[-1, 0, 1, -1], [-1, 0, -1, -1]])  # row 1 has no turn-1 tokens (cut off / padding)
    adv = L.turn_advantages(logp, ref, turns, n_turns=2, beta=1.0)
    assert adv.tolist() == [pytest.approx([-1.0, -1.0]), pytest.approx([-3.0, 0.0])]


def test_bt_loss_by_hand() -> None:
    chosen, rejected = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    expected = (-math.log(1 / (1 + math.exp(-1.0))) + math.log(2.0)) / 2
    assert float(L.bt_loss(chosen, rejected)) == pytest.approx(expected)
    # the loss on summed turn advantages falls as the chosen trajectory's advantage grows
    assert float(L.bt_loss(torch.tensor([2.0]), torch.tensor([0.0]))) < float(
        L.bt_loss(torch.tensor([1.0]), torch.tensor([0.0]))
    )


def test_pairwise_accuracy_ties_count_half() -> None:
    assert L.pairwise_accuracy([1.0, 0.0, 0.0], [0.0, 0.0, 1.0]) == pytest.approx(0.5)
    assert L.pairwise_accuracy([0.0] * 4, [0.0] * 4) == 0.5


def test_token_logps_match_a_manual_softmax_and_skip_unneeded_positions() -> None:
    model = tiny_llama()
    ids = torch.tensor([[1, 5, 9, 3, 7], [2, 4, 6, 8, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
        full = L.token_logps(model, ids, mask)
        needed = torch.tensor([[False, False, True, True, False], [False, False, False, True, False]])
        part = L.token_logps(model, ids, mask, needed=needed)
    manual = torch.log_softmax(logits[0, 2], -1)[ids[0, 3]]
    assert full[0, 3].item() == pytest.approx(manual.item(), abs=1e-5)
    assert full[:, 0].abs().sum().item() == 0.0
    assert torch.allclose(part[needed], full[needed], atol=1e-5)
    assert part[:, :2].abs().sum().item() == 0.0 and part[:, 4].abs().sum().item() == 0.0


def test_cached_top_layers_give_the_full_models_log_probs() -> None:
    model = tiny_llama(layers=4)
    seqs = [
        L.Encoded([1, 2, 3, 4, 5, 6], [-1, -1, 0, 0, -1, 1], 2),
        L.Encoded([7, 8, 9, 10], [-1, 0, 0, -1], 1),
    ]
    full = L.CachedSequences(model, pad_id=0, device=torch.device("cpu"))
    top = L.CachedSequences(model, pad_id=0, device=torch.device("cpu"), top_layers=2)
    cached = top.prepare(seqs)
    assert cached[0].hidden is not None and cached[0].hidden.shape == (6, 32)
    with torch.no_grad():
        logp_top, ref_top, turns = top.logps(cached)
        logp_full, _, _ = full.logps(full.prepare(seqs))
    agent = turns >= 0  # log-probs are only defined (and compared) on assistant tokens
    assert torch.allclose(logp_top[agent], logp_full[agent], atol=1e-5)
    assert torch.allclose(logp_top[agent], ref_top[agent], atol=1e-5)  # untrained: the model is its own reference
    assert len(model.model.layers) == 4  # the layer swap is undone
    # gradients reach only the top blocks when the lower ones are frozen
    L.freeze_lower_layers(model, 2)
    logp, _, _ = top.logps(cached)
    (logp * (turns >= 0)).sum().backward()
    assert model.model.layers[3].mlp.up_proj.weight.grad is not None
    assert model.model.layers[0].mlp.up_proj.weight.grad is None


# ---------------------------------------------------------------------------------------------------- pairs


def test_backend_pairs_follow_the_original_rule() -> None:
    trajectories = [
        traj("a", 0, 0.5),
        traj("a", 1, 1.0),
        traj("a", 2, 0.2),
        traj("b", 0, 0.9),  # no fully successful sample: no pairs
        traj("b", 1, 0.3),
        traj("c", 0, 1.0),  # ties with the best are not rejected; the first best is chosen
        traj("c", 1, 1.0),
        traj("c", 2, 0.0),
    ]
    pairs = [(c.task_id, c.trial, r.trial) for c, r in L.trajectory_pairs(trajectories, domain="backend")]
    assert pairs == [("a", 1, 0), ("a", 1, 2), ("c", 0, 2)]


def test_frontend_pairs_need_a_similarity_gap() -> None:
    trajectories = [traj("p", 0, 0.80, "frontend"), traj("p", 1, 0.75, "frontend"), traj("p", 2, 0.60, "frontend")]
    pairs = [(c.trial, r.trial) for c, r in L.trajectory_pairs(trajectories, domain="frontend", min_gap=0.1)]
    assert sorted(pairs) == [(0, 2), (1, 2)]  # 0.80 vs 0.75 is closer than 0.1


def test_turn_pairs_are_top_half_against_bottom_half() -> None:
    scores = [0.9, -0.3, 0.5, 0.1, -0.8, 0.7, 0.0, -0.1]  # top half: indices 0, 5, 2, 3
    for seed in range(20):
        pairs = L.top_bottom_pairs(scores, 4, random.Random(seed))
        assert len(pairs) == 4 and len(set(pairs)) == 4
        for i, j in pairs:
            assert i in {0, 5, 2, 3} and j in {6, 7, 1, 4}
    # ties never make a pair; fewer possible pairs than asked gives what there is
    assert L.top_bottom_pairs([1.0, 1.0, 1.0, 1.0], 4, random.Random(0)) == []
    assert sorted(L.top_bottom_pairs([2.0, 1.0], 4, random.Random(0))) == [(0, 1)]


def test_trajectory_records_check_roles() -> None:
    with pytest.raises(ValueError, match="alternate"):
        L.Trajectory(
            "t", 0, "backend", [{"role": "user", "content": "a"}] * 2 + [{"role": "assistant", "content": "b"}], "", 0.0
        )
    with pytest.raises(ValueError, match="end with assistant"):
        L.Trajectory("t", 0, "backend", [{"role": "user", "content": "a"}], "", 0.0)


# ---------------------------------------------------------------------------------------------------- configs


# ---------------------------------------------------------------------------------------------------- turn masks


def test_chat_template_turn_masks_locate_each_assistant_turn_exactly(smollm_dir: Path) -> None:
    tokenizer = L.load_tokenizer(str(smollm_dir))
    messages = [
        {"role": "user", "content": "Write f for me."},
        {"role": "assistant", "content": "What should f return for empty input?"},
        {"role": "user", "content": "I don't know."},
        {"role": "assistant", "content": "I WANT TO ANSWER:\ndef f(xs):\n    return sum(xs)"},
    ]
    for prefix in ("", L.gt_prefix("def f(xs):\n    return sum(xs)")):
        encoded = L.encode_dialogue(tokenizer, messages, prefix)
        assert encoded.n_turns == 2
        text = tokenizer.decode(encoded.input_ids)
        assert text.startswith(prefix + "<|im_start|>system")
        for k, content in enumerate(m["content"] for m in messages if m["role"] == "assistant"):
            tokens = [t for t, turn in zip(encoded.input_ids, encoded.turn_ids, strict=True) if turn == k]
            assert tokenizer.decode(tokens) == content + "<|im_end|>"
            positions = [i for i, turn in enumerate(encoded.turn_ids) if turn == k]
            assert positions == list(range(positions[0], positions[-1] + 1))  # one contiguous run
            assert tokenizer.decode(encoded.input_ids[positions[0] - 3 : positions[0]]).endswith("assistant\n")
        masked = {i for i, turn in enumerate(encoded.turn_ids) if turn >= 0}
        rest = tokenizer.decode([t for i, t in enumerate(encoded.input_ids) if i not in masked])
        assert "What should f" not in rest and "I WANT TO ANSWER" not in rest
        assert "Write f for me." in rest and "I don't know." in rest and prefix in rest


# ---------------------------------------------------------------------------------------------------- importers


def _offline_row(task: dict[str, Any], turns: list[tuple[str, str]], reward: float | None) -> dict[str, Any]:
    """One line in the release's format: the first user entry is the bare problem description; agent entries carry
    the templated prompt ("input") and the raw generation ("output"); "content" is what the env kept."""
    history: list[dict[str, Any]] = [{"role": "user", "content": task["problem_description"]}]
    for i, (agent, human) in enumerate(turns):
        history.append(
            {"role": "assistant", "content": agent, "input": f"<|begin_of_text|>...prompt {i}...", "output": agent}
        )
        if human:
            history.append({"role": "user", "content": human})
    row: dict[str, Any] = {"task": task, "dialogue_history": history, "answer": turns[-1][0]}
    if reward is not None:
        row["reward"] = reward
    return row


def test_offline_import_reads_the_release_format(tmp_path: Path, bundled_tasks: list[Any]) -> None:
    from collect import import_offline

    from colbench.env.domain import get_domain

    agent_prompt = get_domain("backend").agent_prompt

    tasks = [{k: v for k, v in t.to_row().items() if k != "task_id"} for t in bundled_tasks[:2]]
    rows = []
    for sample in range(3):  # task-major blocks, as the release writes k samples: line i and i + n_tasks match
        for n, task in enumerate(tasks):
            turns = [("Any edge cases?", "I don't know."), (f"I WANT TO ANSWER:\n{task['ground_truth']}", "")]
            rows.append(
                _offline_row(task, turns if sample != 1 else turns[1:], [1.0, 0.3, None][sample] if n == 0 else 0.0)
            )
    path = tmp_path / "offline.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    trajectories, skipped = import_offline(path)
    assert skipped == {"no reward (use --score-missing)": 1}
    assert len(trajectories) == 5
    first = [t for t in trajectories if t.task_id == bundled_tasks[0].task_id]
    assert [(t.trial, t.reward, t.success) for t in first] == [(0, 1.0, True), (1, 0.3, False)]
    assert first[0].messages[0] == {"role": "user", "content": agent_prompt(bundled_tasks[0], 10)}
    assert [m["role"] for m in first[0].messages] == ["user", "assistant", "user", "assistant"]
    assert first[0].messages[3]["content"].startswith("I WANT TO ANSWER:")
    assert first[0].hidden_information == bundled_tasks[0].hidden_information
    assert len(first[1].messages) == 2
    second = [t for t in trajectories if t.task_id == bundled_tasks[1].task_id]
    assert [t.trial for t in second] == [0, 1, 2]


def test_offline_import_scores_rows_without_reward(
    tmp_path: Path, bundled_tasks: list[Any], bwrap_sandbox: Any
) -> None:
    from collect import import_offline

    from colbench.domains.backend.scorer import BackendScorer

    task = {k: v for k, v in bundled_tasks[0].to_row().items() if k != "task_id"}
    rows = [_offline_row(task, [(f"I WANT TO ANSWER:\n{task['ground_truth']}", "")], None)]
    rows.append(_offline_row(task, [("I WANT TO ANSWER:\ndef nothing():\n    pass", "")], None))
    path = tmp_path / "offline.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trajectories, _ = import_offline(path, scorer=BackendScorer(bwrap_sandbox))
    assert [t.reward for t in trajectories] == [1.0, 0.0]


def test_collect_reuses_colbench_eval_and_reads_its_run_dir(tmp_path: Path, bwrap_sandbox: Any) -> None:
    out = tmp_path / "trajectories.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(SWEET / "collect.py"),
            "--agent", "smoke_agent:NoisyOracle",
            "--tasks", "backend-sample",
            "--limit", "2",
            "--trials", "3",
            "--simulator", "scripted",
            "--max-turns", "2",
            "--sandbox", "bwrap",
            "--out", str(out),
        ],
        check=True,
        cwd=SWEET,
    )  # fmt: skip
    run = json.loads((tmp_path / "run-smoke_agent_NoisyOracle" / "run.json").read_text())
    assert run["trials"] == 3 and run["agent"]["spec"] == "smoke_agent:NoisyOracle"
    trajectories = L.read_trajectories(out)
    assert len(trajectories) == 6
    by_trial = {t.trial: t for t in trajectories if t.task_id == trajectories[0].task_id}
    assert by_trial[0].reward == 1.0 and by_trial[0].success is True
    assert by_trial[1].reward < 1.0 and by_trial[2].reward < 1.0
    assert [m["role"] for m in by_trial[0].messages] == ["user", "assistant", "user", "assistant"]
    pairs = L.trajectory_pairs(trajectories, domain="backend")
    assert len(pairs) == 4 and all(c.trial == 0 for c, _ in pairs)


# ---------------------------------------------------------------------------------------------------- LoRA


@pytest.fixture(scope="module")
def tiny_model_dir(smollm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-block random Llama with SmolLM2's tokenizer and chat template: every script runs on it in seconds."""
    tokenizer = L.load_tokenizer(str(smollm_dir))
    model = tiny_llama(2, len(tokenizer), max_position_embeddings=4096, tie_word_embeddings=True)
    out = tmp_path_factory.mktemp("tiny") / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_lora_critic_and_policy_step_train_and_merge(tmp_path: Path, tiny_model_dir: Path, bwrap_sandbox: Any) -> None:
    for module in ("trl", "peft", "datasets"):
        pytest.importorskip(module)
    import collect
    import preferences
    import train_critic
    import train_policy

    trajectories = str(tmp_path / "trajectories.jsonl")
    collect.main(
        collect.CollectConfig(
            out=trajectories,
            agent="smoke_agent:NoisyOracle",
            tasks="backend-sample",
            limit=3,
            trials=3,
            simulator="scripted",
            max_turns=2,
            sandbox="bwrap",
        )
    )
    pairs = str(tmp_path / "pairs.jsonl")
    assert preferences.main(preferences.PreferencesConfig(trajectories=trajectories, out=pairs))["pairs"] == 6
    common: dict[str, Any] = {"model": str(tiny_model_dir), "device": "cpu", "lora": True, "lora_r": 4, "lr": 1e-2}
    critic = train_critic.main(
        train_critic.CriticConfig(pairs=pairs, out=str(tmp_path / "critic"), epochs=2, batch_size=2, **common)
    )
    assert critic["train_after"]["bt_loss"] < critic["train_before"]["bt_loss"]  # type: ignore[index]
    policy = train_policy.main(
        train_policy.PolicyConfig(
            trajectories=trajectories,
            critic=str(tmp_path / "critic"),
            out=str(tmp_path / "policy"),
            data_fraction=1.0,
            max_prompts=2,
            num_candidates=4,
            max_new_tokens=8,
            batch_size=2,
            gradient_checkpointing=False,
            lr_scheduler="constant",
            **common,
        )
    )
    assert policy["pairs"] >= 2 and policy["loss_after"] < policy["loss_before"]
    initial = _load(tiny_model_dir)
    for stage in ("critic", "policy"):
        merged = _load(tmp_path / stage)
        assert set(merged) == set(initial), f"{stage}: LoRA adapters were not merged into plain weights"
        changed = [k for k in initial if not torch.equal(merged[k], initial[k])]
        assert any("layers.1.mlp" in k for k in changed), stage
    assert len(L.read_trajectories(trajectories)) == 9
    assert (tmp_path / "policy" / "turn_pairs.jsonl").is_file()


# ---------------------------------------------------------------------------------------------------- GPU path


@pytest.mark.gpu
def test_critic_scores_on_gpu_in_bf16() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    device = L.pick_device("auto")
    assert device.type == "cuda" and L.pick_dtype("auto", device) == torch.bfloat16
    model = tiny_llama().to(device=device, dtype=torch.bfloat16)
    seqs = [L.Encoded([1, 2, 3, 4, 5, 6], [-1, -1, 0, 0, -1, 1], 2)]
    cached = L.CachedSequences(model, 0, device).prepare(seqs)
    logp, ref, turns = L.CachedSequences(model, 0, device).logps(cached)
    adv = L.turn_advantages(logp, ref, turns, 2, beta=0.1)
    assert adv.device.type == "cuda" and torch.allclose(adv, torch.zeros_like(adv), atol=1e-2)


def test_device_and_dtype_selection_on_cpu() -> None:
    assert L.pick_device("cpu").type == "cpu"
    assert L.pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert L.pick_dtype("bf16", torch.device("cpu")) == torch.bfloat16


# ---------------------------------------------------------------------------------------------------- smoke


def _load(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(path / "model.safetensors")))


@pytest.fixture(scope="module")
def smoke_run(smollm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, float]]:
    for module in ("trl", "peft", "datasets"):
        pytest.importorskip(module)
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scoring needs the bwrap sandbox)")
    work = tmp_path_factory.mktemp("sweet_smoke")
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            str(SWEET / "run_all.py"),
            "--preset",
            "smoke",
            "--model",
            str(smollm_dir),
            "--workdir",
            str(work),
        ],
        check=True,
        cwd=SWEET,
        timeout=900,
    )
    yield work, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_smoke_every_stage_runs_learns_and_the_critic_ranks_held_out_pairs(
    smoke_run: tuple[Path, float], smollm_dir: Path
) -> None:
    work, seconds = smoke_run
    summary = json.loads((work / "summary.json").read_text())
    print(json.dumps({k: summary[k] for k in ("seconds", "seconds_total")}), f"wall {seconds:.0f}s")

    # collection: the scripted policy's k=3 samples plus the real embedded model's episodes, all scored
    assert summary["collect"]["trajectories"] >= 30 and summary["collect"]["skipped"] == {}
    assert summary["preferences"]["pairs"] >= 8 and summary["preferences"]["heldout_pairs"] >= 6

    # the critic: its loss falls, and it ranks held-out pairs (tasks it never trained on) better than before
    critic = summary["critic"]
    assert critic["train_before"]["bt_loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert critic["train_after"]["bt_loss"] < critic["train_before"]["bt_loss"] - 0.02
    assert critic["epoch_losses"][-1] < critic["epoch_losses"][0]
    assert critic["heldout_before"]["accuracy"] == 0.5  # equal to its reference: every pair is a tie
    assert critic["heldout_after"]["accuracy"] >= 0.75
    assert critic["heldout_after"]["mean_margin"] > 0

    # the policy step, rejection fine-tuning and multi-turn DPO: each loss falls on its own training data
    for stage in ("policy", "rft", "mtdpo"):
        assert summary[stage]["loss_after"] < summary[stage]["loss_before"], stage
    assert summary["policy"]["pairs"] >= 2

    # trained parameters changed (the top blocks), the frozen lower blocks did not
    initial = _load(smollm_dir)
    top, bottom = "model.layers.29.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.weight"
    for stage in ("critic", "policy", "rft", "mtdpo"):
        trained = _load(work / stage)
        assert not torch.equal(trained[top], initial[top]), stage
        assert torch.equal(trained[bottom], initial[bottom]), stage
