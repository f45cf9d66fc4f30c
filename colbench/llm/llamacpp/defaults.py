"""What a request to the embedded model asks for when its caller says nothing: per-role sampling settings fitted to
a small CPU model, which left to itself writes until the server's cap, loops and parrots (docs/embedded-model.md
has the measurements behind each setting).

Only generic machinery lives here. What depends on the task, the start of the agent's answer (a code fence, a
page) and what the simulated human may not write (code, markup), is the domain's: its caller passes it in
(``prefill``, ``banned``, ``stop``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

AGENT_ANSWER_MAX_TOKENS = 384
"""The agent's cap for its final answer: its last turn, and an earlier turn cut after the answer marker, continued.
Above a question's cap (an answer is code or a page, a question a sentence), and sized to the reference answers."""

_REPEATS = {"repeat_penalty": 1.1, "repeat_last_n": 128}
_DRY = {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 3, "dry_penalty_last_n": 8192}
ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    "agent": {
        "max_tokens": 128,
        "extra_body": {**_REPEATS, **_DRY},
    },
    "simulator": {
        "max_tokens": 64,
        "accept_empty": True,
        "extra_body": {**_REPEATS, **_DRY},
    },
}
"""What a request to the embedded model asks for when the caller says nothing (``--agent-max-tokens`` and the other
endpoint options win, key by key inside ``extra_body``). Without them a small model spends the server's whole cap
on every turn, and an episode takes many minutes.

- agent ``max_tokens`` 128 a turn; the answer gets more (:func:`agent_answer`): a question needs a few dozen
  tokens.
- simulator ``max_tokens`` 64: the prompts ask for a few short sentences, and the reply is cut to the domain's
  length anyway; ``accept_empty``: a reply cut to nothing at once (by the domain's ``stop`` strings) is an empty
  human turn, not a fault to retry.
- ``repeat_penalty`` 1.1 over the last 128 tokens: a small model at temperature 0 falls into loops inside a turn
  (the same line again and again) that run to the cap.
- DRY (questions and human replies, not the answer): penalises repeating any run of more than 3 tokens already in
  the dialogue, i.e. parroting the other side or one's own earlier turn; the answer must be free to repeat the
  signature and earlier code.
"""


def agent_answer(*, prefill: str, extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The embedded agent's final-answer settings (:class:`colbench.agents.agent.AnswerSettings` fields): the
    answer's cap, ``prefill`` (the start of the last turn, written for the model: the answer format of the task's
    domain, so that a model which never writes the answer marker still delivers an answer), and the question turns'
    request fields without DRY, under the caller's ``extra_body``."""
    return {
        "max_tokens": AGENT_ANSWER_MAX_TOKENS,
        "prefill": prefill,
        "extra_body": {**_REPEATS, **(extra_body or {})},
    }


def with_role_defaults(
    role: str, overrides: Mapping[str, Any], *, banned: Sequence[str] = (), stop: Sequence[str] = ()
) -> dict[str, Any]:
    """``overrides`` (Endpoint fields; ``None`` = not given) completed by :data:`ROLE_DEFAULTS` for ``role``.

    ``banned``: strings the model may not write (every token of each is banned: llama.cpp's ``logit_bias`` false);
    ``stop``: strings that end the reply, a second guard for what the ban misses. Both join the role's
    ``extra_body`` defaults, under the caller's own ``extra_body`` (whose ``stop`` or ``logit_bias`` wins whole).
    """
    settings = {name: value for name, value in overrides.items() if value is not None}
    guards: dict[str, Any] = {}
    if banned:
        guards["logit_bias"] = [[text, False] for text in banned]
    if stop:
        guards["stop"] = list(stop)
    defaults = dict(ROLE_DEFAULTS.get(role, {}))
    if guards:
        defaults["extra_body"] = {**defaults.get("extra_body", {}), **guards}
    for name, value in defaults.items():
        if name == "extra_body":
            settings[name] = {**value, **(settings.get(name) or {})}
        else:
            settings.setdefault(name, value)
    return settings
