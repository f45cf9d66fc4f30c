"""Stage 1: trajectories with rewards, in the trainer's record format (``sweet_lib.Trajectory``, one JSON per line).

Three sources, any mix of them in one call:

1. ``--agent SPEC``: run ``colbench eval`` (its Python entry point, ``colbench.eval.run_eval``) with ``--trials k``
   on the training tasks, then read the run directory it wrote. Any policy the harness drives: an
   OpenAI-compatible server (``openai:MODEL`` + ``COLBENCH_AGENT_BASE_URL``, e.g. vLLM serving the policy),
   ``llamacpp`` (the embedded SmolLM2), or a plug-in ``module:Attr``. A run directory is resumable: ``--resume``.
2. ``--runs DIR ...``: run directories that ``colbench eval`` already wrote (docs/run-format.md).
3. ``--offline FILE``: the released offline data, ``colbench_code_offline_15k_llama8b.jsonl`` (5k tasks x 3
   samples of Llama-3.1-8B-Instruct with a 70B simulator), or any file in its format (see ``import_offline``).

Conversation rebuilt for every source: the first ``user`` message is colbench's agent prompt for the task (what the
env's ``reset`` returns), then the agent's turns as ``assistant`` and the human's replies as ``user``.

    python examples/sweet_rl/collect.py --agent openai:policy --tasks backend-train --trials 3 \
        --out DIR/trajectories.jsonl
    python examples/sweet_rl/collect.py --offline colbench_code_offline_15k_llama8b.jsonl --out DIR/trajectories.jsonl
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweet_lib import Trajectory, log, read_jsonl, save_json, write_jsonl

from colbench._util.config_cli import parse_config
from colbench.env.domain import get_domain
from colbench.tasks import task_from_row
from colbench.types.dialogue import MAX_TURNS


@dataclass
class CollectConfig:
    """Collect trajectories (colbench eval runs and/or the offline file) into one JSONL of trajectory records."""

    out: str = "runs/sweet_rl/trajectories.jsonl"
    # -- 1. run colbench eval ---------------------------------------------------------------------------------
    agent: str | None = None  # openai:MODEL | llamacpp | module:Attr; None: run nothing
    env: str = "ColBench-Backend-v1"
    tasks: str = "backend-train"  # a split name or a JSONL task file
    limit: int | None = None  # the first N tasks
    trials: int = 3  # k samples per task (the original: 3)
    simulator: str = "llamacpp"  # openai:MODEL (the paper: Llama-3.1-70B-Instruct) | llamacpp | scripted
    max_turns: int = MAX_TURNS
    temperature: float = 1.0  # sampling temperature of an endpoint agent (the original sampled at 1.0)
    max_tokens: int | None = None  # per agent turn, endpoint agents
    agent_option: list[str] = field(default_factory=list)  # KEY=JSON extra agent options (plug-in arguments, ...)
    concurrency: int = 8
    sandbox: str = "auto"
    run_dir: str | None = None  # where the eval run goes (default: next to --out, named run-<agent>)
    resume: bool = False
    # -- 2. existing run directories ---------------------------------------------------------------------------
    runs: list[str] = field(default_factory=list)
    # -- 3. the offline file -----------------------------------------------------------------------------------
    offline: str | None = None
    offline_domain: str = "backend"
    offline_limit: int | None = None  # the first N lines
    score_missing: bool = False  # score offline rows that carry no "reward" with colbench's backend scorer


EVAL_OPTIONS = ("simulator", "tasks", "limit", "trials", "concurrency", "resume", "max_turns", "sandbox")
"""The fields of ``CollectConfig`` that are ``colbench eval``'s own options of the same name, passed on as they are."""


# ------------------------------------------------------------------------------------------- colbench run dirs


