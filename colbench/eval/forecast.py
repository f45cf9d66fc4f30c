"""``colbench eval --dry-run``: tokens, cost and wall time of a run, forecast before any episode is played.

The forecast is arithmetic on what is known before the run (every episode's first prompt, the human's instructions
and hidden information, the turn cap, trials, concurrency and request limits, the roles' token caps) and on stated
assumptions for what is not (how many turns an agent takes, how long replies are, how long a call takes). Tokens
are counted as characters / 4 (English text and code with a BPE tokenizer; no tokenizer is downloaded). Two
scenarios: ``typical`` (an agent that answers after about half the turn cap, the paper's agents' habit; the
embedded agent's habit is the cap) and ``cap`` (every episode to the turn cap: the most a run can cost). A real
run records the typical forecast in run.json (``forecast``, not compared on resume) and ``colbench report`` shows
it beside what the run spent.

The embedded model (``llamacpp``) is timed by its **measured** speed on this machine
(:func:`colbench.llm.llamacpp.speed.measured_speed`: prompt processing and generation tokens per second), not by a
hosted endpoint's latency: it is one CPU-bound server that every embedded role and every episode share, so its
time is the sum of its calls' times (prompt tokens / prompt speed + generated tokens / generation speed), however
many episodes run at once. llama.cpp keeps each slot's last prompt, so while every episode's embedded roles fit in
the server's slots, a call processes only what is new since that role's previous call; beyond that, every call
processes its whole prompt. Its replies are sized by its per-role caps (``ROLE_DEFAULTS``; the answer turn's
``AGENT_ANSWER_MAX_TOKENS``), which a small model mostly fills. Without a measurement (a run's start never
measures; it uses a cached one when there is one) the hosted-endpoint assumptions apply, and the text says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from colbench.env.domain import Domain
from colbench.eval.plan import RunPlan
from colbench.llm.llamacpp.defaults import AGENT_ANSWER_MAX_TOKENS, ROLE_DEFAULTS
from colbench.llm.llamacpp.speed import Speed
from colbench.llm.specs import ModelSpec
from colbench.report.costs import LIST_PRICES, Prices
from colbench.types.chat import Usage
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
    bound: str  # what sets the pace: latency at this concurrency, a request limit, or the embedded model's speed
    speeds: tuple[str, ...] = ()  # the embedded model's measured speeds this forecast used, described

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
    speeds: Mapping[str, Speed] | None = None,
) -> list[Forecast]:
    """The typical and the turn-cap scenario for ``episodes`` (one task per episode still to run). ``speeds``: the
    measured speed of each embedded role (``agent``, ``simulator``) that has one."""
    cap = config.max_turns
    # the embedded agent (SmolLM2) never writes the answer marker: its episodes run to the cap (embedded-model.md)
    habit = float(cap) if config.agent.is_embedded else max(1.0, math.ceil(cap / 2))
    typical = min(float(cap), turns if turns is not None else habit)
    known = dict(speeds or {})
    return [
        _scenario("typical", typical, config, domain, first_prompts, episodes, prices or LIST_PRICES, known),
        _scenario("cap", float(cap), config, domain, first_prompts, episodes, prices or LIST_PRICES, known),
    ]


def _out_tokens(config: RunPlan, role: str, default: int) -> int:
    options = config.agent_options if role == "agent" else config.simulator_options
    cap = options.get("max_tokens")
    return min(default, int(cap)) if isinstance(cap, int) and cap > 0 else default


def _reply_tokens(config: RunPlan, role: str, turns: float, default: int) -> int:
    """Generated tokens per call of a role; an embedded one's are its caps (questions, then the agent's answer)."""
    if not (config.agent if role == "agent" else config.simulator).is_embedded:
        return _out_tokens(config, role, default)
    if role == "agent":
        question = int(ROLE_DEFAULTS["agent"]["max_tokens"])
        mean = (max(0.0, turns - 1) * question + AGENT_ANSWER_MAX_TOKENS) / turns
        return _out_tokens(config, role, round(mean))
    return _out_tokens(config, role, min(default, int(ROLE_DEFAULTS["simulator"]["max_tokens"])))


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
    speeds: dict[str, Speed],
) -> Forecast:
    agent_out = _reply_tokens(config, "agent", turns, AGENT_TOKENS)
    human_out = _reply_tokens(config, "simulator", turns, HUMAN_TOKENS.get(domain.name, 150))
    kept = min(human_out, domain.max_reply_chars // CHARS_PER_TOKEN)  # what the dialogue carries forward
    per_turn = agent_out + kept
    replies = max(0.0, turns - 1)
    instructions = tokens(domain.prompt_template("simulator"))
    agent_in = human_in = agent_new = human_new = 0.0
    for task in episodes:
        first = tokens(first_prompts[task.task_id])
        # agent turn k sees the prompt and k-1 exchanges; human reply k sees its instructions and k agent turns
        agent_in += turns * first + per_turn * turns * (turns - 1) / 2
        hidden = instructions + tokens(task.hidden_information)
        if domain.renders_pages:
            hidden += 2 * SCREENSHOT_TOKENS
        human_in += replies * hidden + per_turn * replies * (replies + 1) / 2
        # with the previous prompt still in the server's slot, a call processes only what came since
        agent_new += first + per_turn * max(0.0, turns - 1)
        human_new += (hidden + per_turn * replies) if replies else 0.0
    n = len(episodes)
    agent_model, agent_calls_model = _model(config.agent)
    human_model, human_calls_model = _model(config.simulator)
    roles = (
        _role("agent", agent_model, agent_calls_model, n * turns, agent_in, n * turns * agent_out, prices),
        _role("simulator", human_model, human_calls_model, n * replies, human_in, n * replies * human_out, prices),
    )
    embedded = [role for role, spec in (("agent", config.agent), ("simulator", config.simulator)) if spec.is_embedded]
    measured = {role: speeds[role] for role in embedded if role in speeds}
    embedded_s = _embedded_seconds(
        config, measured, n, {"agent": (agent_in, agent_new), "simulator": (human_in, human_new)}, roles
    )
    notes = tuple(dict.fromkeys(speed.describe() for speed in measured.values()))
    if any(role not in measured for role in embedded):
        notes += (f"not measured on this machine yet (a --dry-run measures it): {TOKENS_PER_S:g} tokens/s assumed",)
    agent_s = CALL_BASE_S + agent_out / TOKENS_PER_S if agent_calls_model and "agent" not in measured else 0.0
    human_s = CALL_BASE_S + human_out / TOKENS_PER_S if human_calls_model and "simulator" not in measured else 0.0
    episode_s = turns * agent_s + replies * human_s
    if not episode_s:
        if embedded_s:
            return Forecast(name, n, turns, roles, embedded_s, "the embedded model's measured speed", notes)
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
    wall = n / rates[bound] if n else 0.0
    if embedded_s > wall:
        return Forecast(name, n, turns, roles, embedded_s, "the embedded model's measured speed", notes)
    return Forecast(name, n, turns, roles, wall, bound, notes)


def _embedded_seconds(
    config: RunPlan,
    measured: Mapping[str, Speed],
    episodes: int,
    prompts: Mapping[str, tuple[float, float]],
    roles: Sequence[RoleForecast],
) -> float:
    """The embedded model's busy time: every call of every measured role, one after another (one CPU-bound
    server). ``prompts``: per role, all its prompts' tokens and the part new since its previous call."""
    if not measured:
        return 0.0
    slots = min(speed.slots for speed in measured.values())
    streams = min(config.concurrency, episodes) * len(measured)  # prompts the server must keep apart
    total = 0.0
    for role in roles:
        speed = measured.get(role.role)
        if speed is None:
            continue
        whole, new = prompts[role.role]
        total += speed.seconds(new if streams <= slots else whole, role.completion_tokens)
    return total


def _role(
    role: str, model: str, calls_model: bool, calls: float, prompt: float, completion: float, prices: Prices
) -> RoleForecast:
    if not calls_model:
        return RoleForecast(role, model, 0, 0, 0, 0.0)
    found = prices.find([model])
    in_tokens, out_tokens = round(prompt), round(completion)
    cost = None if found is None else found[1].cost(Usage(in_tokens, out_tokens))
    return RoleForecast(role, model, round(calls), in_tokens, out_tokens, cost)


def forecast_text(forecasts: Sequence[Forecast], prices: Prices) -> str:
    lines = [
        f"forecast for {forecasts[0].episodes} episodes (no episode played; tokens = characters / {CHARS_PER_TOKEN}; "
        f"hosted calls {CALL_BASE_S}s + {TOKENS_PER_S:g} tokens/s; prices: {prices.label})"
    ]
    lines += [f"  embedded model {note}" for note in forecasts[0].speeds]
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
