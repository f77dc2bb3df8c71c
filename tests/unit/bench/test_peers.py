"""bench-peers' pure parts: the peer's log-free variant, its table entries, and the
breakdown's reading of callgrind_annotate (no switch, no callgrind)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import instructions, lab, peer_program, peers

SOURCE = """
action a() {
    log_msg(">>> Checking backend {}, {} connections.", {(bit<9>)2, min});
    x = 1;
}
apply {
    if (y == 1) {
        log_msg("[DROP]>>> no (valid) header, {} left", {z});
        drop();
    }
    log_msg(">>> Packet from CLIENT");
    t.apply();
}
"""


def test_the_log_free_variant_keeps_every_other_statement() -> None:
    out = peer_program.strip_logs(SOURCE)
    assert "log_msg" not in out
    for kept in ("x = 1;", "drop();", "t.apply();", "if (y == 1) {"):
        assert kept in out
    # The blocks stay whole: action, apply and if (the strings' braces went with them).
    assert out.count("{") == out.count("}") == 3


def test_the_peer_gets_a_backend_per_port_and_the_way_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(lab, "thrift_cli", lambda cmds: sent.extend(cmds) or "")
    peer_program.program_peer(lab.Shape())
    backends = [c.split() for c in sent if "vip_to_backend" in c]
    assert [int(c[3]) for c in backends] == list(peer_program.PEER_BACKEND_PORTS)
    assert len({c[5] for c in backends}) == len(backends)  # one address each
    assert [c[7] for c in backends] == [lab.port_mac(p) for p in peer_program.PEER_BACKEND_PORTS]
    assert any(f"{lab.vip_addr(0)} 80 => 1" in c for c in sent)
    assert any("backend_to_vip" in c and f"=> {lab.vip_addr(0)} 80" in c for c in sent)


ANNOTATE = """\
--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
1,000 (100.0%)  /src/simple_switch.cpp:SimpleSwitch::ingress_thread()'2 [/usr/bin/ss]
  600 (60.00%)  /src/parser.cpp:bm::Parser::parse(bm::Packet*) const [/usr/bin/ss]
   10 ( 1.00%)  /usr/include/c++/12/bits/basic_string.h:bm::Parser::parse(bm::Packet*) const
  100 (10.00%)  /src/parser.cpp:bm::Parser::verify_checksums(bm::Packet*) const [/usr/bin/ss]
  300 (30.00%)  /src/pipeline.cpp:bm::Pipeline::apply(bm::Packet*) [/usr/bin/ss]
   50 ( 5.00%)  ???:std::basic_ios<char, std::char_traits<char> >::init(void*) [/lib]
"""


def test_annotate_sums_a_function_over_the_files_its_code_comes_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        assert "--inclusive=yes" in cmd
        return subprocess.CompletedProcess(cmd, 0, ANNOTATE, "")

    monkeypatch.setattr(subprocess, "run", run)
    costs = instructions.annotate(tmp_path / "dump")
    assert costs["bm::Parser::parse"] == 610
    assert costs["SimpleSwitch::ingress_thread"] == 1000
    assert costs["bm::Pipeline::apply"] == 300
    assert costs["std::basic_ios<char, std::char_traits<char> >::init"] == 50


def test_phases_take_the_checksum_out_of_the_parser_and_split_the_pipeline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ingress, egress = tmp_path / "d.1-01", tmp_path / "d.1-02"
    for f in (ingress, egress):
        f.write_text("x")
    costs = {
        ingress: {
            "SimpleSwitch::ingress_thread": 1000,
            "bm::Parser::parse": 600,
            "bm::Parser::verify_checksums": 100,
            "bm::Pipeline::apply": 300,
        },
        egress: {
            "bm::Pipeline::apply": 70,
            "bm::Deparser::deparse": 50,
            "bm::Deparser::update_checksums": 20,
        },
    }
    totals = {ingress: 1000, egress: 200}
    monkeypatch.setattr(instructions, "annotate", lambda d: costs[d])
    monkeypatch.setattr(instructions, "callgrind_totals", lambda files: [totals[f] for f in files])
    got = instructions.phases([ingress, egress])
    assert got["parser"] == 500
    assert got["verify_checksum"] == 100
    assert (got["ingress"], got["egress"]) == (300, 70)
    assert (got["deparser"], got["compute_checksum"]) == (30, 20)
    assert got["total"] == 1200
    assert sum(got[k] for k in instructions.PHASES) == got["total"]


def test_the_quoted_facts_come_from_the_runs_provenance() -> None:
    facts = {
        "started": "2026-11-26T14:12:15Z",
        "git": {"commit": "c" * 40, "dirty": True},
        "p4c": "1.2.5.16",
    }
    got = peers.summary_facts(facts)
    assert (got["when"], got["commit"], got["p4c"]) == (
        "2026-11-26T14:12:15Z",
        "c" * 40 + "+uncommitted",
        "1.2.5.16",
    )
    facts["git"]["dirty"] = False
    assert peers.summary_facts(facts)["commit"] == "c" * 40
