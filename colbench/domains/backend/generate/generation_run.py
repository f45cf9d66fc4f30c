"""One ``colbench tasks generate`` run: candidates asked for concurrently, validated, deduplicated, written.

Kept tasks go to ``out`` (task rows any env loads, plus a ``provenance`` field), rejects to
``<out>.rejects.jsonl`` with the gate and reason, each line fsync'ed as it is decided; a restart reads both files
and skips every candidate id already there. The summary goes to ``<out>.summary.json``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from colbench._util.storage import canonical_json, iter_jsonl, sha256_text, write_json_atomic
from colbench.domains.backend.generate.candidates import Malformed, Seed, candidate_id, parse_reply, prompt_for
from colbench.domains.backend.generate.gates import Verdict, add_plus_tests, validate
from colbench.domains.backend.generate.solver_gate import SolverGate
from colbench.domains.backend.near_duplicates import NearDuplicateIndex, code_fingerprint
from colbench.domains.backend.scorer import BackendScorer
from colbench.errors import ColbenchError, ConfigError, LLMError
from colbench.llm.client import LLMClient
from colbench.types.task import Task


@dataclass(frozen=True)
class Plan:
    """What to generate: ``count`` candidates from ``seeds`` (cycled), ``run_seed`` making the ids."""

    seeds: Sequence[Seed]
    count: int
    run_seed: int = 0

    def ids(self) -> list[tuple[int, str]]:
        digest = sha256_text(canonical_json([[s.topic, s.example] for s in self.seeds]))
        return [(i, candidate_id(digest, self.run_seed, i)) for i in range(self.count)]


def rejects_path(out: str) -> str:
    return f"{out}.rejects.jsonl"


def decided(out: str) -> set[str]:
    """Candidate ids already kept or rejected by an earlier run into ``out``."""
    ids: set[str] = set()
    for path in (out, rejects_path(out)):
        if Path(path).exists():
            for _, row in iter_jsonl(path):
                ids.add(str((row.get("provenance") or row).get("candidate_id")))
    return ids


def generate(
    plan: Plan,
    client: LLMClient,
    generator: str,
    scorer: BackendScorer,
    against: Sequence[Task],
    out: str,
    *,
    jobs: int = 1,
    advance: Callable[[], None] = lambda: None,
    solver: SolverGate | None = None,
) -> dict[str, Any]:
    """Run the plan into ``out`` (resuming); the summary, also written to ``<out>.summary.json``. ``solver``: the
    optional gate that asks whether the hidden information is needed (``solver_gate.py``)."""
    done = decided(out)
    index = NearDuplicateIndex(against)
    tests_index = NearDuplicateIndex(against)
    kept_before: list[Task] = []
    if Path(out).exists():
        kept_before = [_task(row) for _, row in iter_jsonl(out)]
    for task in kept_before:
        index.add(f"generated:{task.task_id}", code_fingerprint(task.ground_truth))
    todo = [(i, cid) for i, cid in plan.ids() if cid not in done]
    counts: Counter[str] = Counter()
    with (
        open(out, "a", encoding="utf-8") as kept,
        open(rejects_path(out), "a", encoding="utf-8") as rejects,
        ThreadPoolExecutor(max(1, jobs), thread_name_prefix="colbench-generate") as pool,
    ):
        work = pool.map(lambda item: _candidate(plan, client, scorer, tests_index, solver, *item), todo)
        for (i, cid), (verdict, tokens) in zip(todo, work, strict=True):
            counts["tokens"] += tokens
            seed = plan.seeds[i % len(plan.seeds)].topic
            base = {"candidate_id": cid, "index": i, "seed": seed, "generator": generator}
            if not verdict.gate:
                fingerprint = code_fingerprint(verdict.task.ground_truth)
                nearest = index.nearest(fingerprint)
                if nearest is not None and nearest.similarity.duplicate:
                    verdict.gate = "duplicate"
                    verdict.reason = f"a near duplicate of {nearest.task_id} (score {nearest.similarity.score:.2f})"
                else:
                    verdict.passed.append("duplicate")
                    index.add(f"generated:{verdict.task.task_id}", fingerprint)
                    test_nearest = tests_index.nearest(fingerprint)
                    row = verdict.task.to_row()
                    row["provenance"] = {
                        **base,
                        "gates_passed": verdict.passed,
                        "mutation_score": verdict.mutation_score,
                        "mutation_score_is_lower_bound": not verdict.mutation_witnessed,
                        **({"solver": verdict.solver} if verdict.solver else {}),
                        "nearest_test_task": test_nearest.to_row() if test_nearest else None,
                    }
                    write_jsonl(kept, row)
                    counts["kept"] += 1
            if verdict.gate:
                write_jsonl(rejects, {**base, "gate": verdict.gate, "reason": verdict.reason})
                counts[f"rejected:{verdict.gate}"] += 1
            advance()
    usage = client.usage
    summary = {
        "candidates": plan.count,
        "decided_this_run": len(todo),
        "kept_this_run": counts.pop("kept", 0),
        "rejected_this_run": {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("rejected:")},
        "tokens": {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens},
    }
    if solver is not None:
        spent = solver.client.usage
        summary["solver_tokens"] = {"prompt": spent.prompt_tokens, "completion": spent.completion_tokens}
    write_json_atomic(f"{out}.summary.json", summary, durable=True)
    return summary


def write_jsonl(out: TextIO, row: dict[str, Any]) -> None:
    """Append one row, on disk before the next candidate is decided: an interrupted run loses nothing decided."""
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())


def _task(row: dict[str, Any]) -> Task:
    # on first use: the task layer's validation of a kept row
    from colbench.tasks.rows import task_from_row

    return task_from_row({k: v for k, v in row.items() if k != "provenance"}, domain="backend")


def _candidate(
    plan: Plan,
    client: LLMClient,
    scorer: BackendScorer,
    tests: NearDuplicateIndex,
    solver: SolverGate | None,
    i: int,
    cid: str,
) -> tuple[Verdict, int]:
    """Ask for one candidate and validate it: a copy of a task of ``tests`` (the split deduplicated against) is
    rejected before any sandbox gate; copies of tasks generated before are the caller's to find."""
    seed = plan.seeds[i % len(plan.seeds)]
    placeholder = Task(cid, "backend", "", "", "")
    try:
        reply = client.chat([{"role": "user", "content": prompt_for(seed, i)}])
    except LLMError as exc:
        return Verdict(placeholder, "reply", f"the generator failed: {exc}"[:300]), 0
    tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
    try:
        task = parse_reply(reply.text)
    except Malformed as exc:
        return Verdict(placeholder, "reply", str(exc)[:300]), tokens
    nearest = tests.nearest(code_fingerprint(task.ground_truth))
    if nearest is not None and nearest.similarity.duplicate:
        why = f"a near duplicate of {nearest.task_id} (score {nearest.similarity.score:.2f})"
        return Verdict(task, "duplicate", why), tokens
    verdict = validate(task, scorer)
    if not verdict.gate and solver is not None:
        check = solver.check(task, scorer)
        verdict.solver = check.row()
        if check.error:
            verdict.gate, verdict.reason = "infra", check.error
        elif not check.passed:
            verdict.gate, verdict.reason = "solver", check.reason()
        else:
            verdict.passed.append("solver")
    if not verdict.gate:
        add_plus_tests(verdict, scorer)
    return verdict, tokens


