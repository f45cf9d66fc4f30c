"""What the leaderboard's tables and notes say, whatever the output (text, Markdown, the HTML report): each
table's header and cells as strings, the legend's lines and the titles."""

from __future__ import annotations

from colbench.env.domain import get_domain
from colbench.report import stats
from colbench.report.leaderboard import Report, Table, simulator_name
from colbench.report.truth import simulator_label, truth_config
from colbench.runs import Run

NA = "-"

Columns = tuple[list[str], list[list[str]]]
"""A table's header and its rows of cells."""


def pct(value: float | None) -> str:
    return NA if value is None else f"{100 * value:.1f}"


def estimate_cell(est: stats.Estimate | None) -> str:
    if est is None or est.value is None:
        return NA
    if not est.has_ci:
        return pct(est.value)
    return f"{pct(est.value)} [{pct(est.low)}, {pct(est.high)}]"


def _tokens(value: float | None) -> str:
    return NA if value is None else f"{round(value):,}"


def _usd(value: float | None, digits: int) -> str:
    return "unknown" if value is None else f"${value:,.{digits}f}"


def leaderboard_columns(table: Table) -> Columns:
    """Header and cells of one table (the terminal, Markdown and HTML outputs share them)."""
    spec = get_domain(table.domain).metrics_for(table.env_id)
    metrics = [spec.reward_label, "success %"] if spec.has_success else [spec.reward_label]
    if table.reference_label is not None and not spec.has_success:  # with successes: among the reward's parts
        metrics.append(f"win % vs {table.reference_label}")
    header = ["#", "run", "agent", *metrics, "leak %", "untrue %", "failed untrue", "tasks", "trials", "infra"]
    header += ["flip %", "note"]
    body = []
    for row in table.rows:
        if spec.has_success:
            cells = [estimate_cell(row.secondary), estimate_cell(row.primary)]
        else:
            cells = [estimate_cell(row.primary)]
            if table.reference_label is not None:
                cells.append(estimate_cell(row.secondary))
        flip = NA if row.flip is None else f"{pct(row.flip)} ({row.flip_n})"
        body.append(
            [
                str(row.rank),
                row.label,
                row.run.role_model("agent") or NA,
                *cells,
                estimate_cell(row.leak),
                estimate_cell(row.untrue),
                failed_untrue_cell(row.failed_untrue),
                str(row.n_tasks),
                str(row.run.trials),
                str(row.infra),
                flip,
                "; ".join(row.notes),
            ]
        )
    return header, body


def failed_untrue_cell(value: tuple[int, int] | None) -> str:
    """``k/n (share %)``: k of the n failed episodes with a checked reply had an untrue one; ``-``: not checked."""
    if value is None:
        return NA
    hits, failed = value
    return f"{hits}/{failed}" + (f" ({pct(hits / failed)})" if failed else "")


def parts_columns(table: Table) -> Columns | None:
    """Each run's reward parts (ColBench-Frontend-v1: block-match, text, position, colour, CLIP), HAL's CLIP >= 0.8
    rate and the win rate where they apply; ``None`` when no run of the table has any."""
    rows = [row for row in table.rows if row.parts]
    if not rows:
        return None
    names = list(dict.fromkeys(name for row in rows for name in row.parts))
    body = [
        [
            str(row.rank),
            row.label,
            *(_cell(row.parts.get(name), percent=name not in row.run.metrics.subscores) for name in names),
        ]
        for row in rows
    ]
    return ["#", "run", *(f"{name} %" if name not in rows[0].run.metrics.subscores else name for name in names)], body


def _cell(estimate: stats.Estimate | None, *, percent: bool) -> str:
    """A rate as a percentage (``estimate_cell``); a part of the reward on its own [0, 1] scale, like the reward."""
    if percent or estimate is None or estimate.value is None:
        return estimate_cell(estimate)
    if not estimate.has_ci:
        return f"{estimate.value:.3f}"
    return f"{estimate.value:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]"


def pass_k_columns(table: Table) -> Columns | None:
    """pass^1..pass^T per run with T >= 2 trials (``None`` when no run of the table has repeated trials); a cell
    names how many tasks it averages and how many were excluded for having fewer than k scored trials."""
    rows = [row for row in table.rows if row.pass_k]
    if not rows:
        return None
    ks = max(len(row.pass_k) for row in rows)
    body = []
    for row in rows:
        cells = [
            NA if p.value is None else f"{pct(p.value)} ({p.n}{f', -{p.excluded}' if p.excluded else ''})"
            for p in row.pass_k
        ]
        body.append([str(row.rank), row.label, *cells, *[NA] * (ks - len(cells))])
    return ["#", "run", *[f"pass^{k} %" for k in range(1, ks + 1)]], body


