"""Who can change what a real simple_switch_grpc does (issue 26): its Thrift server only
from this host, its P4Runtime server over TLS only for clients with a certificate of our CA.

Each test starts its own switch on a veth pair of its own (ports apart from the shared switch's)
and removes the switch, the veths, the namespace and the nftables table it made, also when
it fails."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from p4lb.cli.main import main as p4lb_main
from p4lb.intent import reader
from p4lb.intent.model import TlsSettings
from p4lb.service import operations
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from tests.dataplane import support
from topology import bmv2, thrift_guard, wire
from topology.pki import Pki, make_pki

# The switch's one port, its own veth pair (p4lbsec-s1, p4lbsec-h1).
LAB = wire.VethLab("p4lbsec", ports=1, grpc_port=29659, thrift_port=29190)
GRPC_PORT, THRIFT_PORT = LAB.grpc_port, LAB.thrift_port
NS = "p4lbsec-ns"
ROOT_IF, NS_IF = "p4lbsec-r", "p4lbsec-n"  # the namespace's link to the root namespace
ROOT_ADDR, NS_ADDR = "10.251.0.1", "10.251.0.2"


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, timeout=30)


def _cleanup() -> None:
    _sh("ip", "link", "del", ROOT_IF, check=False)
    _sh("ip", "netns", "del", NS, check=False)
    thrift_guard.release(THRIFT_PORT)


@pytest.fixture
def links() -> Iterator[None]:
    """The switch's port, and a namespace linked to the root one: 10.251.0.2 -> 10.251.0.1."""
    if shutil.which("nft") is None:
        pytest.skip("security tests skipped: missing nft (nftables)")
    _cleanup()
    with LAB.veths():
        try:
            _sh("ip", "netns", "add", NS)
            _sh("ip", "link", "add", ROOT_IF, "type", "veth", "peer", "name", NS_IF)
            _sh("ip", "link", "set", NS_IF, "netns", NS)
            _sh("ip", "addr", "add", f"{ROOT_ADDR}/30", "dev", ROOT_IF)
            _sh("ip", "link", "set", ROOT_IF, "up")
            _sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_ADDR}/30", "dev", NS_IF)
            for dev in (NS_IF, "lo"):
                _sh("ip", "netns", "exec", NS, "ip", "link", "set", dev, "up")
            yield
        finally:
            _cleanup()


def connects_from_ns(addr: str, port: int) -> str:
    """Try a TCP connection from the namespace: 'connected', 'refused' or another error."""
    code = (
        "import socket,sys\n"
        "s=socket.socket(); s.settimeout(5)\n"
        "try:\n"
        f"    s.connect(({addr!r},{port})); print('connected')\n"
        "except ConnectionRefusedError: print('refused')\n"
        "except OSError as e: print(type(e).__name__)\n"
    )
    return _sh("ip", "netns", "exec", NS, sys.executable, "-c", code).stdout.strip()


def connects_here(addr: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex((addr, port)) == 0


def test_thrift_is_refused_from_another_namespace_and_open_on_the_host(links: None) -> None:
    # The path itself works: a listener on every address of the root namespace is reached.
    with socket.socket() as control:
        control.bind(("0.0.0.0", 0))
        control.listen(1)
        assert connects_from_ns(ROOT_ADDR, control.getsockname()[1]) == "connected"
    proc = LAB.spawn()
    try:
        listening = _sh("ss", "-Hltn", f"sport = :{THRIFT_PORT}").stdout
        assert listening.strip(), "the switch serves Thrift (else this test proves nothing)"
        assert THRIFT_PORT in thrift_guard.confined_ports()
        assert connects_from_ns(ROOT_ADDR, THRIFT_PORT) == "refused"
        # Processes of this host still reach it, on loopback and on the host's own address.
        assert connects_here("127.0.0.1", THRIFT_PORT)
        assert connects_here(ROOT_ADDR, THRIFT_PORT)
        cli = wire.cli_command()
        if cli is not None:  # the project's own use of Thrift: simple_switch_CLI here
            out = _sh(*cli, "--thrift-port", str(THRIFT_PORT), check=False)
            assert "Could not connect" not in out.stdout + out.stderr
    finally:
        bmv2.terminate(proc)
    assert THRIFT_PORT not in thrift_guard.confined_ports()


@dataclass
class TlsSwitch:
    pki: Pki
    config: Path


@pytest.fixture
def tls_switch(links: None, tmp_path: Path) -> Iterator[TlsSwitch]:
    if shutil.which("openssl") is None:
        pytest.skip("TLS tests skipped: missing openssl")
    if not support.have_artifacts():
        pytest.skip("dataplane layer skipped: missing p4src/compiled artifacts (make artifacts)")
    pki = make_pki(tmp_path / "pki", ["switch"])
    server = pki.servers["switch"]
    proc = LAB.spawn(
        out=tmp_path / "switch.out",
        grpc_args=bmv2.grpc_tls_args(pki.ca, server.cert, server.key),
    )
    cfg = support.CONFIG.replace(
        f'address = "127.0.0.1:{support.GRPC_PORT}"',
        f'address = "127.0.0.1:{GRPC_PORT}"\n'
        f'tls = {{ ca = "{pki.ca}", cert = "{pki.client.cert}", key = "{pki.client.key}" }}',
    )
    path = tmp_path / "lb.toml"
    path.write_text(cfg)
    try:
        yield TlsSwitch(pki, path)
    finally:
        bmv2.terminate(proc)


def test_p4runtime_over_tls_needs_a_certificate_of_our_ca(
    tls_switch: TlsSwitch, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{GRPC_PORT}"
    ca = str(tls_switch.pki.ca)
    # p4lb apply with the config's tls table programs the switch.
    assert p4lb_main(["-c", str(tls_switch.config), "apply"]) == 0
    cfg = reader.load(tls_switch.config)
    with operations.connect_reader(cfg) as sw:
        vips = [e for e in sw.read_entries(("vip_table",)) if e.table == "vip_table"]
        assert len(vips) == 2, "apply over TLS wrote both VIPs"
    # With the controller's certificate: a stream, primary.
    good = TlsSettings(ca, str(tls_switch.pki.client.cert), str(tls_switch.pki.client.key))
    with Switch(address, 0, 100, tls=good) as sw:
        assert sw.is_primary
    # No client certificate, one of another CA, or clear text: no stream at all.
    other = make_pki(tmp_path / "other", [])
    for tls in (
        TlsSettings(ca),
        TlsSettings(ca, str(other.client.cert), str(other.client.key)),
        None,
    ):
        with pytest.raises(SwitchError):
            Switch(address, 0, 200, tls=tls).close()
