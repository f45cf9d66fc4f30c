"""The progress display of ``colbench eval`` (colbench.eval.progress): a line per tenth or per minute in a log, a
live bar with tokens, cost and ETA on a terminal, priced by role. No sleeping: the clock is a fake."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from colbench.env.domain import get_domain
from colbench.eval.progress import LINE_EVERY_S, Pricing, Progress, Tally
from colbench.report.costs import Price, Prices
from colbench.runs import EpisodeRecord, RoleSection

BACKEND = get_domain("backend")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ok(success: bool = True, agent: tuple[int, int] = (0, 0), simulator: tuple[int, int] = (0, 0)) -> EpisodeRecord:
    usage = {
        role: {"prompt_tokens": p, "completion_tokens": c}
        for role, (p, c) in (("agent", agent), ("simulator", simulator))
    }
    row = {"task_id": "t", "trial": 0, "status": "ok", "reward": float(success), "success": success, "usage": usage}
    return EpisodeRecord.model_validate(row)


def roles(sections: dict[str, dict[str, str]]) -> dict[str, RoleSection | None]:
    """run.json's role sections, as the writer and readers of run.json have them."""
    return {role: RoleSection.model_validate(section) for role, section in sections.items()}


def lines_of(stream: io.StringIO) -> list[str]:
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text  # a log: whole lines, nothing redrawn
    return text.splitlines()


@pytest.mark.parametrize(("total", "expected"), [(5, 5), (37, 10), (1000, 10), (1, 1)])
def test_a_fast_run_writes_a_line_per_tenth_and_a_last_one(total: int, expected: int) -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(total=total, kept=Tally(), domain=BACKEND, stream=stream, clock=clock)
    assert progress.mode == "lines"
    for i in range(total):  # eight at a time, as a run at concurrency 8 goes
        if i % 8 == 0:
            for _ in range(min(8, total - i)):
                progress.episode_started()
        clock.now += 0.05
        progress.episode_finished(ok(i % 2 == 0))
        progress.tick()
    progress.close()
    lines = lines_of(stream)
    assert len(lines) == expected <= 11, lines
    assert lines[-1].startswith(f"{total}/{total} done") and "ETA 0:00" in lines[-1]
    assert lines[0].startswith(f"{-(-total // 10)}/{total} done")  # the first tenth (rounded up)


def test_a_slow_run_writes_a_line_a_minute() -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(total=1000, kept=Tally(), domain=BACKEND, stream=stream, clock=clock)
    progress.tick()  # ticks come every second; nothing to say yet
    clock.now += LINE_EVERY_S - 1
    progress.tick()
    assert lines_of(stream) == []
    clock.now += 1  # a minute without a line, even with nothing finished: the log shows the run is alive
    progress.tick()
    assert lines_of(stream) == ["0/1000 done | no scored episodes | infra errors 0 | tokens 0 | cost $0.00 | ETA -:--"]
    progress.tick()
    assert len(lines_of(stream)) == 1
    for _ in range(99):
        progress.episode_started()
        progress.episode_finished(ok())
    clock.now += 30
    progress.episode_started()
    progress.episode_finished(ok())  # the 100th: a tenth, before the minute is up
    assert len(lines_of(stream)) == 2 and lines_of(stream)[-1].startswith("100/1000 done")
    clock.now += LINE_EVERY_S - 1  # the minute counts from the last line, whatever wrote it
    progress.tick()
    assert len(lines_of(stream)) == 2
    clock.now += 1
    progress.tick()
    assert len(lines_of(stream)) == 3 and lines_of(stream)[-1].startswith("100/1000 done")
    clock.now += 10 * LINE_EVERY_S  # ticks every second over 10 minutes: 10 lines, not 600
    for _ in range(int(10 * LINE_EVERY_S)):
        clock.now += 1
        progress.tick()
    assert len(lines_of(stream)) == 13
    progress.close()  # interrupted halfway: the last line says where it stopped
    assert len(lines_of(stream)) == 14 and "ETA" in lines_of(stream)[-1]


