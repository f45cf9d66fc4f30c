"""``colbench eval --dry-run``: tokens, cost and wall time of a run, forecast before any model is called.

The forecast is arithmetic on what is known before the run (every episode's first prompt, the human's instructions
and hidden information, the turn cap, trials, concurrency and request limits, the roles' token caps) and on stated
assumptions for what is not (how many turns an agent takes, how long replies are, how long a call takes). Tokens
are counted as characters / 4 (English text and code with a BPE tokenizer; no tokenizer is downloaded). Two
scenarios: ``typical`` (an agent that answers after about half the turn cap, the paper's agents' habit) and
``cap`` (every episode to the turn cap: the most a run can cost). A real run records the typical forecast in
run.json (``forecast``, not compared on resume) and ``colbench report`` shows it beside what the run spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from colbench.env.domain import Domain
from colbench.eval.plan import RunPlan
from colbench.llm.specs import ModelSpec
from colbench.report.costs import LIST_PRICES, Prices
from colbench.types.task import Task

CHARS_PER_TOKEN = 4
AGENT_TOKENS = 150  # a question is shorter, a final answer longer: the mean over an episode's turns
HUMAN_TOKENS = {"backend": 120, "frontend": 250}  # generated; the env keeps the first max_reply_chars
SCREENSHOT_TOKENS = 1_105  # one 1280x720 image at high detail (85 + 6 tiles x 170), two per frontend reply
CALL_BASE_S = 0.6  # a hosted endpoint's time to first token
TOKENS_PER_S = 60.0  # and its generation speed per request


@dataclass(frozen=True)
class RoleForecast:
    role: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: no price for the model


@dataclass(frozen=True)
class Forecast:
    scenario: str
    episodes: int
    turns: float  # agent turns per episode
    roles: tuple[RoleForecast, ...]
    wall_s: float
    bound: str  # what sets the pace: latency at this concurrency, or a request limit

    @property
    def cost_usd(self) -> float | None:
        costs = [r.cost_usd for r in self.roles if r.calls]
        return None if any(c is None for c in costs) else math.fsum(c for c in costs if c is not None)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "cost_usd": self.cost_usd}


def tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def forecast(
    config: RunPlan,
    domain: Domain,
    first_prompts: Mapping[str, str],
    episodes: Sequence[Task],
    *,
    prices: Prices | None = None,
    turns: float | None = None,
) -> list[Forecast]:
    """The typical and the turn-cap scenario for ``episodes`` (one task per episode still to run)."""
    cap = config.max_turns
    typical = min(float(cap), turns if turns is not None else max(1.0, math.ceil(cap / 2)))
    return [
        _scenario("typical", typical, config, domain, first_prompts, episodes, prices or LIST_PRICES),
        _scenario("cap", float(cap), config, domain, first_prompts, episodes, prices or LIST_PRICES),
    ]


def _out_tokens(config: RunPlan, role: str, default: int) -> int:
    options = config.agent_options if role == "agent" else config.simulator_options
    cap = options.get("max_tokens")
    return min(default, int(cap)) if isinstance(cap, int) and cap > 0 else default


def _model(spec: ModelSpec) -> tuple[str, bool]:
    """The model name a price is looked up by, and whether the role calls a model at all (an agent object given
    with a name of its own: what it calls is its business)."""
    return (spec.value or spec.text), spec.is_model


def _scenario(
    name: str,
    turns: float,
    config: RunPlan,
    domain: Domain,
    first_prompts: Mapping[str, str],
    episodes: Sequence[Task],
    prices: Prices,
) -> Forecast:
    agent_out = _out_tokens(config, "agent", AGENT_TOKENS)
    human_out = _out_tokens(config, "simulator", HUMAN_TOKENS.get(domain.name, 150))
    kept = min(human_out, domain.max_reply_chars // CHARS_PER_TOKEN)  # what the dialogue carries forward
    per_turn = agent_out + kept
    replies = max(0.0, turns - 1)
    instructions = tokens(domain.prompt_template("simulator"))
    agent_in = human_in = 0.0
    for task in episodes:
        first = tokens(first_prompts[task.task_id])
        # agent turn k sees the prompt and k-1 exchanges; human reply k sees its instructions and k agent turns
        agent_in += turns * first + per_turn * turns * (turns - 1) / 2
        hidden = instructions + tokens(task.hidden_information)
        if domain.renders_pages:
            hidden += 2 * SCREENSHOT_TOKENS
        human_in += replies * hidden + per_turn * replies * (replies + 1) / 2
    n = len(episodes)
    agent_model, agent_calls_model = _model(config.agent)
    human_model, human_calls_model = _model(config.simulator)
    roles = (
        _role("agent", agent_model, agent_calls_model, n * turns, agent_in, n * turns * agent_out, prices),
        _role("simulator", human_model, human_calls_model, n * replies, human_in, n * replies * human_out, prices),
    )
    agent_s = CALL_BASE_S + agent_out / TOKENS_PER_S if agent_calls_model else 0.0
    human_s = CALL_BASE_S + human_out / TOKENS_PER_S if human_calls_model else 0.0
    episode_s = turns * agent_s + replies * human_s
    if not episode_s:
        return Forecast(name, n, turns, roles, 0.0, "no model calls")
    rates = {f"latency at concurrency {config.concurrency}": config.concurrency / episode_s}
    for role, calls, limits, seconds in (
        ("agent", turns, config.agent_limits, agent_s),
        ("simulator", replies, config.simulator_limits, human_s),
    ):
        if not seconds:
            continue
        if calls and limits.rpm:
            rates[f"{role} rpm {limits.rpm:g}"] = limits.rpm / 60 / calls
        if calls and limits.max_concurrency:
            rates[f"{role} max concurrency {limits.max_concurrency}"] = limits.max_concurrency / (calls * seconds)
    bound = min(rates, key=rates.__getitem__)
    return Forecast(name, n, turns, roles, n / rates[bound] if n else 0.0, bound)


def _role(
    role: str, model: str, calls_model: bool, calls: float, prompt: float, completion: float, prices: Prices
) -> RoleForecast:
    if not calls_model:
        return RoleForecast(role, model, 0, 0, 0, 0.0)
    found = prices.find([model])
    in_tokens, out_tokens = round(prompt), round(completion)
    cost = None if found is None else (in_tokens * found[1].input + out_tokens * found[1].output) / 1e6
    return RoleForecast(role, model, round(calls), in_tokens, out_tokens, cost)


def forecast_text(forecasts: Sequence[Forecast], prices: Prices) -> str:
    lines = [
        f"forecast for {forecasts[0].episodes} episodes (no model called; tokens = characters / {CHARS_PER_TOKEN}; "
        f"calls {CALL_BASE_S}s + {TOKENS_PER_S:g} tokens/s; prices: {prices.label})"
    ]
    for f in forecasts:
        lines.append(f"  {f.scenario}: {f.turns:g} agent turns per episode")
        for r in f.roles:
            if not r.calls:
                lines.append(f"    {r.role:<9} {r.model}: no model calls")
                continue
            cost = "no price for this model (--prices FILE)" if r.cost_usd is None else f"${r.cost_usd:,.2f}"
            lines.append(
                f"    {r.role:<9} {r.model}: {r.calls:,} calls, {r.prompt_tokens:,} tokens in, "
                f"{r.completion_tokens:,} out, {cost}"
            )
        total = "unknown" if f.cost_usd is None else f"${f.cost_usd:,.2f}"
        lines.append(f"    total {total}; wall time ~{_duration(f.wall_s)} (bound by {f.bound})")
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s"
