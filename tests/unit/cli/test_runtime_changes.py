"""What the README promises of runtime commands, through main(argv) against the fake switch:
`vip add` (with `--backend NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT`), `vip remove` and `backend
remove` land on the switch and in the file; a malformed `--backend` is one line naming the
format and changes nothing; `P4LB_CONFIG` names the file when `-c` is not given."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import reader
from p4lb.intent.model import CHOICES_ALL, Backend
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import held, holds

# README's example: a UDP VIP served by h2's machine on another port.
VIP_ADD = ["vip", "add", "dns", "--address", "10.0.0.53", "--port", "53", "--protocol", "udp"]
D1 = "d1=10.0.0.2:5353,1,00:00:00:00:00:02,2"


def test_vip_add_with_a_backend_lands_on_the_switch_and_in_the_file(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    d2 = "d2=10.0.0.3:5353,3,00:00:00:00:00:03,3"
    assert main(["-c", str(fake_cfg), *VIP_ADD, "--backend", D1, "--backend", d2]) == 0
    assert "vip add done" in capsys.readouterr().out
    dns = reader.load(fake_cfg).vip("dns")
    assert (dns.address, dns.port, dns.protocol, dns.algorithm) == ("10.0.0.53", 53, "udp", "wrr")
    assert dns.backends == (
        Backend("d1", "10.0.0.2", 5353, 1, "00:00:00:00:00:02", 2),
        Backend("d2", "10.0.0.3", 5353, 3, "00:00:00:00:00:03", 3),
    )
    assert holds(fake, reader.load(fake_cfg))
    assert len(fake.entries("vip_table")) == 2


@pytest.mark.parametrize(
    "option",
    [
        "d1=10.0.0.2:5353,1,00:00:00:00:00:02",  # no switch port
        "10.0.0.2:5353,1,00:00:00:00:00:02,2",  # no name
        "d1=10.0.0.2,1,00:00:00:00:00:02,2",  # no port
        "d1=10.0.0.2:5353,one,00:00:00:00:00:02,2",  # weight not a number
    ],
)
def test_a_malformed_backend_option_is_one_line_and_changes_nothing(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    before = fake_cfg.read_bytes()
    assert main(["-c", str(fake_cfg), *VIP_ADD, "--backend", option]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"p4lb: --backend {option!r}: expected NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT"
    assert fake_cfg.read_bytes() == before
    assert fake.write_requests == 0


def test_a_backend_option_is_checked_like_the_file(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fake_cfg.read_bytes()
    bad_mac = D1.replace("00:00:00:00:00:02", "00:00:02")
    assert main(["-c", str(fake_cfg), *VIP_ADD, "--backend", bad_mac]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("p4lb: command line: backend 'd1'.mac: not a MAC address")
    assert fake_cfg.read_bytes() == before and fake.write_requests == 0


def test_vip_remove_takes_the_vip_off_the_switch_and_out_of_the_file(
    fake: FakeSwitch, fake_cfg: Path
) -> None:
    assert main(["-c", str(fake_cfg), *VIP_ADD, "--backend", D1]) == 0
    assert len(fake.entries("vip_table")) == 2
    assert main(["-c", str(fake_cfg), "vip", "remove", "dns"]) == 0
    cfg = reader.load(fake_cfg)
    assert [v.name for v in cfg.vips] == ["web"]
    assert "dns" not in fake_cfg.read_text()
    assert holds(fake, cfg) and len(fake.entries("vip_table")) == 1


def test_backend_remove_takes_the_backend_off_the_switch_and_out_of_the_file(
    fake: FakeSwitch, fake_cfg: Path
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    assert len(fake.entries("backend_table")) == 3
    assert main(["-c", str(fake_cfg), "backend", "remove", "web", "h4"]) == 0
    cfg = reader.load(fake_cfg)
    assert [b.name for b in cfg.vip("web").backends] == ["h2", "h3"]
    assert holds(fake, cfg) and len(fake.entries("backend_table")) == 2


def test_p4lb_config_names_the_file_when_c_is_not_given(
    fake: FakeSwitch,
    fake_cfg: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    elsewhere = tmp_path / "elsewhere"  # no p4lb.toml here
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("P4LB_CONFIG", raising=False)
    assert main(["check"]) == 1
    assert capsys.readouterr().err.strip() == "p4lb: p4lb.toml: file not found"
    monkeypatch.setenv("P4LB_CONFIG", str(fake_cfg))
    assert main(["check"]) == 0
    assert capsys.readouterr().out.strip() == f"{fake_cfg}: ok (1 VIPs, 3 backends)"
    assert main(["weight", "set", "web", "h2", "3"]) == 0
    assert reader.load(fake_cfg).vip("web").backend("h2").weight == 3
    assert holds(fake, reader.load(fake_cfg))


def test_algorithm_set_choices_lands_on_the_switch_and_in_the_file(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`algorithm set web leastconn --choices 2` writes two-candidate slots and `choices = 2`;
    `--choices all` goes back to every backend; a later `algorithm set` without --choices
    keeps the setting; a choice the switch cannot hold is one line and changes nothing."""
    assert main(["-c", str(fake_cfg), "apply"]) == 0

    def filled() -> set[int]:
        return {
            sum(1 for k, v in e.params if k.startswith("weight_") and v != 0)
            for e in held(fake)
            if e.table == "slot_table" and e.action == "set_candidates"
        }

    argv = ["-c", str(fake_cfg), "algorithm", "set", "web", "leastconn"]
    assert main([*argv, "--choices", "2"]) == 0
    assert reader.load(fake_cfg).vip("web").choices == 2
    assert filled() == {2}
    assert main(["-c", str(fake_cfg), "algorithm", "set", "web", "leasttime"]) == 0
    assert reader.load(fake_cfg).vip("web").choices == 2
    assert main([*argv, "--choices", "all"]) == 0
    assert reader.load(fake_cfg).vip("web").choices == CHOICES_ALL
    assert "choices" not in fake_cfg.read_text()  # the default stays implicit
    assert filled() == {len(reader.load(fake_cfg).vip("web").backends)}
    before = fake_cfg.read_text()
    capsys.readouterr()
    assert main([*argv, "--choices", "17"]) != 0
    err = capsys.readouterr().err.strip()
    assert "choices" in err and "at most 16" in err and "\n" not in err, err
    assert fake_cfg.read_text() == before
