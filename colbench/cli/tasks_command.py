"""``colbench tasks ls | check | audit | augment | generate | build-frontend``: list task files and splits, check
that they can be judged fairly, audit backend tests by mutation and strengthen them (ColBench+), generate new tasks
(docs/generate.md), build the frontend splits (docs/tasks.md)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import AbstractContextManager, closing, nullcontext
from typing import TYPE_CHECKING, TextIO

from colbench._util.progress_bar import progress_bar
from colbench.cli.arguments import SANDBOX_HELP
from colbench.cli.jsonl_io import write_jsonl
from colbench.errors import ConfigError
from colbench.tasks.sources import load

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands
    from colbench.domains.backend.plus.augment import Proposer
    from colbench.domains.backend.scorer import BackendScorer
    from colbench.types.task import Task


def add_parser(commands: Subcommands) -> None:
    tasks = commands.add_parser("tasks", help="list and check tasks").add_subparsers(dest="action", required=True)
    ls = tasks.add_parser("ls", help="list tasks of a JSONL file or a named split")
    ls.add_argument("source", metavar="FILE_OR_SPLIT")
    ls.add_argument("--ids", action="store_true", help="print one task_id per line, in file order")
    ls.set_defaults(func=cmd_tasks_ls)
    check = tasks.add_parser(
        "check", help="check that every task can be judged fairly (backend: run the references in the sandbox)"
    )
    check.add_argument("source", metavar="FILE_OR_SPLIT")
    check.add_argument("--sandbox", default="auto", help=f"backend: {SANDBOX_HELP}")
    check.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    check.add_argument(
        "--rules", type=int, choices=(2, 3), default=3, help="backend judging: 3 (current) or 2 (colbench 0.1)"
    )
    check.set_defaults(func=cmd_tasks_check)
    audit = tasks.add_parser(
        "audit", help="mutation analysis of backend tasks' tests: which wrong variants of the reference pass them"
    )
    audit.add_argument("source", metavar="FILE_OR_SPLIT")
    audit.add_argument("--out", metavar="REPORT.jsonl", help="one row per task (survivors with their edits)")
    audit.add_argument(
        "--env",
        default="ColBench-Backend-v1",
        metavar="ENV_ID",
        help="whose tests: ColBench-Backend-v1 (the task's own; default) or ColBench-Backend-v2 (with plus tests)",
    )
    audit.add_argument("--sandbox", default="auto", help=SANDBOX_HELP)
    audit.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="tasks at once")
    audit.set_defaults(func=cmd_tasks_audit)
    augment = tasks.add_parser("augment", help="add ColBench+ tests (plus_test_cases) to backend tasks")
    augment.add_argument("source", metavar="FILE_OR_SPLIT")
    augment.add_argument("--out", required=True, metavar="FILE.jsonl")
    augment.add_argument(
        "--generator", metavar="MODEL_SPEC", help="also ask this model for inputs (openai:MODEL, llamacpp; off)"
    )
    augment.add_argument("--sandbox", default="auto", help=SANDBOX_HELP)
    augment.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="tasks at once")
    augment.set_defaults(func=cmd_tasks_augment)
    generate = tasks.add_parser(
        "generate", help="generate new tasks with a model, kept only through sandbox gates (docs/generate.md)"
    )
    generate.add_argument("--generator", required=True, metavar="MODEL_SPEC", help="openai:MODEL, llamacpp, ...")
    generate.add_argument(
        "--seeds", required=True, metavar="FILE", help="topics (.txt), task rows or topics (.jsonl), functions (.py)"
    )
    generate.add_argument("--n", type=int, default=10, dest="count", help="candidates to generate")
    generate.add_argument("--out", required=True, metavar="FILE.jsonl", help="kept tasks (appended; a rerun resumes)")
    generate.add_argument("--domain", default="backend")
    generate.add_argument("--seed", type=int, default=0, dest="run_seed", help="makes the candidate ids")
    generate.add_argument(
        "--against", default="backend-test", metavar="FILE_OR_SPLIT", help="test tasks to deduplicate against, or none"
    )
    generate.add_argument("--sandbox", default="auto", help=SANDBOX_HELP)
    generate.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="candidates at once")
    generate.add_argument(
        "--solver",
        metavar="MODEL_SPEC",
        help="optional gate: keep a task only if this model solves it more often with the hidden information than "
        "from the request alone",
    )
    generate.add_argument(
        "--solver-tries", type=int, default=2, metavar="K", help="the solver's answers per view (default 2)"
    )
    generate.add_argument("--dry-run", action="store_true", help="print the forecast tokens and cost; call no model")
    generate.set_defaults(func=cmd_tasks_generate)
    build_frontend = tasks.add_parser(
        "build-frontend", help="build a frontend split from WebSight v0.2 into a ColBench JSONL task file"
    )
    build_frontend.add_argument("--split", default="frontend-test", help="frontend-test | frontend-test-full | ...")
    build_frontend.add_argument("--out", required=True, metavar="FILE.jsonl")
    build_frontend.add_argument("--revision", help="a WebSight commit, branch or tag instead of the pinned commit")
    build_frontend.set_defaults(func=cmd_tasks_build_frontend)


def cmd_tasks_ls(args: argparse.Namespace) -> int:
    """One line per task (id, domain, tests, the start of its description), or the ids alone for scripts."""
    tasks = load(args.source)
    for task in tasks:
        if args.ids:
            print(task.task_id)
        else:
            desc = " ".join(task.problem_description.split())
            print(f"{task.task_id}\t{task.domain}\t{len(task.test_cases)} tests\t{desc[:90]}")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """Ask each task's domain whether its tasks can be judged fairly (docs/tasks.md): one line per problem found."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.env.domain import check_tasks

    for line in check_tasks(load(args.source), {"sandbox": args.sandbox, "jobs": args.jobs, "rules": args.rules}):
        print(line, flush=True)
    return 0


