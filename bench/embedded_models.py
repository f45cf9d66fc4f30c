"""Survey of the embedded (PyPI-packaged GGUF) models as agent and as human on backend tasks.

Each model plays the agent against a fixed human (``scripted``: "I don't know." every turn, so the agent's own
text decides the episode) and the human against a fixed agent (the default embedded agent), through
``colbench eval`` with the embedded model's default settings (colbench.llm.llamacpp.ROLE_DEFAULTS). For each run it
prints: episodes, successes, tests passed, the share of the surveyed role's turns that are parroted or empty (see
:func:`parroted`), seconds per episode (each episode's own duration, while the others ran beside it), the run's
wall time (first start to last end), mean agent turns, and the role's tokens per second (completion tokens over the seconds the
episodes waited for that role: concurrent episodes share the server, so this is per-episode speed, not the
server's throughput).

    python bench/embedded_models.py --limit 5 --out /work/survey-runs
    python bench/embedded_models.py --table /work/survey-runs    # only print the table of existing runs

Episodes run concurrently (colbench eval's default); the timings of a 2-core machine shared with other work are
inflated. Models that are not installed are skipped, saying which pip line installs them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from colbench.errors import ConfigError  # noqa: E402
from colbench.llm import llamacpp  # noqa: E402

NEAR = 0.9  # similarity (difflib ratio) at or above which a short turn repeats an earlier text
SHINGLE = 6  # words: a longer turn is compared by its runs of this many words
COVERED = 0.8  # share of a longer turn's word runs found in earlier texts at or above which it is a copy


def _words(text: str) -> list[str]:
    return re.sub(r"\s+", " ", text).strip().lower().split()


def _grams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def parroted(text: str, earlier: Sequence[str]) -> bool:
    """Whether a turn is empty (or whitespace), or repeats near-verbatim earlier text of either side (earlier turns,
    and for the agent the task prompt it was shown).

    A turn of fewer than 12 words: a difflib ratio of at least 0.9 against one earlier text (whitespace collapsed,
    lower-cased). A longer turn: at least 80% of its runs of 6 words occur in the earlier texts, so a turn that
    pastes the prompt three times over, or the turn before with a word changed here and there, counts too.
    """
    words = _words(text)
    if not words:
        return True
    before = [_words(other) for other in earlier if other.strip()]
    if len(words) < 2 * SHINGLE:
        mine = " ".join(words)
        for other in before:
            matcher = difflib.SequenceMatcher(None, mine, " ".join(other), autojunk=False)
            if matcher.real_quick_ratio() >= NEAR and matcher.quick_ratio() >= NEAR and matcher.ratio() >= NEAR:
                return True
        return False
    seen: set[tuple[str, ...]] = set().union(*map(_grams, before)) if before else set()
    grams = [tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)]
    return sum(gram in seen for gram in grams) >= COVERED * len(grams)


def parrot_counts(dialogue: Sequence[dict[str, object]], role: str, prompt: str = "") -> tuple[int, int]:
    """(parroted or empty turns of ``role``, turns of ``role``) in one episode's dialogue; ``prompt``: the task
    prompt the agent was shown (earlier text for every turn)."""
    hits = total = 0
    for i, turn in enumerate(dialogue):
        if turn.get("role") != role:
            continue
        total += 1
        earlier = [prompt, *(str(t.get("text") or "") for t in dialogue[:i])]
        hits += parroted(str(turn.get("text") or ""), earlier)
    return hits, total


def task_prompts(spec: str, max_turns: int = 10) -> dict[str, str]:
    """The agent's first observation of each task of ``spec`` (what a parroting agent copies)."""
    from colbench.env.domain import get_domain
    from colbench.tasks.sources import load

    return {t.task_id: get_domain(t.domain).agent_prompt(t, max_turns) for t in load(spec)}


