"""SkyRL's trainer with colbench's env options in its typed config: ``python -m colbench.integrations.skyrl_train``.

SkyRL builds its config as dataclasses (``SkyRLTrainConfig.from_cli_overrides``) and refuses any key they do not
declare (``Invalid fields {'colbench'} for SkyRLGymConfig``), telling integrations to subclass the config instead. Its
generator then makes each env with ``skyrl_gym.make(env_class, env_config=getattr(cfg.environment.skyrl_gym,
env_class, {}), ...)``. So colbench's options live in a subclass chain: ``ColbenchEnvConfig`` (the options) under
``environment.skyrl_gym.colbench`` of ``ColbenchSkyRLConfig``, and ``main`` is SkyRL's own entry point
(``skyrl.train.entrypoints.main_base``) parsing with that class and registering the env in the Ray task that runs
the generator. The launch docs/integrations.md shows is tested by feeding it to this loader.

No ``from __future__ import annotations`` here: SkyRL finds a nested section's dataclass from the field's annotation
at run time, and a string annotation would leave the section a plain dict.

Tested with skyrl 0.3.0 (its config module; the trainer itself needs Python 3.12, CUDA and vLLM).
"""

import sys
from dataclasses import dataclass, field
from typing import Any

from skyrl.train.config import EnvironmentConfig, SkyRLGymConfig, SkyRLTrainConfig
from skyrl.train.config.config import BaseConfig

from colbench.integrations.skyrl import ENV_CLASS, register


@dataclass
class ColbenchEnvConfig(BaseConfig):  # type: ignore[misc]
    """The env's options (``environment.skyrl_gym.colbench.*``); a field left unset (None) takes the env's default.
    ``options`` carries any other keyword of the env (``truth_policy``, ``human_grounding``, a domain's own)."""

    env_id: str | None = None  # None: the newest backend id (integrations.env_config.default_env_id)
    tasks: str | None = None
    simulator: str | None = None
    simulator_options: dict[str, Any] = field(default_factory=dict)
    sandbox: str | None = None
    leak_policy: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ColbenchSkyRLGymConfig(SkyRLGymConfig):  # type: ignore[misc]
    """SkyRL-Gym's env sections plus colbench's."""

    colbench: ColbenchEnvConfig = field(default_factory=ColbenchEnvConfig)


@dataclass
class ColbenchEnvironmentConfig(EnvironmentConfig):  # type: ignore[misc]
    """``environment``: colbench's env class by default, with its section under ``skyrl_gym``."""

    env_class: str = ENV_CLASS
    skyrl_gym: ColbenchSkyRLGymConfig = field(default_factory=ColbenchSkyRLGymConfig)


@dataclass
class ColbenchSkyRLConfig(SkyRLTrainConfig):  # type: ignore[misc]
    """SkyRL's whole training config, its ``environment`` section knowing colbench's options."""

    environment: ColbenchEnvironmentConfig = field(default_factory=ColbenchEnvironmentConfig)


def load_config(overrides: list[str]) -> ColbenchSkyRLConfig:
    """SkyRL's own loader (``key.path=value`` overrides over the dataclass defaults, unknown keys refused) run on
    colbench's config class."""
    config = ColbenchSkyRLConfig.from_cli_overrides(overrides)
    assert isinstance(config, ColbenchSkyRLConfig)
    return config


def _run(config: ColbenchSkyRLConfig) -> None:
    """SkyRL's experiment, in the Ray task that makes the generator (where the env must be registered)."""
    from skyrl.train.entrypoints.main_base import BasePPOExp

    register()  # rows name it in their env_class column (skyrl_rows)
    BasePPOExp(config).run()


def main(argv: list[str] | None = None) -> None:
    """What ``skyrl.train.entrypoints.main_base.main`` does, with colbench's config class and env registered."""
    import ray
    from skyrl.train.utils import validate_cfg
    from skyrl.train.utils.utils import initialize_ray

    config = load_config(sys.argv[1:] if argv is None else argv)
    validate_cfg(config)
    initialize_ray(config)
    ray.get(ray.remote(num_cpus=1)(_run).remote(config))


if __name__ == "__main__":
    main()
