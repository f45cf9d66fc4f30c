"""The example trainers' one config parser (colbench._util.config_cli): a config survives the trip to a command line
and back, which is how run_all.py hands each stage its config."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from colbench._util.config_cli import config_args, parse_config


@dataclass
class _Config:
    name: str = "x"
    count: int = 3
    rate: float = 0.5
    flag: bool = True
    maybe: int | None = None
    auto: bool | None = None  # None: decided later (e.g. bf16 where the GPU supports it)
    items: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "config",
    [
        _Config(name="y", count=7, rate=2e-7, flag=False, maybe=4, auto=True, items=["a", "b"]),
        _Config(auto=False),
        _Config(),
    ],
)
def test_a_config_survives_its_command_line(config: _Config) -> None:
    assert parse_config(_Config, config_args(config)) == config


def test_flags_as_people_type_them() -> None:
    assert parse_config(_Config, []) == _Config()
    assert parse_config(_Config, ["--maybe", "none", "--no-flag"]) == _Config(flag=False)
    assert parse_config(_Config, ["--auto"]) == _Config(auto=True)
    assert parse_config(_Config, ["--no-auto", "--items", "p", "q"]) == _Config(auto=False, items=["p", "q"])


def test_a_bad_value_is_argparses_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_config(_Config, ["--count", "many"])
    assert caught.value.code == 2
    assert "--count: invalid int value: 'many'" in capsys.readouterr().err
