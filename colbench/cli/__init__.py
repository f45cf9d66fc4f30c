"""The ``colbench`` command line (the contract in DESIGN.md section 5: other tools script against it)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from colbench import __version__
from colbench._util.storage import iter_jsonl
from colbench.env.domain import all_domains, get_domain
from colbench.errors import ColbenchError, ConfigError, DataError, InfraError
from colbench.tasks.sources import load
from colbench.types.leaks import POLICY_HELP
from colbench.types.task import Task

if TYPE_CHECKING:
    from colbench.env.domain import Domain, Score, Scorer

SANDBOX_HELP = "auto (Docker when available, else bwrap) | docker | bwrap"


def _read_answers(path: str, tasks: dict[str, Task], field: str = "answer") -> list[tuple[Task, str]]:
    """Rows ``{"task_id", field}`` of a JSONL file with their tasks, in file order."""
    answers = []
    for where, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with 'task_id' and '{field}'")
        task_id, answer = row.get("task_id"), row.get(field)
        if not isinstance(task_id, str | int):
            raise DataError(f"{where}: field 'task_id': missing or not a string")
        if not isinstance(answer, str):
            raise DataError(f"{where}: field '{field}': missing or not a string")
        task = tasks.get(str(task_id))
        if task is None:
            raise DataError(f"{where}: field 'task_id': {task_id!r} is not in the task file")
        answers.append((task, answer))
    return answers


def _write_jsonl(out: TextIO, row: dict[str, Any]) -> None:
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())


# -- tasks ------------------------------------------------------------------------------------------------------
def cmd_tasks_ls(args: argparse.Namespace) -> int:
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
    from colbench.env.domain import check_tasks

    for line in check_tasks(load(args.source), {"sandbox": args.sandbox, "jobs": args.jobs, "rules": args.rules}):
        print(line, flush=True)
    return 0


def cmd_tasks_build_frontend(args: argparse.Namespace) -> int:
    """Build a WebSight frontend split (pinned, hash-checked) into a ColBench JSONL task file."""
    from colbench.tasks.websight import build_frontend

    tasks = build_frontend(args.split, args.out, revision=args.revision)
    print(f"wrote {len(tasks)} frontend tasks of split {args.split} -> {args.out}")
    return 0


# -- eval -------------------------------------------------------------------------------------------------------
def cmd_eval(args: argparse.Namespace) -> int:
    """Run an agent with a simulated human on tasks into a run directory (docs/evaluation.md, docs/run-format.md)."""
    from colbench.eval import EvalConfig, run_eval
    from colbench.llm.limits import EndpointLimits
    from colbench.report import load_prices

    if args.out is None and (args.resume or not args.dry_run):
        raise ConfigError("eval: --out DIR is required (only a --dry-run forecast without --resume runs without one)")
    agent_options, simulator_options = _endpoint_options(args, "agent"), _endpoint_options(args, "simulator")
    prices = load_prices(args.prices) if args.prices else None
    if args.simulator_image_mode:
        simulator_options["image_mode"] = args.simulator_image_mode
    for name in ("view", "specs", "spec_model"):
        if getattr(args, f"simulator_{name}"):
            simulator_options[name] = getattr(args, f"simulator_{name}")
    given = {name: getattr(args, name) for name in ("tasks", "limit", "max_turns", "max_consecutive_errors")}
    config = EvalConfig(
        env_id=args.env,
        agent=args.agent,
        simulator=args.simulator,
        out=args.out if args.out is not None else ".",  # a dry run without --resume never reads it
        trials=args.trials,
        concurrency=args.concurrency,
        resume=args.resume,
        sandbox=args.sandbox,
        embedder=args.embedder,
        leak_policy=args.leak_policy,
        agent_options=agent_options,
        simulator_options=simulator_options,
        agent_limits=EndpointLimits(args.agent_rpm, args.agent_max_concurrency),
        simulator_limits=EndpointLimits(args.simulator_rpm, args.simulator_max_concurrency),
        progress="off" if args.quiet else "auto",
        prices=prices,
        ray=args.ray,
        ray_workers=args.ray_workers,
        runtime={
            f"{role}_api_key_env": getattr(args, f"{role}_api_key_env")
            for role in ("agent", "simulator")
            if getattr(args, f"{role}_api_key_env")
        },
        **{name: value for name, value in given.items() if value is not None},
    )
    if args.dry_run:
        from colbench.eval.harness import dry_run

        sys.stdout.write(dry_run(config, prices=prices, turns=args.forecast_turns))
        return 0
    if config.ray is not None:  # Ray is imported only here: a run without --ray never loads it
        from colbench.ray.eval_actors import run_eval as run_eval_on_ray

        result = run_eval_on_ray(config, stderr=sys.stderr)
    else:
        result = run_eval(config, stderr=sys.stderr)
    print(result.summary_line())
    if result.interrupted:
        print(f"colbench: interrupted: finished episodes are kept in {result.out}; --resume continues", file=sys.stderr)
    return result.exit_code


def _add_ray_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help=f"run the {what} on a Ray cluster (no ADDRESS: RAY_ADDRESS or this machine's; docs/scale.md)",
    )
    parser.add_argument(
        "--ray-workers", type=int, metavar="N", help="actors on the cluster (default: one per colbench_sandbox unit)"
    )


def _endpoint_options(args: argparse.Namespace, role: str) -> dict[str, Any]:
    """Endpoint fields given on the command line for ``role``; the API key is read from the named variable."""
    options: dict[str, Any] = {}
    key_env = getattr(args, f"{role}_api_key_env")
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise ConfigError(f"--{role}-api-key-env: the environment variable {key_env} is not set or empty")
        options["api_key"] = key
    for flag, name in (
        ("base_url", "base_url"),
        ("temperature", "temperature"),
        ("max_tokens", "max_tokens"),
        ("timeout", "timeout_s"),
        ("max_retries", "max_retries"),
    ):
        value = getattr(args, f"{role}_{flag}")
        if value is not None:
            options[name] = value
    extra = getattr(args, f"{role}_extra_body")
    if extra is not None:
        try:
            options["extra_body"] = json.loads(extra)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--{role}-extra-body: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(options["extra_body"], dict):
            raise ConfigError(f"--{role}-extra-body must be a JSON object, got {extra!r}")
    return options


# -- score ------------------------------------------------------------------------------------------------------
SCORE_CHUNK = 64  # answers scored together: a long run writes (and keeps) its results as it goes
RAY_SCORE_CHUNK = 16  # smaller with --ray: the chunks are spread over the cluster's actors


def cmd_score(args: argparse.Namespace) -> int:
    """Score answers offline with their domain's scorer; one result row per answer, in answer order."""
    domain: Domain = get_domain(args.domain)
    tasks = {t.task_id: t for t in load(args.tasks)}
    answers = _read_answers(args.answers, tasks)
    wrong = next((task for task, _ in answers if task.domain != domain.name), None)
    if wrong is not None:
        raise DataError(
            f"{args.tasks}: task {wrong.task_id!r} is a {wrong.domain} task; use `colbench score {wrong.domain}`"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    scores: list[Score] = []
    with closing(domain.scorer_from_args(args)) as scorer, open(args.out, "w", encoding="utf-8") as out:
        size = RAY_SCORE_CHUNK if args.ray is not None else SCORE_CHUNK
        chunks = [answers[start : start + size] for start in range(0, len(answers), size)]
        for chunk, done in zip(chunks, _scored_chunks(domain, scorer, chunks, args), strict=True):
            if isinstance(done, InfraError):
                done = [domain.unjudged(task.task_id, str(done)) for task, _ in chunk]
            for (task, _), score in zip(chunk, done, strict=True):
                _write_jsonl(out, score.result_row(task.task_id))
            scores += done
        print(f"{domain.score_summary(scores, scorer)} -> {args.out}")
    return 0


def _scored_chunks(
    domain: Domain, scorer: Scorer, chunks: list[list[tuple[Task, str]]], args: argparse.Namespace
) -> Iterator[list[Score] | InfraError]:
    """Each chunk's scores in order, from this process's scorer or, with ``--ray``, from actors on the cluster."""
    if args.ray is None:
        for chunk in chunks:
            try:
                yield list(scorer.score_many(chunk))
            except InfraError as exc:
                yield exc
        return
    from colbench.ray.score_actors import RayScoring  # Ray is imported only with --ray

    with closing(RayScoring(domain.name, args)) as remote:
        yield from remote.score_chunks(chunks)


# -- leaks ------------------------------------------------------------------------------------------------------
def cmd_leaks_score(args: argparse.Namespace) -> int:
    """Score simulated-human replies for leaks of their task's hidden information (docs/leaks.md)."""
    replies = _read_answers(args.replies, {t.task_id: t for t in load(args.tasks)}, field="reply")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    flagged = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for task, reply in replies:
            domain = get_domain(task.domain)
            score = domain.leak_score(task, reply)
            leak = score >= domain.leak_threshold
            flagged += leak
            _write_jsonl(out, {"task_id": task.task_id, "leak_score": score, "leak": leak})
    share = 100 * flagged / max(len(replies), 1)
    print(f"scored {len(replies)} replies: {flagged} leaks ({share:.1f}%) -> {args.out}")
    return 0


def cmd_leaks_labelled(args: argparse.Namespace) -> int:
    """Write the labelled set the leak detectors are measured on (docs/leaks.md), made from the tasks."""
    tasks = load(args.tasks)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for name in dict.fromkeys(t.domain for t in tasks):
            mine = [t for t in tasks if t.domain == name]
            for task, item in get_domain(name).labelled_replies(mine, seed=args.seed):
                _write_jsonl(out, {"task_id": task.task_id, "reply": item.reply, "leak": item.leak, "kind": item.kind})
                rows += 1
    print(f"wrote {rows} labelled replies for {len(tasks)} tasks -> {args.out}")
    return 0


# -- probe ------------------------------------------------------------------------------------------------------
def cmd_probe_simulator(args: argparse.Namespace) -> int:
    """Play the adversarial probe suite against a simulated human; leak, refusal and off-topic rates (docs/leaks.md)."""
    from colbench.llm.limits import EndpointLimits
    from colbench.probe import ProbeConfig, run_probe, summary_table

    options = _endpoint_options(args, "simulator")
    if args.simulator_image_mode:
        options["image_mode"] = args.simulator_image_mode
    spec_options = {name: getattr(args, f"simulator_{name}") for name in ("specs", "spec_model")}
    config = ProbeConfig(
        simulator=args.simulator,
        out=args.out,
        tasks=args.tasks,
        limit=args.limit,
        views=tuple(v.strip() for v in args.views.split(",") if v.strip()),
        suite=args.suite,
        concurrency=args.concurrency,
        resume=args.resume,
        simulator_options=options,
        spec_options={k: v for k, v in spec_options.items() if v},
        limits=EndpointLimits(args.simulator_rpm, args.simulator_max_concurrency),
    )
    result = run_probe(config)
    if args.json:
        print(json.dumps(result.summary, indent=2))
    else:
        title = f"Simulator probe: {args.simulator} on {args.tasks} ({result.out})"
        print(summary_table(result.summary, title))
    print(
        f"probe: {result.ran} rows run this session, {result.failed} failed -> {result.out}"
        + ("; --resume runs the rest" if result.failed or result.interrupted else ""),
        file=sys.stderr,
    )
    return result.exit_code


def cmd_specs_export(args: argparse.Namespace) -> int:
    """Write (or read from the cache) the spec of every task, as a pinned specs file (docs/leaks.md)."""
    from colbench.humans.spec import write_specs, written_specs

    tasks = load(args.tasks)
    names = sorted({t.domain for t in tasks})
    if len(names) != 1:
        raise ConfigError(f"{args.tasks}: specs are exported for the tasks of one domain, got {', '.join(names)}")
    domain = get_domain(names[0])
    writer = domain.spec_writer(args.model, **_endpoint_options(args, "simulator"))
    specs = written_specs(writer, tasks, concurrency=args.concurrency)
    count = write_specs(args.out, specs)
    flagged = sum((s.leak_score or 0) >= domain.leak_threshold for s in specs)
    print(f"wrote {count} specs ({flagged} flagged as leaking) -> {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Leaderboard of run directories (terminal table, optional Markdown), token costs, per-run HTML reports."""
    from colbench.report import build_report, load_prices, load_run, write_run_report

    runs = [load_run(path) for path in args.dirs]
    reference = load_run(args.reference_run) if args.reference_run else None
    prices = load_prices(args.prices) if args.prices else None
    report = build_report(runs, reference=reference, prices=prices)
    written = []
    if args.markdown:
        try:
            Path(args.markdown).write_text(report.markdown(), encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{args.markdown}: cannot write: {exc.strerror or exc}") from exc
        written.append(args.markdown)
    if args.html:
        written += [str(write_run_report(run, report)) for run in runs]
    sys.stdout.write(report.text())
    for warning in report.warnings():
        print(f"colbench: warning: {warning}", file=sys.stderr)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """One episode of a run directory as a readable dialogue, with its score."""
    from colbench.report.show import show

    sys.stdout.write(show(args.dir, args.task, args.trial))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """The first run against each other run, paired per task; every simulator swap the runs contain."""
    from colbench.report import load_run
    from colbench.report.compare import compare

    comparison = compare([load_run(path) for path in args.dirs])
    sys.stdout.write(comparison.text())
    if args.html:
        try:
            Path(args.html).write_text(comparison.html(), encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{args.html}: cannot write: {exc.strerror or exc}") from exc
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


# -- sandbox ----------------------------------------------------------------------------------------------------
def cmd_model_export_hf(args: argparse.Namespace) -> int:
    from colbench.llm.export import export_hf

    print(export_hf(args.gguf, args.out, force=args.force))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from colbench.integrations.openenv import make_app, needs_token

    token = os.environ.get(args.token_env) if args.token_env else None
    if args.token_env and not token:
        raise ConfigError(f"--token-env: the environment variable {args.token_env} is not set or empty")
    if token is None and needs_token(args.host):
        raise ConfigError(f"--host {args.host} is reachable from other machines: set a token with --token-env NAME")
    env_kwargs: dict[str, Any] = {"simulator": args.simulator, "leak_policy": args.leak_policy}
    if args.tasks:
        env_kwargs["tasks"] = args.tasks
    if args.max_turns is not None:
        env_kwargs["max_turns"] = args.max_turns
    if args.env_options:
        try:
            extra = json.loads(args.env_options)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--env-options: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(extra, dict):
            raise ConfigError(f"--env-options must be a JSON object, got {args.env_options!r}")
        env_kwargs.update(extra)
    options = _endpoint_options(args, "simulator")
    if options:
        env_kwargs["simulator_options"] = options
    app = make_app(
        args.env,
        env_kwargs,
        token=token,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout or None,
        max_body_bytes=args.max_body_bytes,
        expose_hidden=args.expose_hidden,
    )
    import uvicorn

    print(f"colbench serve: {args.env} at http://{args.host}:{args.port} (OpenEnv protocol, /ws)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, ws_max_size=args.max_body_bytes, log_level="warning")
    return 0


def cmd_sandbox_build(args: argparse.Namespace) -> int:
    from colbench.sandbox.image import build_image

    print(build_image(args.method, image=args.image, force=args.force))
    return 0


def cmd_sandbox_doctor(args: argparse.Namespace) -> int:
    from colbench.sandbox.image import doctor

    failed = False
    for check in doctor(args.image):
        status = "OK" if check.ok else ("FAIL" if check.required else "WARN")
        print(f"{status:<4} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"     fix: {check.fix}")
        failed = failed or (check.required and not check.ok)
    return 1 if failed else 0


# -- parser -----------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="colbench", description="ColBench: collaborative agent benchmark")
    parser.add_argument("--version", action="version", version=f"colbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    tasks = sub.add_parser("tasks", help="list and check tasks").add_subparsers(dest="action", required=True)
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
    build_frontend = tasks.add_parser(
        "build-frontend", help="build a frontend split from WebSight v0.2 into a ColBench JSONL task file"
    )
    build_frontend.add_argument("--split", default="frontend-test", help="frontend-test | frontend-test-full | ...")
    build_frontend.add_argument("--out", required=True, metavar="FILE.jsonl")
    build_frontend.add_argument("--revision", help="a WebSight commit, branch or tag instead of the pinned commit")
    build_frontend.set_defaults(func=cmd_tasks_build_frontend)

    ev = sub.add_parser("eval", help="run an agent with a simulated human on tasks; results go to a run directory")
    ev.add_argument("--env", required=True, metavar="ENV_ID", help="ColBench-Backend-v1 | ColBench-Frontend-v0 | ...")
    ev.add_argument(
        "--agent",
        required=True,
        metavar="SPEC",
        help="openai:MODEL | llamacpp[:PATH.gguf] | module.path:Attr | scripted:reference|ask|empty|copycat",
    )
    ev.add_argument(
        "--simulator",
        required=True,
        metavar="SPEC",
        help="openai:MODEL | llamacpp[:PATH.gguf] | scripted | scripted:leaky (always pastes the hidden answer)",
    )
    ev.add_argument("--leak-policy", default="flag", metavar="POLICY", help=POLICY_HELP)
    ev.add_argument(
        "--tasks", metavar="FILE_OR_SPLIT", help="a task JSONL file or split (default: the env's test split)"
    )
    ev.add_argument("--limit", type=int, metavar="N", help="only the first N tasks, in file order")
    ev.add_argument("--trials", type=int, default=1, metavar="K", help="episodes per task (default 1)")
    ev.add_argument("--concurrency", type=int, default=8, metavar="C", help="episodes at once (default 8)")
    ev.add_argument("--out", metavar="DIR", help="the run directory (docs/run-format.md); required unless --dry-run")
    ev.add_argument("--resume", action="store_true", help="continue the run in DIR (same configuration)")
    ev.add_argument("--max-turns", type=int, metavar="N", help="agent turns per episode (default 10)")
    ev.add_argument("--sandbox", default="auto", help=f"backend: {SANDBOX_HELP}")
    ev.add_argument("--embedder", default="clip", help="frontend: clip | clip-center-crop | clip:PATH | test")
    ev.add_argument(
        "--max-consecutive-errors",
        type=int,
        metavar="N",
        help="stop scheduling after N infrastructure errors in a row (default max(20, 2C); 0: never)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    for role in ("agent", "simulator"):
        _add_endpoint_arguments(ev, role)
    ev.add_argument(
        "--simulator-image-mode", choices=("image", "html"), help="frontend: show the pages as images or HTML"
    )
    _add_view_arguments(ev)
    _add_ray_arguments(ev, "episodes")
    ev.add_argument(
        "--dry-run", action="store_true", help="forecast tokens, cost and wall time without calling any model"
    )
    ev.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table instead of the built-in list prices (the --dry-run forecast, the progress line's cost)",
    )
    ev.add_argument(
        "--forecast-turns", type=float, metavar="T", help="--dry-run: agent turns per episode (default half the cap)"
    )
    ev.set_defaults(func=cmd_eval)

    score = sub.add_parser("score", help="score answers offline").add_subparsers(dest="domain", required=True)
    for domain in all_domains():
        scoring = score.add_parser(domain.name, help=domain.score_help)
        scoring.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
        scoring.add_argument("--answers", required=True, help='JSONL of {"task_id", "answer"}')
        scoring.add_argument("--out", required=True, help="JSONL results, one per answer, in answer order")
        domain.add_score_arguments(scoring)
        _add_ray_arguments(scoring, "scoring jobs")
        scoring.set_defaults(func=cmd_score)

    leaks = sub.add_parser("leaks", help="leak scores of simulated-human replies (docs/leaks.md)")
    leaks_sub = leaks.add_subparsers(dest="action", required=True)
    leaks_score = leaks_sub.add_parser("score", help="score replies for leaks of their task's hidden information")
    leaks_score.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT", help="the tasks (their domains)")
    leaks_score.add_argument("--replies", required=True, metavar="FILE", help='JSONL of {"task_id", "reply"}')
    leaks_score.add_argument(
        "--out", required=True, metavar="FILE", help='JSONL of {"task_id", "leak_score", "leak"}, in reply order'
    )
    leaks_score.set_defaults(func=cmd_leaks_score)
    labelled = leaks_sub.add_parser("labelled", help="write the labelled replies the detectors are measured on")
    labelled.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
    labelled.add_argument("--out", required=True, metavar="FILE", help='JSONL of {"task_id", "reply", "leak", "kind"}')
    labelled.add_argument("--seed", type=int, default=0)
    labelled.set_defaults(func=cmd_leaks_labelled)

    probe = sub.add_parser("probe", help="probe a simulated human with adversarial agent turns (docs/leaks.md)")
    probe_sub = probe.add_subparsers(dest="target", required=True)
    psim = probe_sub.add_parser("simulator", help="leak, refusal and off-topic rates of a simulated human")
    psim.add_argument("--simulator", required=True, metavar="SPEC", help="openai:MODEL | llamacpp[:PATH.gguf]")
    psim.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT", help="the tasks (one domain)")
    psim.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    psim.add_argument("--out", required=True, metavar="DIR", help="probe.json, replies.jsonl, summary.json")
    psim.add_argument("--resume", action="store_true", help="continue the probe in DIR (same configuration)")
    psim.add_argument(
        "--views", default="hidden,spec", help="hidden (sees the reference), spec (sees a spec of it), or both"
    )
    psim.add_argument("--suite", metavar="FILE", help="a probe suite (default: envs/<domain>/probes/suite.toml)")
    psim.add_argument("--concurrency", type=int, default=4, metavar="C", help="probes at once (default 4)")
    psim.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    psim.add_argument("--simulator-image-mode", choices=("image", "html"), help="frontend: pages as images or HTML")
    psim.add_argument("--simulator-specs", metavar="FILE", help="spec view: pinned specs (colbench specs export)")
    psim.add_argument("--simulator-spec-model", metavar="SPEC", help="spec view: who writes the specs")
    _add_endpoint_arguments(psim, "simulator")
    psim.set_defaults(func=cmd_probe_simulator)

    specs = sub.add_parser("specs", help="the specs the spec human answers from (docs/leaks.md)")
    specs_sub = specs.add_subparsers(dest="action", required=True)
    export = specs_sub.add_parser("export", help="write every task's spec to a file a leaderboard can pin")
    export.add_argument("--tasks", required=True, metavar="FILE_OR_SPLIT")
    export.add_argument("--model", required=True, metavar="SPEC", help="who writes them: openai:MODEL | llamacpp")
    export.add_argument("--out", required=True, metavar="FILE", help="JSONL, one spec per task")
    export.add_argument("--concurrency", type=int, default=4, metavar="C")
    _add_endpoint_arguments(export, "simulator")
    export.set_defaults(func=cmd_specs_export)

    report = sub.add_parser("report", help="leaderboard, token costs and HTML reports of eval run directories")
    report.add_argument("dirs", nargs="+", metavar="DIR", help="run directories written by colbench eval")
    report.add_argument("--markdown", metavar="FILE", help="also write the leaderboard and costs as Markdown")
    report.add_argument("--html", action="store_true", help="write DIR/report.html for every run")
    report.add_argument(
        "--reference-run",
        metavar="DIR",
        help="frontend: win rate against this run (the paper compares with GPT-4o); default none",
    )
    report.add_argument(
        "--prices",
        metavar="FILE",
        help="JSON/TOML: model -> {input, output} USD per 1M tokens (default: colbench's dated list prices)",
    )
    report.set_defaults(func=cmd_report)

    shw = sub.add_parser("show", help="print one episode of a run directory: the dialogue, the answer and its score")
    shw.add_argument("dir", metavar="DIR", help="a run directory written by colbench eval")
    shw.add_argument("--task", metavar="ID", help="the task id, or a unique prefix of it (default: the first episode)")
    shw.add_argument("--trial", type=int, metavar="K", help="the trial (default: the first)")
    shw.set_defaults(func=cmd_show)

    comp = sub.add_parser("compare", help="paired comparison of runs and simulator-swap robustness (docs/report.md)")
    comp.add_argument("dirs", nargs="+", metavar="DIR", help="run directories: the first against each other one")
    comp.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page")
    comp.set_defaults(func=cmd_compare)

    serve = sub.add_parser("serve", help="run an env as an OpenEnv environment server (docs/integrations.md)")
    serve.add_argument("--env", default="ColBench-Backend-v1", metavar="ID")
    serve.add_argument("--tasks", metavar="FILE_OR_SPLIT", help="default: the env's test split")
    serve.add_argument("--simulator", default="scripted", metavar="SPEC", help="openai:MODEL | llamacpp | scripted")
    serve.add_argument("--max-turns", type=int, metavar="N")
    serve.add_argument("--leak-policy", default="flag", metavar="POLICY", help=POLICY_HELP)
    serve.add_argument("--env-options", metavar="JSON", help='more env options, e.g. \'{"sandbox": "docker"}\'')
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1; any other address needs --token-env")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--token-env", metavar="NAME", help="the NAME of an environment variable holding the token")
    serve.add_argument("--max-sessions", type=int, default=64, metavar="N", help="sessions at once (default 64)")
    serve.add_argument(
        "--session-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="idle seconds before a session ends (0: never)",
    )
    serve.add_argument("--max-body-bytes", type=int, default=1 << 20, metavar="B", help="per request or message")
    serve.add_argument("--expose-hidden", action="store_true", help="send the hidden reference to clients (critics)")
    _add_endpoint_arguments(serve, "simulator")
    serve.set_defaults(func=cmd_serve)

    model = sub.add_parser("model", help="the embedded model outside llama.cpp")
    model_sub = model.add_subparsers(dest="action", required=True)
    export_hf = model_sub.add_parser(
        "export-hf", help="write the embedded GGUF model as a trainable transformers directory (prints its path)"
    )
    export_hf.add_argument("--gguf", metavar="FILE", help="a GGUF chat model (default: the embedded SmolLM2-135M)")
    export_hf.add_argument("--out", metavar="DIR", help="default: $COLBENCH_HOME/models/<file stem>")
    export_hf.add_argument("--force", action="store_true", help="convert again even if DIR holds a conversion")
    export_hf.set_defaults(func=cmd_model_export_hf)

    sandbox = sub.add_parser("sandbox", help="build and check the Docker sandbox image")
    sandbox_sub = sandbox.add_subparsers(dest="action", required=True)
    build = sandbox_sub.add_parser("build", help="build the sandbox image (prints its name)")
    build.add_argument(
        "--method",
        choices=("auto", "dockerfile", "offline"),
        default="auto",
        help="dockerfile: FROM python:3.11-slim (needs a registry); offline: debootstrap from the apt mirror; "
        "auto: $COLBENCH_SANDBOX_BUILD, else offline on Linux with apt, else dockerfile",
    )
    build.add_argument("--force", action="store_true", help="rebuild from scratch, ignoring caches")
    build.add_argument("--image", default="colbench-sandbox:1", help=argparse.SUPPRESS)
    build.set_defaults(func=cmd_sandbox_build)
    doc = sandbox_sub.add_parser("doctor", help="check Docker, the image and the bwrap runtime; exit 1 on a failure")
    doc.add_argument("--image", default="colbench-sandbox:1", help=argparse.SUPPRESS)
    doc.set_defaults(func=cmd_sandbox_doctor)
    return parser


def _add_endpoint_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    group = parser.add_argument_group(f"{role} endpoint (openai:/llamacpp specs)")
    group.add_argument(
        f"--{role}-base-url", metavar="URL", help=f"else $COLBENCH_{role.upper()}_BASE_URL, $OPENAI_BASE_URL"
    )
    group.add_argument(
        f"--{role}-api-key-env",
        metavar="NAME",
        help="the NAME of an environment variable holding the key (never the key itself)",
    )
    group.add_argument(f"--{role}-temperature", type=float, metavar="T", help="default 0")
    group.add_argument(f"--{role}-max-tokens", type=int, metavar="N")
    group.add_argument(f"--{role}-extra-body", metavar="JSON", help="extra fields of every request (a JSON object)")
    group.add_argument(f"--{role}-timeout", type=float, metavar="S", help="seconds per request")
    group.add_argument(f"--{role}-max-retries", type=int, metavar="N", help="retries on 429/5xx/timeouts (default 6)")
    group.add_argument(f"--{role}-rpm", type=float, metavar="R", help="requests per minute (token bucket)")
    group.add_argument(f"--{role}-max-concurrency", type=int, metavar="N", help="requests in flight at most")


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what the simulated human sees (docs/leaks.md)")
    group.add_argument(
        "--simulator-view",
        choices=("hidden", "spec"),
        help="hidden (default): the reference itself; spec: a plain-words specification of it, written once per task",
    )
    group.add_argument("--simulator-specs", metavar="FILE", help="spec view: pinned specs (colbench specs export)")
    group.add_argument(
        "--simulator-spec-model", metavar="SPEC", help="spec view: who writes the specs (default: the simulator)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        print("colbench: error: --jobs must be >= 1", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except InfraError as exc:
        print(f"colbench: infrastructure error: {exc}", file=sys.stderr)
        return 3
    except ColbenchError as exc:
        print(f"colbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("colbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``colbench tasks ls ... | head``): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
