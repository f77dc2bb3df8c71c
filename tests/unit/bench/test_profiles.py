"""bench.profiles: one definition of the quick and full profiles; every bench's quick
arguments are ones its command line takes, and an argument given besides wins."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import pytest

from bench import profiles

MODULES = {
    "bench-switch": "bench.switch",
    "bench-ab": "bench.apachebench",
    "bench-ab-overhead": "bench.ab_overhead",
    "bench-floor": "bench.floor",
    "bench-flood": "bench.flood",
    "bench-controller": "bench.controller",
    "bench-tier": "bench.tier",
    "bench-cookie": "bench.cookie",
    "bench-choices": "bench.choices",
    "bench-dsr": "bench.dsr",
    "bench-restore-peer": "bench.restore_peer",
    "bench-qos": "bench.qos",
    "bench-peers": "bench.peers",
    "bench-cost": "bench.peers",
}


class Parsed(Exception):
    pass


def parsed(monkeypatch: pytest.MonkeyPatch, bench: str, argv: list[str]) -> argparse.Namespace:
    """The arguments `bench` parses from `argv` (it stops there: nothing is measured)."""
    real = argparse.ArgumentParser.parse_args

    def stop(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise Parsed(real(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop)
    extra = ["--breakdown"] if bench == "bench-cost" else []
    with pytest.raises(Parsed) as got:
        importlib.import_module(MODULES[bench]).main([*argv, *extra])
    ns = got.value.args[0]
    assert isinstance(ns, argparse.Namespace)
    return ns


def test_every_bench_has_a_quick_profile_and_no_other_does() -> None:
    assert set(profiles.QUICK) == set(MODULES)


@pytest.mark.parametrize("bench", sorted(MODULES))
def test_each_quick_profile_is_one_repetition_or_less_of_its_bench(
    monkeypatch: pytest.MonkeyPatch, bench: str
) -> None:
    quick = parsed(monkeypatch, bench, ["--profile", "quick"])
    full = parsed(monkeypatch, bench, [])
    assert quick.profile == "quick" and full.profile == "full"
    changed = {k for k in vars(full) if getattr(quick, k) != getattr(full, k)} - {"profile"}
    assert changed, f"{bench}: --profile quick changes nothing"
    if getattr(full, "reps", None) is not None and "reps" in changed:
        assert quick.reps == 1


def test_an_argument_given_besides_the_profile_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    ns = parsed(monkeypatch, "bench-choices", ["--profile", "quick", "--flows", "7"])
    assert (ns.reps, ns.flows) == (1, 7)


def test_an_unknown_profile_is_one_line() -> None:
    with pytest.raises(SystemExit, match=r"^bench-choices: --profile 'medium': want one of"):
        profiles.expand("bench-choices", ["--profile", "medium"])
    with pytest.raises(ValueError, match="profile"):
        profiles.arguments("bench-choices", "medium")