def survey(models: Sequence[str], fixed_agent: str) -> list[tuple[str, str, str, str]]:
    """(run name, model, agent spec, simulator spec) for each model as agent and as human."""
    runs = []
    for name in models:
        runs.append((f"survey-{name}-agent", name, f"llamacpp:{name}", "scripted"))
        runs.append((f"survey-{name}-human", name, fixed_agent, f"llamacpp:{name}"))
    return runs


def run_eval(out: Path, agent: str, simulator: str, tasks: str, limit: int) -> float:
    command = [sys.executable, "-m", "colbench", "eval", "--env", "ColBench-Backend-v1", "--agent", agent]
    command += ["--simulator", simulator, "--tasks", tasks, "--limit", str(limit), "--out", str(out), "--quiet"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    print((done.stdout + done.stderr).strip().splitlines()[-1:], file=sys.stderr)
    return time.monotonic() - started


def row_of(out: Path, model: str, role: str, prompts: dict[str, str] | None = None) -> dict[str, object]:
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    ok = [r for r in records if r["status"] == "ok"]
    side = "agent" if role == "agent" else "human"
    usage_key, time_key = ("agent", "agent_s") if role == "agent" else ("simulator", "simulator_s")
    hits = turns = 0
    for record in records:
        h, t = parrot_counts(record.get("dialogue") or [], side, (prompts or {}).get(str(record["task_id"]), ""))
        hits, turns = hits + h, turns + t
    passed = sum(int((r.get("score") or {}).get("tests_passed") or 0) for r in ok)
    total = sum(int((r.get("score") or {}).get("tests_total") or 0) for r in ok)
    tokens = sum(int(r["usage"][usage_key]["completion_tokens"]) for r in records)
    seconds = sum(float(r["timings"].get(time_key) or 0) for r in records)
    durations = [float(r["timings"]["duration_s"]) for r in records]
    starts = [datetime.fromisoformat(r["timings"]["started"].replace("Z", "+00:00")).timestamp() for r in records]
    span = max((s + d for s, d in zip(starts, durations, strict=True)), default=0.0) - min(starts, default=0.0)
    return {
        "model": model,
        "role": role,
        "episodes": f"{len(ok)}/{len(records)}",
        "success": sum(1 for r in ok if r.get("success")),
        "tests": f"{passed}/{total}",
        "parroted": f"{hits}/{turns} ({100 * hits / max(turns, 1):.0f}%)",
        "s/episode": f"{sum(durations) / max(len(durations), 1):.0f}",
        "run s": f"{span:.0f}",
        "tokens/s": f"{tokens / seconds:.1f}" if seconds else "-",
        "turns": f"{sum(int(r.get('turns') or 0) for r in records) / max(len(records), 1):.1f}",
    }


def table(rows: Sequence[dict[str, object]]) -> str:
    if not rows:
        return "(no runs)\n"
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/work/survey-runs", help="where the run directories go")
    parser.add_argument("--models", default=",".join(llamacpp.MODELS), help="packaged model names, comma-separated")
    parser.add_argument("--fixed-agent", default="llamacpp", help="the agent that faces each human")
    parser.add_argument("--tasks", default="backend-sample")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--table", metavar="DIR", help="only print the table of the survey runs in DIR")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    base = Path(args.table or args.out)
    rows = []
    prompts = task_prompts(args.tasks)
    for name, model, agent, simulator in survey(models, args.fixed_agent):
        out = base / name
        if not args.table:
            try:
                llamacpp.packaged_gguf(model)
            except ConfigError as exc:
                print(f"skipped {name}: {exc}", file=sys.stderr)
                continue
            if out.exists():
                print(f"kept {out} (delete it to run again)", file=sys.stderr)
            else:
                print(f"{name}: {run_eval(out, agent, simulator, args.tasks, args.limit):.0f} s", file=sys.stderr)
        if (out / "episodes.jsonl").exists():
            rows.append(row_of(out, model, name.rsplit("-", 1)[1], prompts))
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
