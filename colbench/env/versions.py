"""Env ids as scoring versions: which rules an id scores by, and which id a set of scoring options stands for.

A score is only meaningful with the env id that produced it (``ColBench-Backend-v1`` and ``-v2`` judge the same
answer differently). The ids and what they judge are declared once, in the env specs (``envs/<domain>/*.toml``,
:func:`~colbench.env.registration.env_definitions`): an id's scoring options are its definition's values of the
kwargs its domain declares as choosing the scoring (:attr:`~colbench.env.domain.Domain.scoring_kwargs`), the
domain's defaults for those it leaves out. Everything that scores answers outside an env (``colbench score
--env``, ``colbench rescore``, the eval harness's shared scorer) derives its options from here, so no second table
of versions can drift from the env specs.

The scoring ids of a domain are the definitions of that domain made by the same env class as its current id
(:attr:`~colbench.env.domain.Domain.env_id`): ``ColBench-Human-v0`` is a backend env too, but the learner plays the
human there and its reward is not a score of an answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from colbench.env.domain import Domain, get_domain
from colbench.env.registration import EnvDefinition, env_definitions
from colbench.errors import ConfigError

_VERSION = re.compile(r"-v(\d+)$")


def _version(definition: EnvDefinition) -> tuple[int, str]:
    found = _VERSION.search(definition.id)
    return (int(found.group(1)) if found else -1, definition.id)


def scoring_envs(domain: str | Domain) -> list[EnvDefinition]:
    """The env ids that score ``domain``'s answers, oldest version first (none for a domain whose envs are
    registered with Gymnasium alone, as a plug-in's may be)."""
    target = get_domain(domain)
    definitions = [d for d in env_definitions() if d.domain == target.name]
    current = next((d for d in definitions if d.id == target.env_id), None)
    if current is None:
        return []
    return sorted((d for d in definitions if d.entry_point == current.entry_point), key=_version)


def newest_env(domain: str | Domain) -> str | None:
    """The newest scoring id of ``domain`` (what ``colbench score`` uses by default), None when it has none."""
    envs = scoring_envs(domain)
    return envs[-1].id if envs else None


def scoring_options(env_id: str) -> dict[str, Any]:
    """The scoring options of a registered env id: its definition's values of its domain's scoring kwargs, with
    the domain's defaults (``{"rules": 3, "plus_tests": True}`` for ``ColBench-Backend-v2``); ``{}`` for an id
    without a definition (a plug-in's, registered with Gymnasium alone: its scorer takes no version options)."""
    definition = next((d for d in env_definitions() if d.id == env_id), None)
    if definition is None:
        return {}
    defaults = get_domain(definition.domain).scoring_kwargs
    return {name: definition.kwargs.get(name, default) for name, default in defaults.items()}


def scoring_env(domain: str | Domain, env_id: str | None, what: str = "--env") -> str | None:
    """``env_id`` checked as a scoring id of ``domain`` (None: the newest one); an unknown id, or one of another
    domain, is a ConfigError naming ``what`` and listing the valid ids."""
    target = get_domain(domain)
    valid = [d.id for d in scoring_envs(target)]
    if env_id is None:
        return valid[-1] if valid else None
    if env_id in valid:
        return env_id
    listed = ", ".join(valid) or "none (its envs are not in colbench's env specs)"
    other = next((d for d in env_definitions() if d.id == env_id), None)
    if other is None:
        why = "unknown env id"
    elif other.domain != target.name:
        why = f"a {other.domain} env"
    else:
        why = f"not a version of {target.name} scoring"
    raise ConfigError(f"{what} {env_id}: {why}; {target.name} answers are scored by {listed}")


def env_id_for(domain: str | Domain, options: Mapping[str, Any]) -> str | None:
    """The scoring id of ``domain`` whose options are ``options`` (the domain's scoring kwargs; others are
    ignored, missing ones take the domain's defaults): what a scorer or an env made with these options reports
    as the version of its scores. None for a domain with no scoring ids; a combination no id stands for (backend
    ``rules=2`` with plus tests) is a ConfigError listing the ids and their options."""
    target = get_domain(domain)
    wanted = {name: options.get(name, default) for name, default in target.scoring_kwargs.items()}
    envs = scoring_envs(target)
    matches = [d.id for d in envs if scoring_options(d.id) == wanted]
    if len(matches) == 1:
        return matches[0]
    if not envs:
        return None
    known = "; ".join(f"{d.id} {scoring_options(d.id)}" for d in envs)
    if matches:
        raise ConfigError(f"{target.name} scoring {wanted}: several env ids stand for it ({', '.join(matches)})")
    raise ConfigError(f"{target.name} scoring {wanted}: no env id scores so; the ids are {known}")