def cost_columns(report: Report) -> Columns:
    """One line per run and role; the simulator's model with its grounding where it had one."""
    header = ["run", "role", "model", "calls", "input tok", "output tok", "input/ep", "output/ep", "cost", "cost/ep"]
    body = []
    for label, costs in report.costs:
        run = report.runs.get(label)
        for c in costs:
            model = c.model or NA
            if c.role == "simulator" and run is not None:
                model = simulator_label(model, run.config)
            body.append(
                [
                    label,
                    c.role,
                    model,
                    f"{c.usage.calls:,}",
                    _tokens(c.usage.prompt_tokens),
                    _tokens(c.usage.completion_tokens),
                    _tokens(c.per_episode(c.usage.prompt_tokens)),
                    _tokens(c.per_episode(c.usage.completion_tokens)),
                    _usd(c.cost, 2),
                    _usd(c.per_episode(c.cost), 4),
                ]
            )
    return header, body


def legend(report: Report) -> list[str]:
    lines = [
        f"95% CI in brackets: percentile bootstrap over tasks ({stats.BOOTSTRAP_RESAMPLES} resamples, seed "
        f"{stats.BOOTSTRAP_SEED}; trials averaged within each task); success with one trial per task: Wilson.",
        "infra = episodes with no scored record (only infrastructure errors): excluded from every score, not zeros; "
        "tasks = tasks with at least one scored episode.",
        "flip % (tasks) = share of tasks with >= 2 scored trials whose success differs across trials"
        + "".join(
            dict.fromkeys(
                f" ({t.domain} success: {m.reward_name} >= {m.success_threshold:.2f})"
                for t, m in ((t, get_domain(t.domain).metrics_for(t.env_id)) for t in report.tables)
                if not m.has_success and m.success_threshold is not None
            )
        )
        + ".",
        "pass^k % (tasks, -excluded) = mean over tasks with >= k scored trials of C(c, k) / C(n, k), c successes of "
        "n trials (tau2-bench's unbiased estimate that k fresh trials all succeed); tasks with fewer trials excluded.",
        "leak % = share of scored episodes where the simulated human gave the hidden answer away at least once "
        "(flagged by the domain's leak detector, docs/leaks.md; under --leak-policy redact the agent did not see "
        "it); - = not measured.",
        "untrue % = share of the simulated human's checked replies whose first draw said something false about the "
        "task (a claim the reference contradicts when run, colbench claims check; whatever the truth policy then did), "
        "pooled over replies, 95% CI by the same bootstrap over tasks; failed untrue = failed episodes (the env id's "
        "success rule) with such a reply / failed episodes with a checked reply; - = not checked (--truth-policy off "
        "or a run made before claims were checked).",
    ]
    grounded = sorted({str(simulator_name(row.run)) for t in report.tables for row in t.rows if _grounded(row.run)})
    if grounded:
        lines.append(
            "(grounding exec) = the simulated human was privately told the reference's results for a few calls of the "
            f"agent's turn ({', '.join(grounded)}): another human than the same model without it, never ranked as one."
        )
    by_domain: dict[str, list[Table]] = {}
    for table in report.tables:
        by_domain.setdefault(table.domain, []).append(table)
    for domain, tables in by_domain.items():
        if len(tables) > 1:
            lines.append(
                f"{domain} runs of {' and '.join(t.judged_by or t.env_id for t in tables)} are in separate tables: "
                "scores of different env ids are not comparable across versions (each version judges answers by its "
                "own rules), nor are scores under other plus tests or in another task environment, where answers "
                "ran with other libraries (colbench rescore brings a run over)."
            )
        spec = get_domain(domain).metrics_for(tables[0].env_id)
        if spec.has_success:
            lines.append(f"{domain} rows sorted by success %, then {spec.reward_label}.")
        elif tables[0].reference_label is not None:
            lines.append(
                f"{domain} rows sorted by {spec.reward_name}; win % = share of common tasks where the run's "
                f"{spec.reward_name} beats the reference run's (ties count half)."
            )
        else:
            no_win = "; no --reference-run, so no win rate (the paper's is vs GPT-4o)" if spec.win_rate else ""
            lines.append(f"{domain} rows sorted by {spec.reward_name}{no_win}.")
    return lines


def _grounded(run: Run) -> bool:
    return truth_config(run.config).grounded


def title(table: Table) -> str:
    runs = f"{len(table.rows)} run{'s' if len(table.rows) != 1 else ''}"
    return f"{table.domain.capitalize()} leaderboard: {table.judged_by or table.env_id} ({runs})"


def cost_title(report: Report) -> str:
    return f"Tokens and cost (prices: {report.prices.label}; USD)"
