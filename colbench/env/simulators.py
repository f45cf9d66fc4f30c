"""A domain's simulated human, built from a spec: the machinery every domain shares.

A domain says what is its own (:class:`~colbench.env.domain.Domain`): its prompts, which simulator a chat model
becomes (``Domain.chat_simulator``: the frontend's human sees pages), its reply cap, its own simulator options and
what the embedded human may not write. Everything else is here, once: parsing the spec and the options, the view
(the human shown the hidden answer, or only a specification of it: :mod:`colbench.humans.spec`), the clients
(``connect``: endpoint, response cache, request limits), the spec writer, and the simulator's section of run.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from colbench._util.storage import colbench_home
from colbench.env.domain import Domain
from colbench.errors import ConfigError
from colbench.humans.simulator import ChatSimulator, ScriptedSimulator, Simulator, truncate
from colbench.humans.spec import SpecSimulator, SpecWriter, load_specs
from colbench.llm.client import ENDPOINT_FIELDS, LLMClient
from colbench.llm.limits import EndpointLimits
from colbench.llm.specs import ModelSpec, connect, parse_spec

SIMULATOR_CACHE = "simulator.sqlite"
SPEC_WRITER_CACHE = "spec-writer.sqlite"
SPEC_MAX_TOKENS = 320
"""Tokens a spec may take (the prompt asks for 200 words), whatever the simulator's own cap."""
VIEWS = ("hidden", "spec")
VIEW_OPTIONS = frozenset({"view", "specs", "spec_model"})
"""Simulator options of every domain: what the human is shown (:func:`make_simulator`)."""


