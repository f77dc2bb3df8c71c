"""The controller against a real simple_switch_grpc: read-back, idempotence, mastership."""

from __future__ import annotations

import pytest

from p4lb import config as cfgmod
from p4lb import control, intent
from p4lb.adapter import Switch, SwitchError
from p4lb.cli import main
from p4lb.entries import desired_entries
from tests.dataplane.harness import GRPC_PORT, Bmv2


def test_what_the_switch_holds_is_what_was_intended(bmv2: Bmv2) -> None:
    held = bmv2.sw.read_entries()
    _, desired = desired_entries(bmv2.cfg, held)
    assert sorted(held) == sorted(desired)


def test_second_apply_writes_nothing(bmv2: Bmv2) -> None:
    result = control.apply(bmv2.sw, bmv2.cfg)
    assert (result.pipeline_pushed, result.writes) == (False, 0)


def test_invalid_config_changes_nothing_on_the_switch(
    bmv2: Bmv2, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(bmv2.sw.read_entries())
    text = bmv2.cfg_path.read_text().replace('algorithm = "wrr"', 'algorithm = "magic"', 1)
    bmv2.cfg_path.write_text(text)
    assert main(["-c", str(bmv2.cfg_path), "apply"]) == 1
    assert "unknown algorithm 'magic'" in capsys.readouterr().err
    assert sorted(bmv2.sw.read_entries()) == before


def test_cli_weight_set_reaches_the_switch_and_the_file(bmv2: Bmv2) -> None:
    assert main(["-c", str(bmv2.cfg_path), "weight", "set", "web", "s2", "3"]) == 0
    assert cfgmod.load(bmv2.cfg_path).vip("web").backend("s2").weight == 3
    vip = next(e for e in bmv2.sw.read_entries(("vip_table",)) if e.m("port") == 80)
    assert vip.p("slot_count") == 5


def test_a_lower_election_id_cannot_write(bmv2: Bmv2) -> None:
    other = Switch(f"127.0.0.1:{GRPC_PORT}", 0, 5)
    try:
        assert not other.is_primary
        with pytest.raises(SwitchError, match="another controller"):
            control.apply(other, intent.set_weight(bmv2.cfg, "web", "s2", 7))
    finally:
        other.close()
    assert control.apply(bmv2.sw, bmv2.cfg).writes == 0