def test_a_resumed_run_counts_tenths_from_where_it_was() -> None:
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(total=100, kept=Tally(ok=55, success=50), domain=BACKEND, stream=stream, clock=clock)
    for _ in range(45):
        progress.episode_started()
        clock.now += 0.01
        progress.episode_finished(ok())
    progress.close()
    lines = lines_of(stream)
    assert [line.split()[0] for line in lines] == ["60/100", "70/100", "80/100", "90/100", "100/100"]
    assert "success 95/100 (95.0%)" in lines[-1]


def test_the_bar_on_a_terminal_shows_tokens_cost_and_eta() -> None:
    clock, file = FakeClock(), io.StringIO()
    console = Console(file=file, force_terminal=True, width=200, highlight=False)
    pricing = Pricing.for_run(
        roles({"agent": {"spec": "openai:gpt-4o-mini", "name": "openai:gpt-4o-mini"}, "simulator": {"model": "gpt-4o"}})
    )
    progress = Progress(
        total=10, kept=Tally(), domain=BACKEND, stream=None, console=console, pricing=pricing, clock=clock
    )
    for _ in range(3):
        progress.episode_started()
    clock.now += 10
    progress.episode_finished(ok(True, agent=(1_000_000, 0), simulator=(100_000, 10_000)))
    progress.episode_finished(ok(False, agent=(0, 500_000)))
    progress.draw()
    text = file.getvalue()
    assert "\x1b[" in text and "━" in text  # drawn by rich, in place
    # 2 finished in 10 s, 8 left: 40 s; gpt-4o-mini 0.15 + 0.30, gpt-4o 0.25 + 0.10 USD
    for shown in ("2/10", "1 running", "success 1/2 (50.0%)", "tokens 1.6M", "cost $0.80", "ETA 0:40"):
        assert shown in text, (shown, text)
    progress.close()
    assert progress.cost == pytest.approx(0.80) and progress.mode == "tty"


def test_cost_is_na_while_a_role_that_spent_tokens_has_no_price() -> None:
    run_json = {
        "agent": {"spec": "openai:my-finetune", "name": "openai:my-finetune"},
        "simulator": {"spec": "scripted"},
    }
    progress = Progress(
        total=3, kept=Tally(), domain=BACKEND, stream=io.StringIO(), pricing=Pricing.for_run(roles(run_json))
    )
    progress.episode_started()
    progress.episode_finished(ok())  # no tokens spent yet: nothing to price
    assert "cost $0.00" in progress.line()
    progress.episode_started()
    progress.episode_finished(ok(agent=(3000, 1000)))
    assert "cost n/a" in progress.line() and progress.cost is None
    # a --prices table names the model (as the spec's model): priced; the scripted human spent nothing
    priced = Pricing.for_run(roles(run_json), Prices({"my-finetune": Price(1.0, 2.0)}))
    assert priced.cost(progress.session) == pytest.approx(0.005)
    progress.pricing = priced
    assert "cost $0.0050" in progress.line()


@pytest.mark.parametrize("spec", ["llamacpp", "llamacpp:gemma3-270m", "llamacpp:/models/mine.gguf"])
def test_the_embedded_model_costs_nothing_but_an_unknown_server_stays_unknown(spec: str) -> None:
    tally = Tally()
    tally.add(ok(agent=(5000, 800), simulator=(4000, 300)))
    run_json = {"agent": {"spec": spec, "model": "SmolLM2"}, "simulator": {"spec": spec}}
    assert Pricing.for_run(roles(run_json)).cost(tally) == 0.0
    # the same model behind an OpenAI-compatible server of the user's: no price is guessed
    served = {"agent": {"spec": "openai:SmolLM2", "model": "SmolLM2"}, "simulator": {"spec": spec}}
    assert Pricing.for_run(roles(served)).cost(tally) is None


def test_off_and_quiet_write_nothing() -> None:
    for stream, mode in ((io.StringIO(), "off"), (None, "auto"), (None, "lines")):
        progress = Progress(total=3, kept=Tally(), domain=BACKEND, stream=stream, mode=mode)  # type: ignore[arg-type]
        assert progress.mode == "off"
        progress.episode_started()
        progress.episode_finished(ok())
        progress.tick()
        progress.close()
        assert stream is None or stream.getvalue() == ""
