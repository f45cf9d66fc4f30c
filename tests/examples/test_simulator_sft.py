"""The simulator fine-tuning recipe (examples/simulator_sft): every stage run as a user runs it (run_all.py's tiny
preset, each stage a subprocess) with the embedded model as the human, on four bundled tasks; then what each stage
left is checked against the library and the frameworks that made it: the split keeps references apart, every
candidate is judged and every drop has a reason, the SFT rows are the kept replies on the env's own prompt, TRL
trained the reply tokens only and changed the weights, the GGUFs are served, and the evaluation compared both
humans on the same held-out prefixes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from local_model import needs_model
from paths import REPO

pytest.importorskip("trl")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

SFT = REPO / "examples" / "simulator_sft"
sys.path.insert(0, str(SFT))

from colbench.simtrain import read_prefixes  # noqa: E402
from colbench.simtrain.evaluation import METRICS  # noqa: E402
from colbench.simtrain.prefixes import reference_group  # noqa: E402
from colbench.simtrain.selection import DROP_REASONS  # noqa: E402


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    work = tmp_path_factory.mktemp("simsft") / "tiny"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SFT / "run_all.py"), "--preset", "tiny", "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return work, time.monotonic() - started


@pytest.mark.slow
@needs_model
def test_tiny_preset_runs_every_stage_and_each_leaves_what_the_next_needs(tiny_run: tuple[Path, float]) -> None:
    work, seconds = tiny_run
    summary = json.loads((work / "summary.json").read_text())
    print(json.dumps(summary["seconds"]), f"wall {seconds:.0f}s")
    assert set(summary["seconds"]) == {"prefixes", "sample", "select", "train", "evaluate"}

    # prefixes: train and held-out share no task and no reference (by content)
    train, held_out = read_prefixes(work / "prefixes_train.jsonl"), read_prefixes(work / "prefixes_heldout.jsonl")
    assert train and held_out
    assert not {reference_group(p.task) for p in train} & {reference_group(p.task) for p in held_out}
    assert not {p.task.task_id for p in train} & {p.task.task_id for p in held_out}
    assert all(p.source.startswith("played:asker:Asker#") for p in train + held_out)

    # candidates: K = 2 per training prefix, every one judged; kept ones (and only those) became SFT rows
    candidates = rows(work / "candidates.jsonl")
    assert sorted((c["prefix"], c["draw"]) for c in candidates) == sorted((p.key(), d) for p in train for d in range(2))
    judged = rows(work / "judged.jsonl")
    assert len(judged) == len(candidates)
    assert all((j["kept"] and j["dropped"] == "") or (not j["kept"] and j["dropped"] in DROP_REASONS) for j in judged)
    assert all(not j["kept"] or (not j["leaked"] and j["false_claims"] == 0 and not j["empty"]) for j in judged)
    sft = rows(work / "sft.jsonl")
    assert sorted(r["completion"][0]["content"] for r in sft) == sorted(j["text"] for j in judged if j["kept"])
    by_key = {p.key(): p for p in train}
    for row in sft:
        assert [m["role"] for m in row["completion"]] == ["assistant"]
        assert row["prompt"][0]["role"] == "system"
        assert row["prompt"][-1] == {"role": "user", "content": by_key[row["prefix"]].question}

    # training: the manifest names the base and the data; the served GGUF holds changed weights
    manifest = json.loads((work / "human" / "manifest.json").read_text())
    from sft_lib import file_digest

    assert manifest["data"]["sha256"] == file_digest(work / "sft.jsonl") and manifest["data"]["rows"] == len(sft)
    assert manifest["base_model"]["spec"] == "smollm2" and manifest["base_gguf_sha256"]
    assert manifest["steps"] >= 1 and manifest["loss_first"] > 0
    trained = {t.name: t for t in gguf.GGUFReader(work / "human.gguf").tensors}
    base = {t.name: t for t in gguf.GGUFReader(work / "base.gguf").tensors}
    assert trained.keys() == base.keys()
    changed = [n for n in base if not np.array_equal(np.asarray(trained[n].data), np.asarray(base[n].data))]
    assert changed and "blk.29.ffn_down.weight" in changed

    # evaluation: both humans, the same held-out prefixes, K draws each, every metric with its interval
    evaluation = json.loads((work / "evaluation.json").read_text())
    assert evaluation["humans"] == {
        "base": f"llamacpp:{work / 'base.gguf'}",
        "trained": f"llamacpp:{work / 'human.gguf'}",
    }
    for name in ("base", "trained"):
        drawn = rows(work / f"eval_{name}.jsonl")
        assert sorted((d["prefix"], d["draw"]) for d in drawn) == sorted(
            (p.key(), d) for p in held_out for d in range(2)
        )
        assert set(evaluation["per_prefix"][name]) == {p.key() for p in held_out}
    for metric in METRICS:
        row = evaluation["compare"][metric]
        assert row["low"] <= row["high"]
        assert row["diff"] == pytest.approx(row["trained"] - row["base"])
    for name in ("base", "trained"):
        assert (work / f"probe_{name}" / "summary.json").is_file()
        assert evaluation["probe"][name]
