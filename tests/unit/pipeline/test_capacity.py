"""Whether the compiled program can hold an intent: its algorithms and its tables' sizes,
read from the P4Info, checked after the intent's own checks."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import pytest

from p4lb.intent import reader
from p4lb.intent.model import ConfigError
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import Limits, compiled_limits
from tests.unit.support import DEFAULT_CONFIG


def base() -> dict[str, Any]:
    return tomllib.loads(DEFAULT_CONFIG.read_text())


def checked(data: dict[str, Any], limits: Limits | None = None) -> None:
    capacity.check(reader.parse(data, "lb.toml"), limits or compiled_limits())


def test_an_unknown_algorithm_is_one_line_naming_the_key() -> None:
    data = base()
    data["vip"]["web"]["algorithm"] = "magic"
    reader.parse(data, "lb.toml")  # a name is all the intent knows of an algorithm
    with pytest.raises(ConfigError) as err:
        checked(data)
    msg = str(err.value)
    assert msg.startswith("lb.toml: vip.web.algorithm: unknown algorithm 'magic' (known: ")
    assert "\n" not in msg


def test_more_backends_than_the_table_holds() -> None:
    with pytest.raises(ConfigError, match="3 backends in all, the switch holds at most 2"):
        checked(base(), replace(compiled_limits(), max_backends=3))


def test_more_wrr_slots_than_the_table_holds() -> None:
    data = base()
    data["vip"]["web"]["backend"][0]["weight"] = 997  # 997+1+1 slots, +999 headroom
    with pytest.raises(ConfigError, match="WRR slots"):
        checked(data, replace(compiled_limits(), wrr_table_size=1500))
    checked(data, replace(compiled_limits(), wrr_table_size=2000))