def run_colbench_eval(config: CollectConfig) -> Path:
    """k trials per task through the eval harness; returns the run directory (docs/run-format.md)."""
    from colbench.eval import RunPlan, run_eval
    from colbench.llm import parse_spec

    agent = config.agent
    assert agent is not None
    options: dict[str, Any] = {}
    if parse_spec(agent, "agent").is_model:
        options["temperature"] = config.temperature
        if config.max_tokens is not None:
            options["max_tokens"] = config.max_tokens
    for item in config.agent_option:
        key, _, raw = item.partition("=")
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in agent)
    run_dir = Path(config.run_dir or Path(config.out).parent / f"run-{safe}")
    passed_on = {name: getattr(config, name) for name in EVAL_OPTIONS}
    plan = RunPlan.resolve(
        env_id=config.env, agent=agent, out=run_dir, agent_options=options, progress="off", **passed_on
    )
    result = run_eval(plan)
    log("collect", result.summary_line())
    if result.exit_code not in (0, 3):  # 3: some episodes hit infrastructure errors; they are skipped below
        raise SystemExit(result.exit_code)
    return run_dir


def trajectories_from_run(run_dir: str | Path) -> tuple[list[Trajectory], Counter[str]]:
    """Every scored episode of a run directory as a trajectory (infrastructure errors are skipped, counted)."""
    from colbench.runs import load_run
    from colbench.tasks import load

    run = load_run(run_dir)
    tasks = {t.task_id: t for t in load(run.tasks.spec or "")}
    max_turns = run.config.max_turns or MAX_TURNS
    policy = run.config.agent.spec or "" if run.config.agent is not None else ""
    skipped: Counter[str] = Counter()
    out: list[Trajectory] = []
    for (task_id, trial), record in sorted(run.episodes.items()):
        if not record.ok:
            skipped["infra_error"] += 1
            continue
        episode = record.row
        task = tasks.get(task_id)
        if task is None:
            skipped["unknown task"] += 1
            continue
        dialogue = episode.get("dialogue") or []
        if not dialogue or dialogue[-1]["role"] != "agent":
            skipped["no final agent turn"] += 1
            continue
        messages = [{"role": "user", "content": get_domain(task.domain).agent_prompt(task, max_turns)}]
        messages += [{"role": "assistant" if t["role"] == "agent" else "user", "content": t["text"]} for t in dialogue]
        out.append(
            Trajectory(
                task_id=task_id,
                trial=int(trial),
                domain=task.domain,
                messages=messages,
                hidden_information=task.hidden_information,
                reward=float(episode["reward"]),
                success=episode.get("success"),
                source=str(run_dir),
                policy=policy,
                meta={"termination": episode.get("termination")},
            )
        )
    return out, skipped


# ------------------------------------------------------------------------------------------- the offline file


