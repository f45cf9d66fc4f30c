"""Model specs: the strings that name who plays a role (``--agent``, ``--simulator``), parsed in one place.

- ``openai:MODEL``: any OpenAI-compatible endpoint (base URL and key: options, then ``COLBENCH_<ROLE>_BASE_URL`` /
  ``_API_KEY``, then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``); every role.
- ``llamacpp`` / ``llamacpp:PATH.gguf``: the embedded llama.cpp server (:mod:`colbench.llm.llamacpp`), no key, no
  network; every role.
- ``scripted`` / ``scripted:leaky`` (simulator) and ``scripted:MODE`` (agent): canned behaviour for tests and
  offline checks (``scripted:leaky`` pastes the hidden information: a human that always leaks, to test guards).
- ``module.path:Attr``: a third-party agent.

:func:`connect` turns a model spec into a
ready :class:`~colbench.llm.client.LLMClient`; agents and simulators receive clients, they never parse specs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from colbench.errors import ConfigError
from colbench.llm.cache import ResponseCache
from colbench.llm.client import ENDPOINT_FIELDS, Endpoint, LLMClient
from colbench.llm.limits import EndpointLimits

ModelKind = Literal["openai", "llamacpp", "scripted", "plugin", "named"]

FORMS: Mapping[str, str] = {
    "agent": (
        "'openai:MODEL', 'llamacpp', 'llamacpp:PATH.gguf', 'scripted:reference|ask|empty|copycat' or 'module.path:Attr'"
    ),
    "simulator": "'openai:MODEL', 'llamacpp', 'llamacpp:PATH.gguf', 'scripted' or 'scripted:leaky'",
    "model": "'openai:MODEL', 'llamacpp' or 'llamacpp:PATH.gguf'",
}
"""The forms each role accepts (``model``: an endpoint alone)."""
_KINDS: Mapping[str, frozenset[str]] = {
    "agent": frozenset({"openai", "llamacpp", "scripted", "plugin"}),
    "simulator": frozenset({"openai", "llamacpp", "scripted"}),
    "model": frozenset({"openai", "llamacpp"}),
}
SCRIPTED_AGENTS = ("reference", "ask", "empty", "copycat")
SCRIPTED_SIMULATORS = ("", "leaky")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec. ``value``: the model name (openai), the GGUF path or "" for the default (llamacpp), the mode
    (scripted: "" for the simulator), ``module.path:Attr`` (plugin). ``text`` is the spec as given."""

    kind: ModelKind
    value: str
    text: str

    @classmethod
    def named(cls, name: str) -> ModelSpec:
        """An agent given as an object (to ``run_eval``), known by its name alone: nothing is built from it."""
        return cls("named", name, name)

    @property
    def is_model(self) -> bool:
        return self.kind in ("openai", "llamacpp")

    @property
    def is_embedded(self) -> bool:
        """The embedded model (llama.cpp, text only: it reads no images)."""
        return self.kind == "llamacpp"


def parse_spec(spec: str, role: str, *, models_only: bool = False) -> ModelSpec:
    """Parse ``spec`` for ``role`` (``agent``, ``simulator``); ``models_only`` accepts only model forms.

    Every malformed spec is one ``ConfigError`` naming the spec and listing the forms the role accepts.
    """
    accepted = "model" if models_only else role
    if accepted not in FORMS:
        raise ValueError(f"unknown role {role!r}")
    parsed = _parse(spec) if isinstance(spec, str) else None
    if parsed is None or parsed.kind not in _KINDS[accepted]:
        raise ConfigError(f"bad {role} spec {spec!r}: expected {FORMS[accepted]}")
    if parsed.kind == "scripted" and role == "agent" and parsed.value not in SCRIPTED_AGENTS:
        raise ConfigError(
            f"bad agent spec {spec!r}: unknown scripted agent {parsed.value!r}; "
            f"expected one of {', '.join(SCRIPTED_AGENTS)}"
        )
    if parsed.kind == "scripted" and role == "simulator" and parsed.value not in SCRIPTED_SIMULATORS:
        raise ConfigError(f"bad simulator spec {spec!r}: expected {FORMS[role]}")
    return parsed


