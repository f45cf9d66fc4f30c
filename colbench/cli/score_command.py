"""``colbench score <domain>``: answers scored offline by their domain's scorer, one result row per answer, in
answer order (docs/scoring.md); ``--env ID`` picks the version of the scoring (default: the domain's newest env id),
and every row names it; ``--ray`` spreads the chunks over a cluster's actors (docs/scale.md)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from colbench.cli.arguments import add_ray_arguments
from colbench.cli.jsonl_io import read_answers, write_jsonl
from colbench.env.domain import all_domains, get_domain
from colbench.env.versions import newest_env, scoring_env, scoring_envs, scoring_options
from colbench.errors import DataError, InfraError
from colbench.tasks.sources import load

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands
    from colbench.env.domain import Domain, Score, Scorer
    from colbench.types.task import Task

SCORE_CHUNK = 64  # answers scored together: a long run writes (and keeps) its results as it goes
RAY_SCORE_CHUNK = 16  # smaller with --ray: the chunks are spread over the cluster's actors


def add_parser(commands: Subcommands) -> None:
    """One sub-command per registered domain (a third-party domain gets its own), with that domain's options."""
    score = commands.add_parser("score", help="score answers offline").add_subparsers(dest="domain", required=True)
    for domain in all_domains():
        scoring = score.add_parser(domain.name, help=domain.score_help)
        scoring.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
        scoring.add_argument("--answers", required=True, help='JSONL of {"task_id", "answer"}')
        scoring.add_argument("--out", required=True, help="JSONL results, one per answer, in answer order")
        versions = [d.id for d in scoring_envs(domain)]
        if versions:
            scoring.add_argument(
                "--env",
                metavar="ID",
                help=f"the env id whose scoring rules judge the answers: {', '.join(versions)} "
                f"(default: the newest, {newest_env(domain)})",
            )
        for option in domain.score_options:
            scoring.add_argument(
                f"--{option.name.replace('_', '-')}",
                type=option.value_type,
                default=option.default,
                choices=option.choices,
                help=option.help,
            )
        add_ray_arguments(scoring, "scoring jobs")
        scoring.set_defaults(func=cmd_score)


def cmd_score(args: argparse.Namespace) -> int:
    """Score answers offline with their domain's scorer; one result row per answer, in answer order."""
    domain: Domain = get_domain(args.domain)
    tasks = {t.task_id: t for t in load(args.tasks)}
    answers = read_answers(args.answers, tasks)
    wrong = next((task for task, _ in answers if task.domain != domain.name), None)
    if wrong is not None:
        raise DataError(
            f"{args.tasks}: task {wrong.task_id!r} is a {wrong.domain} task; use `colbench score {wrong.domain}`"
        )
    env_id = scoring_env(domain, getattr(args, "env", None))
    options = {option.name: getattr(args, option.name) for option in domain.score_options}
    jobs = options.pop("jobs", None)  # make_scorer's own argument, not one of its options
    if env_id is not None:
        options.update(scoring_options(env_id))
    scores: list[Score] = []
    with closing(domain.make_scorer(options, jobs=jobs)) as scorer:
        described = domain.describe_scoring(scorer, [task for task, _ in answers])  # what the version needs, up front
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as out:
            size = RAY_SCORE_CHUNK if args.ray is not None else SCORE_CHUNK
            chunks = [answers[start : start + size] for start in range(0, len(answers), size)]
            scored = _scored_chunks(
                domain, scorer, chunks, options=options, jobs=jobs, ray=args.ray, ray_workers=args.ray_workers
            )
            for chunk, done in zip(chunks, scored, strict=True):
                if isinstance(done, InfraError):
                    done = [domain.unjudged(task.task_id, str(done)) for task, _ in chunk]
                for (task, _), score in zip(chunk, done, strict=True):
                    row = score.result_row(task.task_id)
                    if env_id is not None:  # an unjudged answer's row names the version it was to be scored by too
                        row["env_id"] = env_id
                    if described.get("taskenv"):  # ... and the task environment
                        _same_task_environment(row, described["taskenv"])
                        row["taskenv"] = described["taskenv"]
                    write_jsonl(out, row)
                scores += done
        version = f"{env_id}: " if env_id is not None else ""
        print(f"{version}{domain.score_summary(scores, scorer)} -> {args.out}")
    return 0


def _same_task_environment(row: dict[str, Any], expected: str) -> None:
    """A score from another task environment (a Ray node set up from another tarball) is never written beside
    this machine's."""
    if row.get("taskenv") not in (None, expected):
        raise InfraError(
            f"task {row['task_id']} was scored in task environment {row['taskenv']}, not this machine's {expected}: "
            "every node must run one task environment (colbench sandbox build from one tarball)"
        )


def _scored_chunks(
    domain: Domain,
    scorer: Scorer,
    chunks: list[list[tuple[Task, str]]],
    *,
    options: dict[str, Any],
    jobs: int | None,
    ray: str | None,
    ray_workers: int | None,
) -> Iterator[list[Score] | InfraError]:
    """Each chunk's scores in order, from this process's scorer or, with ``--ray``, from actors on the cluster
    (each making its own scorer from the same ``options`` and ``jobs``)."""
    if ray is None:
        for chunk in chunks:
            try:
                yield list(scorer.score_many(chunk))
            except InfraError as exc:
                yield exc
        return
    from colbench.ray.score_actors import RayScoring  # Ray is imported only with --ray

    with closing(RayScoring(domain.name, options, jobs=jobs, address=ray, workers=ray_workers)) as remote:
        yield from remote.score_chunks(chunks)