def make_simulator(
    domain: Domain,
    spec: str | ModelSpec,
    *,
    cache_dir: str | Path | None = None,
    limits: EndpointLimits | None = None,
    client: LLMClient | None = None,
    **options: Any,
) -> Simulator:
    """The simulated human of ``domain``'s tasks for a spec (``openai:MODEL``, ``llamacpp[:PATH]``,
    ``scripted[:leaky]``): ``options`` are endpoint fields (``base_url``, ``temperature``, ...), the domain's
    simulator options and the view options (``view``: ``hidden``, the default, or ``spec``: the human answers from a
    specification of the hidden information, :mod:`colbench.humans.spec`; ``specs``: a pinned specs file;
    ``spec_model``: who writes them, default the simulator's model). Replies are cached in
    ``cache_dir/simulator.sqlite`` when given, specs in ``cache_dir/specs/``, and requests obey ``limits``.
    ``client``: the spec's model, ready (a harness's own: Inspect's model role), asked instead of an endpoint."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec, "simulator")
    own = {k: v for k, v in options.items() if k in domain.simulator_options}
    view = {k: v for k, v in options.items() if k in VIEW_OPTIONS}
    unknown = sorted(set(options) - set(own) - set(view) - ENDPOINT_FIELDS)
    if unknown:
        known = sorted(ENDPOINT_FIELDS | domain.simulator_options | VIEW_OPTIONS)
        raise ConfigError(
            f"unknown simulator option(s) {', '.join(unknown)} for {domain.name} tasks; known: {', '.join(known)}"
        )
    seen = view.get("view") or "hidden"
    if seen not in VIEWS:
        raise ConfigError(f"simulator option view={seen!r}: expected one of {', '.join(VIEWS)}")
    if seen == "hidden" and (view.get("specs") or view.get("spec_model")):
        raise ConfigError("simulator options specs and spec_model apply to view='spec' only")
    if parsed.kind == "scripted":  # calls no endpoint: endpoint options have nothing to act on
        if seen == "spec":
            raise ConfigError(f"simulator {parsed.text!r}: view='spec' needs a model simulator (openai:, llamacpp)")
        if parsed.value == "leaky":
            cap = domain.max_reply_chars
            return ScriptedSimulator(lambda task, _: truncate(task.hidden_information, cap))
        return ScriptedSimulator()
    endpoint = {k: v for k, v in options.items() if k in ENDPOINT_FIELDS}
    cache_path = Path(cache_dir) / SIMULATOR_CACHE if cache_dir is not None else None
    given = client
    if client is None:
        client = connect(
            parsed,
            "simulator",
            cache_path=cache_path,
            limits=limits,
            banned=domain.human_banned,
            stop=domain.human_stops,
            **endpoint,
        )
    if seen == "hidden":
        return domain.chat_simulator(
            client, domain.simulator_prompt, text_only=parsed.is_embedded, spec_view=False, **own
        )
    writer = spec_writer(
        domain,
        view.get("spec_model") or parsed,
        specs=view.get("specs"),
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        limits=limits,
        client=None if view.get("spec_model") else given,
        **{k: v for k, v in endpoint.items() if k != "max_tokens"},
    )
    inner = domain.chat_simulator(
        client, domain.spec_simulator_prompt, text_only=parsed.is_embedded, spec_view=True, **own
    )
    return SpecSimulator(inner, writer)


def spec_writer(
    domain: Domain,
    model: str | ModelSpec,
    *,
    specs: str | Path | None = None,
    cache_dir: Path | None = None,
    limits: EndpointLimits | None = None,
    client: LLMClient | None = None,
    **endpoint: Any,
) -> SpecWriter:
    """Who turns ``domain``'s hidden information into specifications: ``model`` (a model spec; ``client``, where
    given, asks it) with the domain's ``spec-writer`` prompt, or the pinned ``specs`` file alone. Specs are cached in
    ``cache_dir/specs`` (default: colbench's cache folder), the writer's replies in ``cache_dir/spec-writer.sqlite``."""
    prompt = domain.prompt_template("spec-writer")
    if specs:
        return SpecWriter(None, prompt, pinned=load_specs(specs), pinned_from=str(specs))
    parsed = model if isinstance(model, ModelSpec) else parse_spec(model, "spec writer", models_only=True)
    endpoint.setdefault("max_tokens", SPEC_MAX_TOKENS)
    client = client or connect(
        parsed,
        "simulator",
        defaults_for="spec writer",  # the embedded model's human defaults (short, no code) are not for it
        cache_path=cache_dir / SPEC_WRITER_CACHE if cache_dir is not None else None,
        limits=limits,
        **endpoint,
    )
    return SpecWriter(
        client,
        prompt,
        cache_dir=(cache_dir or colbench_home()) / "specs",
        leak_score=domain.leak_score,
        threshold=domain.leak_threshold,
    )


def describe_simulator(domain: Domain, spec: str, simulator: Simulator) -> dict[str, Any]:
    """The simulator's section of run.json (everything that could change its replies)."""
    shown = simulator.inner if isinstance(simulator, SpecSimulator) else simulator
    view = "spec" if isinstance(simulator, SpecSimulator) else "hidden"
    described: dict[str, Any] = {
        "spec": spec,
        "class": f"{type(shown).__module__}.{type(shown).__qualname__}",
        "model": None,
        "base_url": None,
        "temperature": None,
        "max_tokens": None,
        "extra_body": None,
        "prompt_sha256": domain.prompt_sha256("simulator" if view == "hidden" else "simulator-spec"),
        "max_chars": None,
        "image_mode": getattr(shown, "image_mode", None),
        "view": view,
        "spec_writer": simulator.writer.describe() if isinstance(simulator, SpecSimulator) else None,
    }
    if isinstance(shown, ChatSimulator):
        endpoint = shown.client.endpoint
        described.update(
            model=endpoint.model,
            base_url=endpoint.identity or endpoint.base_url,
            temperature=endpoint.temperature,
            max_tokens=endpoint.max_tokens,
            extra_body=dict(endpoint.extra_body) if endpoint.extra_body else None,
            max_chars=shown.max_chars,
        )
    return described