def import_offline(
    path: str | Path,
    *,
    domain: str = "backend",
    limit: int | None = None,
    max_turns: int = MAX_TURNS,
    scorer: Any = None,
) -> tuple[list[Trajectory], Counter[str]]:
    """Read the original release's trajectory file (``colbench_code_offline_15k_llama8b.jsonl``).

    Its format (one JSON object per line, as the original ``simulate_interactions.py`` writes it and
    ``evaluate_code.py`` annotates it):

    - ``task``: the task row (``problem_description``, ``ground_truth``, for code ``test_cases``, maybe
      ``hidden_information``); its colbench ``task_id`` is the content hash of that row, so the same task gets the
      same id as in ``backend-train``.
    - ``dialogue_history``: ``{"role": "user", "content": <problem description>}`` first, then alternating
      ``{"role": "assistant", "content": <the turn as the env saw it: the text after the first "OUTPUT:" if any>,
      "input": <the fully chat-templated prompt the agent was given>, "output": <the raw generation>}`` and
      ``{"role": "user", "content": <the simulator's reply>}``; the last entry is the agent's final turn.
    - ``answer``: the extracted final answer; ``reward``: fraction of tests passed (added by ``evaluate_code.py``;
      absent in unscored files: then ``scorer`` scores ``answer`` or the row is skipped).
    - The k samples of a task are in task-major blocks (line ``i`` and ``i + n_tasks`` share a task); this importer
      groups by task content instead and numbers the samples of a task 0, 1, ... in file order.

    The conversation is rebuilt with colbench's agent prompt as the first message and the raw ``output`` of each
    agent turn (what the policy generated); the original ``input`` strings (Llama-3.1 prompts with the original
    agent prompt) are not kept.
    """
    skipped: Counter[str] = Counter()
    trials: Counter[str] = Counter()
    out: list[Trajectory] = []
    for lineno, row in enumerate(read_jsonl(path), start=1):
        if limit is not None and lineno > limit:
            break
        where = f"{path}:{lineno}"
        try:
            task = task_from_row(row["task"], domain=domain, where=where)  # type: ignore[arg-type,unused-ignore]
            history = row["dialogue_history"]
        except (KeyError, TypeError, ValueError) as exc:
            skipped[f"bad row ({type(exc).__name__})"] += 1
            continue
        messages = [{"role": "user", "content": get_domain(task.domain).agent_prompt(task, max_turns)}]
        for entry in history[1:]:
            if entry.get("role") == "assistant":
                text = entry.get("output") if isinstance(entry.get("output"), str) else entry.get("content")
                messages.append({"role": "assistant", "content": str(text or "")})
            else:
                messages.append({"role": "user", "content": str(entry.get("content") or "")})
        if len(messages) < 2 or messages[-1]["role"] != "assistant":
            skipped["no final agent turn"] += 1
            continue
        reward = row.get("reward")
        if reward is None and scorer is not None:
            reward = scorer.score(task, messages[-1]["content"]).pass_rate
        if reward is None:
            skipped["no reward (use --score-missing)"] += 1
            continue
        success = float(reward) >= 1.0 if domain == "backend" else None
        out.append(
            Trajectory(
                task_id=task.task_id,
                trial=trials[task.task_id],
                domain=domain,
                messages=messages,
                hidden_information=task.hidden_information,
                reward=float(reward),
                success=success,
                source=where,
                policy="offline",
            )
        )
        trials[task.task_id] += 1
    return out, skipped


def _backend_scorer() -> Any:
    return get_domain("backend").shared_scorer({"sandbox": "auto"})


# ------------------------------------------------------------------------------------------- main


def main(config: CollectConfig) -> list[Trajectory]:
    trajectories: list[Trajectory] = []
    skipped: Counter[str] = Counter()
    run_dirs = list(config.runs)
    if config.agent is not None:
        run_dirs.append(str(run_colbench_eval(config)))
    for run_dir in run_dirs:
        got, why = trajectories_from_run(run_dir)
        log("collect", f"{run_dir}: {len(got)} trajectories")
        trajectories += got
        skipped += why
    if config.offline is not None:
        scorer = _backend_scorer() if config.score_missing and config.offline_domain == "backend" else None
        got, why = import_offline(
            config.offline, domain=config.offline_domain, limit=config.offline_limit, scorer=scorer
        )
        log("collect", f"{config.offline}: {len(got)} trajectories")
        trajectories += got
        skipped += why
    if not trajectories:
        raise SystemExit("collect: no trajectories (give --agent, --runs or --offline)")
    write_jsonl(config.out, (t.to_json() for t in trajectories))
    rewards = [t.reward for t in trajectories]
    stats = {
        "trajectories": len(trajectories),
        "tasks": len({t.task_id for t in trajectories}),
        "mean_reward": sum(rewards) / len(rewards),
        "success_rate": sum(bool(t.success) for t in trajectories) / len(trajectories),
        "skipped": dict(skipped),
        "sources": run_dirs + ([config.offline] if config.offline else []),
    }
    save_json(Path(config.out).with_suffix(".stats.json"), stats)
    log("collect", f"wrote {len(trajectories)} trajectories to {config.out}: {json.dumps(stats)}")
    return trajectories


if __name__ == "__main__":
    main(parse_config(CollectConfig))