def _backend_tasks(source: str) -> list[Task]:
    tasks = load(source)
    other = next((t for t in tasks if not t.test_cases), None)
    if other is not None:
        raise ConfigError(
            f"{source}: task {other.task_id!r} is a {other.domain} task: audit and augment take tasks judged by "
            "test calls (backend)"
        )
    return tasks


def cmd_tasks_audit(args: argparse.Namespace) -> int:
    """Mutation analysis per task (a report row each with --out) and a summary line for the split."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.domains.backend.plus.audit import summarize
    from colbench.domains.backend.plus.many import audit_tasks

    tasks = _backend_tasks(args.source)
    audits = []
    with (
        closing(_scorer(args.sandbox, args.jobs, args.env)) as scorer,
        _report(args.out) as out,
        progress_bar("auditing", len(tasks)) as advance,
    ):
        for audit in audit_tasks(tasks, scorer, jobs=args.jobs):
            audits.append(audit)
            if out is not None:
                write_jsonl(out, audit.row())
            if audit.problem:
                print(f"{audit.task_id}: not audited: {audit.problem}", file=sys.stderr)
            advance()
    print(f"{args.env}: " + summarize(audits).line() + (f" -> {args.out}" if args.out else ""))
    return 0


def cmd_tasks_augment(args: argparse.Namespace) -> int:
    """The tasks with plus tests, written in order as they are made (a task without any says why on stderr)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.domains.backend.plus.augment import AUGMENTER_VERSION
    from colbench.domains.backend.plus.many import augment_tasks

    tasks = _backend_tasks(args.source)
    proposer = _proposer(args.generator) if args.generator else None
    added = 0
    with (
        closing(_scorer(args.sandbox, args.jobs)) as scorer,
        _report(args.out) as out,
        progress_bar("augmenting", len(tasks)) as advance,
    ):
        assert out is not None
        for made in augment_tasks(tasks, scorer, jobs=args.jobs, proposer=proposer):
            write_jsonl(out, made.task.to_row())
            added += len(made.plus.cases)
            if made.plus.note:
                print(f"{made.task.task_id}: no plus tests: {made.plus.note}", file=sys.stderr)
            advance()
    print(f"augmenter {AUGMENTER_VERSION}: {added} plus tests for {len(tasks)} tasks -> {args.out}")
    return 0


def cmd_tasks_generate(args: argparse.Namespace) -> int:
    """New tasks from a model through the domain's gates; the summary line (also ``<out>.summary.json``)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.env.domain import get_domain

    if args.count < 1:
        raise ConfigError(f"--n {args.count}: at least one candidate")
    if args.dry_run:
        # run-time import: the forecast's conventions live with the eval layer
        from colbench.cli.generate_forecast import forecast_lines

        print("\n".join(forecast_lines(args.generator, args.seeds, args.count)))
        if args.solver:
            calls = 2 * args.solver_tries * args.count
            print(
                f"solver gate: at most {calls:,} calls to {args.solver} (two views x {args.solver_tries} tries for "
                "each candidate that passes the other gates), not in the figures above"
            )
        return 0
    if args.solver_tries < 1:
        raise ConfigError(f"--solver-tries {args.solver_tries}: at least one answer per view")
    names = ("generator", "seeds", "count", "out", "run_seed", "against", "sandbox", "jobs", "solver", "solver_tries")
    options = {k: getattr(args, k) for k in names}
    domain = get_domain(args.domain)
    with progress_bar("generating", args.count) as advance:
        line = domain.generate_tasks(options, advance)
    print(line)
    return 0


def cmd_tasks_build_frontend(args: argparse.Namespace) -> int:
    """Build a WebSight frontend split (pinned, hash-checked) into a ColBench JSONL task file."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.tasks.websight import build_frontend

    tasks = build_frontend(args.split, args.out, revision=args.revision)
    print(f"wrote {len(tasks)} frontend tasks of split {args.split} -> {args.out}")
    return 0


def _scorer(sandbox: str, jobs: int, env_id: str = "ColBench-Backend-v1") -> BackendScorer:
    """The scorer of a backend env id's rules (plus tests computed on first use where a task has none), with a
    sandbox of ``jobs`` workers."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.domains.backend import DOMAIN
    from colbench.domains.backend.scorer import BackendScorer
    from colbench.env.versions import scoring_env, scoring_options

    checked = scoring_env(DOMAIN, env_id, "--env")
    assert checked is not None
    scorer = DOMAIN.make_scorer({"sandbox": sandbox, **scoring_options(checked)}, jobs=jobs)
    assert isinstance(scorer, BackendScorer)
    return scorer


def _proposer(spec: str) -> Proposer:
    # run-time import: --generator only (the LLM layer)
    from colbench.domains.backend.plus.proposals import ModelProposer
    from colbench.llm.specs import connect

    return ModelProposer(connect(spec, "generator", temperature=0.0))


def _report(path: str | None) -> AbstractContextManager[TextIO | None]:
    return nullcontext() if path is None else open(path, "w", encoding="utf-8")