def summary_line(summary: dict[str, Any], out: str) -> str:
    rejected = ", ".join(f"{gate} {n}" for gate, n in summary["rejected_this_run"].items()) or "none"
    return (
        f"generated {summary['decided_this_run']} of {summary['candidates']} candidates: "
        f"kept {summary['kept_this_run']}, rejected {rejected} -> {out}"
    )


def run(options: dict[str, Any], scorer: BackendScorer, advance: Callable[[], None]) -> str:
    """``colbench tasks generate`` from its options (``generator``, ``seeds``, ``count``, ``run_seed``, ``out``,
    ``against``, ``jobs``, ``solver`` and ``solver_tries``); the summary line."""
    # on first use: the LLM client and the task sources are only needed by a generating run
    from colbench.domains.backend.generate.candidates import read_seeds
    from colbench.llm.specs import connect
    from colbench.tasks.sources import load

    seeds = read_seeds(options["seeds"])
    against: list[Task] = []
    if options["against"] != "none":
        try:
            against = load(options["against"])
        except ColbenchError as exc:
            raise ConfigError(
                f"--against {options['against']}: the tasks to deduplicate against are out of reach ({exc}); "
                "pass a local file or --against none"
            ) from None
    client = connect(options["generator"], "generator", temperature=1.0)
    solver = None
    if options.get("solver"):
        solver = SolverGate(
            connect(options["solver"], "solver", temperature=1.0), options["solver"], options["solver_tries"]
        )
    try:
        plan = Plan(seeds, int(options["count"]), int(options.get("run_seed", 0)))
        summary = generate(
            plan,
            client,
            options["generator"],
            scorer,
            against,
            options["out"],
            jobs=options["jobs"],
            advance=advance,
            solver=solver,
        )
    finally:
        client.close()
        if solver is not None:
            solver.client.close()
    return summary_line(summary, options["out"])
