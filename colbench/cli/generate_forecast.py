"""``colbench tasks generate --dry-run``: the tokens, cost and (embedded model) time of a generation run, forecast
without calling a model, by the conventions of ``colbench eval --dry-run`` (characters / 4 per token, the list
prices of ``colbench.report.costs``, the embedded model's cached measured speed)."""

from __future__ import annotations

from colbench.domains.backend.generate.candidates import prompt_for, read_seeds
from colbench.eval.forecast import tokens
from colbench.llm.specs import parse_spec
from colbench.report.costs import LIST_PRICES
from colbench.types.chat import Usage

REPLY_TOKENS = 500
"""An assumed reply: a task's request, hidden information, a reference of ~20 lines and 8 tests (the embedded run
measured 468 per candidate, docs/generate.md)."""


def forecast_lines(generator: str, seeds_path: str, count: int) -> list[str]:
    """What the run would spend: tokens, then a cost where the model has a list price, and the embedded model's
    time where its speed was measured on this machine."""
    spec = parse_spec(generator, "generator", models_only=True)
    seeds = read_seeds(seeds_path)
    prompt = sum(tokens(prompt_for(seeds[i % len(seeds)], i)) for i in range(count))
    usage = Usage(prompt_tokens=prompt, completion_tokens=REPLY_TOKENS * count)
    lines = [
        f"forecast for {count} candidates with {spec.text}: {usage.prompt_tokens:,} prompt + "
        f"{usage.completion_tokens:,} completion tokens (replies assumed {REPLY_TOKENS} tokens)"
    ]
    if spec.is_embedded:
        # on first use: the embedded model's package is an optional extra
        from colbench.llm.llamacpp.speed import cached_speed

        speed = cached_speed(spec.value or None)
        if speed is None:
            lines.append("time: the embedded model's speed is not measured on this machine (`colbench model speed`)")
        else:
            seconds = usage.prompt_tokens / speed.prompt_tps + usage.completion_tokens / speed.gen_tps
            lines.append(f"time: about {seconds / 60:.1f} min of generation (measured speed, {speed.measured_at})")
        return lines
    found = LIST_PRICES.find([spec.value, spec.text])
    if found is None:
        lines.append(f"cost: no list price for {spec.value!r} ({LIST_PRICES.label})")
    else:
        name, price = found
        lines.append(f"cost: about ${price.cost(usage):.2f} at {name}'s list price ({LIST_PRICES.label})")
    lines.append("the sandbox gates' time is not forecast; each kept task costs candidates / kept of these")
    return lines