def _parse(spec: str) -> ModelSpec | None:
    head, sep, rest = spec.partition(":")
    if head == "openai":
        return ModelSpec("openai", rest.strip(), spec) if sep and rest.strip() else None
    if head == "llamacpp":
        return None if sep and not rest.strip() else ModelSpec("llamacpp", rest.strip(), spec)
    if head == "scripted":
        return ModelSpec("scripted", rest.strip(), spec) if not sep or rest.strip() else None
    if sep and head.strip() and rest.strip() and head == head.strip():
        return ModelSpec("plugin", spec, spec)
    return None


def endpoint_for(
    spec: str | ModelSpec,
    role: str,
    *,
    defaults_for: str | None = None,
    banned: Sequence[str] = (),
    stop: Sequence[str] = (),
    **overrides: Any,
) -> Endpoint:
    """The :class:`Endpoint` of a model spec. ``overrides`` are Endpoint fields; ``None`` means "not given".

    ``openai:``: the URL and key not given come from the role's environment (:func:`with_environment_endpoint`), so
    an agent and a simulator can live on different servers. ``llamacpp``: starts (once per process) the embedded
    server and points at it; its URL and key are its own, and what the overrides leave unset comes from the
    embedded model's defaults for the role (:data:`colbench.llm.llamacpp.ROLE_DEFAULTS`: short human replies,
    capped agent turns), or for ``defaults_for`` when the request plays another part than its role's (the spec
    writer: none), with ``banned`` and ``stop`` added (what the caller's domain forbids the role to write: its
    human's code or markup; see :func:`colbench.llm.llamacpp.with_role_defaults`). Other servers are sent neither:
    the ban is written in llama.cpp's form.
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec, role, models_only=True)
    if not parsed.is_model:
        raise ConfigError(f"bad {role} spec {parsed.text!r}: expected {FORMS['model']}")
    unknown = sorted(set(overrides) - ENDPOINT_FIELDS)
    if unknown:
        raise ConfigError(
            f"unknown {role} endpoint option(s) {', '.join(unknown)}; known: {', '.join(sorted(ENDPOINT_FIELDS))}"
        )
    if parsed.kind == "llamacpp":
        fixed = sorted(name for name in ("base_url", "api_key") if overrides.pop(name, None) is not None)
        if fixed:
            raise ConfigError(
                f"the {role} spec {parsed.text!r} runs its own server: {' and '.join(fixed)} cannot be set"
            )
        from colbench.llm.llamacpp import server_endpoint, with_role_defaults  # the optional extra, loaded on demand

        try:
            settings = with_role_defaults(defaults_for or role, overrides, banned=banned, stop=stop)
            return server_endpoint(parsed.value or None, **settings)
        except ConfigError as exc:
            raise ConfigError(f"bad {role} spec {parsed.text!r}: {exc} (expected {FORMS['model']})") from None
    return Endpoint(model=parsed.value, **with_environment_endpoint(parsed, role, overrides))


def with_environment_endpoint(spec: ModelSpec, role: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with an ``openai:`` endpoint's ``base_url`` / ``api_key`` filled in where not given: from
    ``COLBENCH_<ROLE>_BASE_URL`` / ``COLBENCH_<ROLE>_API_KEY``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Other
    kinds keep their options as they are (the embedded server has its own URL and key)."""
    out = dict(options)
    if spec.kind != "openai":
        return out
    prefix = f"COLBENCH_{role.upper()}_"
    for name in ("base_url", "api_key"):
        if out.get(name) is None:
            env = name.upper()
            out[name] = os.environ.get(prefix + env) or os.environ.get(f"OPENAI_{env}") or None
    return out


def connect(
    spec: str | ModelSpec,
    role: str,
    *,
    cache_path: str | Path | None = None,
    limits: EndpointLimits | None = None,
    defaults_for: str | None = None,
    banned: Sequence[str] = (),
    stop: Sequence[str] = (),
    **overrides: Any,
) -> LLMClient:
    """A ready client for a model spec: the endpoint, a response cache at ``cache_path`` (when given) and the
    request ``limits``; ``defaults_for``, ``banned`` and ``stop``: see :func:`endpoint_for`."""
    cache = ResponseCache(cache_path) if cache_path is not None else None
    endpoint = endpoint_for(spec, role, defaults_for=defaults_for, banned=banned, stop=stop, **overrides)
    return LLMClient(endpoint, cache=cache, limits=limits)
