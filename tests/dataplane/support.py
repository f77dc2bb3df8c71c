"""A real simple_switch_grpc on veth pairs (the lab of topology.wire), programmed by the
controller, with scapy on the host ends. Everything is stopped by the PID it started and
removed after."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import reader, writer
from p4lb.intent.model import Config
from p4lb.models.hashing import Flow, bucket_index
from p4lb.service import operations
from p4lb.switch.client import Switch
from tests.support import poll_until
from topology import bmv2, wire

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "p4src" / "compiled"
# Port 1: the client; 2..4: the backends. Ports apart from the benches' labs.
LAB = wire.VethLab("p4lbt", ports=4, grpc_port=29559, thrift_port=29090)
N_PORTS, GRPC_PORT, THRIFT_PORT = LAB.ports, LAB.grpc_port, LAB.thrift_port
SWITCH_MAC = "00:00:00:00:01:00"
VIP_MAC = "00:00:00:00:01:64"
VIP = "10.0.0.100"
# The web VIP's service id: the controller numbers VIPs from 1 in config order.
WEB_SERVICE_ID = 1


host_iface = LAB.host_if


def host_mac(port: int) -> str:
    return f"00:00:00:00:00:{port:02x}"


def host_ip(port: int) -> str:
    return f"10.0.0.{port}"


CONFIG = (
    f"""
[switch]
address = "127.0.0.1:{GRPC_PORT}"
device_id = 0
election_id = 10
mac = "{SWITCH_MAC}"

[[host]]
name = "client"
address = "10.0.0.1"
mac = "{host_mac(1)}"
switch_port = 1

[vip.web]
address = "{VIP}"
protocol = "tcp"
port = 80
algorithm = "wrr"
mac = "{VIP_MAC}"
"""
    + "".join(
        f"""
[[vip.web.backend]]
name = "s{p}"
address = "{host_ip(p)}"
port = 8000
weight = 1
mac = "{host_mac(p)}"
switch_port = {p}
"""
        for p in (2, 3, 4)
    )
    + f"""
[vip.dns]
address = "{VIP}"
protocol = "udp"
port = 53
algorithm = "iphash"
mac = "{VIP_MAC}"

[[vip.dns.backend]]
name = "d2"
address = "{host_ip(2)}"
port = 5353
weight = 1
mac = "{host_mac(2)}"
switch_port = 2

[[vip.dns.backend]]
name = "d3"
address = "{host_ip(3)}"
port = 5353
weight = 1
mac = "{host_mac(3)}"
switch_port = 3
"""
)


# IPv6 VIPs' tests: web6 at VIP6 over the IPv6 twins of the backends on ports 2..4, the
# client at CLIENT6 on port 1.
VIP6 = "2001:db8::100"
VIP6_MAC = "00:00:00:00:01:66"
CLIENT6 = "2001:db8::1"


def backend6(port: int) -> str:
    return f"2001:db8::{port}"


def config6(algorithm: str) -> str:
    """CONFIG with the IPv6 client and the IPv6 VIP web6 (TCP port 80, `algorithm`)."""
    return (
        CONFIG
        + f"""
[[host]]
name = "client6"
address = "{CLIENT6}"
mac = "{host_mac(1)}"
switch_port = 1

[vip.web6]
address = "{VIP6}"
protocol = "tcp"
port = 80
algorithm = "{algorithm}"
mac = "{VIP6_MAC}"
"""
        + "".join(
            f"""
[[vip.web6.backend]]
name = "s{p}"
address = "{backend6(p)}"
port = 8000
mac = "{host_mac(p)}"
switch_port = {p}
"""
            for p in (2, 3, 4)
        )
    )


@dataclass
class Bmv2:
    """The lab's switch running our pipeline with a config applied (`running`)."""

    proc: subprocess.Popen[bytes]
    log: Path
    cfg: Config
    sw: Switch
    cfg_path: Path
    priority_queues: int = 0

    def apply(self, cfg: Config) -> operations.ApplyResult:
        self.cfg = cfg
        writer.save(cfg, self.cfg_path)
        return operations.apply(self.sw, cfg)

    def restart(self) -> None:
        """Stop the switch (by its PID) and start an empty one on the same veths."""
        bmv2.terminate(self.proc)
        self.proc = _spawn(self.log, self.priority_queues)

    def counter(self, name: str, index: int) -> int:
        cell = self.sw.read_counter(name).get(index)
        return cell.packets if cell else 0

    def register(self, name: str, index: int) -> int:
        """One cell of a P4 register, read over Thrift (P4Runtime cannot read registers
        on BMv2): the per-backend load the LEAST* algorithms compare."""
        if wire.cli_command() is None:
            pytest.skip("register reads skipped: simple_switch_CLI with Python thrift missing")
        return wire.register_read(LAB.thrift_port, name, index)

    def wait_counter(self, name: str, index: int, at_least: int, timeout: float = 3.0) -> int:
        """Poll a counter until it reaches `at_least` (the switch processed the packet)."""
        poll_until(lambda: self.counter(name, index) >= at_least, timeout, every=0.02)
        return self.counter(name, index)


def _spawn(log: Path, priority_queues: int) -> subprocess.Popen[bytes]:
    return LAB.spawn(log_file=log.with_name("bmv2"), out=log, priority_queues=priority_queues)


@contextmanager
def running(workdir: Path, config: str = CONFIG, priority_queues: int = 0) -> Iterator[Bmv2]:
    """The lab's veths and switch, our pipeline and `config` applied; the switch's log and
    config in `workdir` (a test's tmp_path: pytest keeps the last few runs' and removes
    older ones). The switch is stopped by its PID and the veths removed at the end. Skips
    the test without the compiled program."""
    if not have_artifacts():
        pytest.skip("dataplane layer skipped: missing p4src/compiled artifacts (make artifacts)")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "switch.log"
    cfg_path = workdir / "lb.toml"
    cfg_path.write_text(config)
    cfg = reader.load(cfg_path)
    with LAB.veths():
        proc = _spawn(log, priority_queues)
        try:
            sw = operations.connect(cfg)
        except BaseException:
            bmv2.terminate(proc)
            raise
        b = Bmv2(proc, log, cfg, sw, cfg_path, priority_queues)
        try:
            operations.apply(sw, cfg)
            yield b
        finally:
            sw.close()
            bmv2.terminate(b.proc)  # the one running now (restart starts another)


class Wire:
    """Send on one host port, collect what comes out of every host port."""

    def __init__(self) -> None:
        from scapy.config import conf
        from scapy.sendrecv import AsyncSniffer

        conf.verb = 0
        conf.ifaces.reload()  # each test makes new veths: scapy caches interface indexes
        self.got: list[tuple[int, bytes]] = []
        ifaces = LAB.host_ifs()

        def keep(pkt: Any) -> None:
            self.got.append((ifaces[pkt.sniffed_on], bytes(pkt)))

        # scapy sets `running` before it opens the capture sockets; only started_callback
        # says they are open, so nothing sent after this is missed.
        ready = threading.Event()
        self.sniffer = AsyncSniffer(
            iface=list(ifaces),
            prn=keep,
            store=False,
            started_callback=ready.set,
            # L2Socket, unlike the default listen socket, skips frames we send ourselves
            # (PACKET_OUTGOING), so a flooded copy equal to the request still counts.
            L2socket=conf.L2socket,
        )
        self.sniffer.start()
        if not ready.wait(10):
            self.sniffer.stop()
            raise TimeoutError("scapy's sniffer did not open the veths within 10 s")

    def send(self, port: int, pkt: Any) -> None:
        from scapy.sendrecv import sendp

        sendp(bytes(pkt), iface=host_iface(port))

    def send_all(self, port: int, pkts: list[Any]) -> None:
        """Send `pkts` in order, back to back (one socket for all)."""
        from scapy.sendrecv import sendp

        sendp([bytes(p) for p in pkts], iface=host_iface(port))

    def expect(
        self, n: int, timeout: float = 2.0, where: Callable[[int, bytes], bool] | None = None
    ) -> list[tuple[int, bytes]]:
        """Wait (bounded) until n packets matching `where` came out; return them."""

        def hits() -> list[tuple[int, bytes]]:
            return [g for g in self.got if where is None or where(*g)]

        poll_until(lambda: len(hits()) >= n, timeout)
        return hits()

    def clear(self) -> None:
        self.got.clear()

    def close(self) -> None:
        self.sniffer.stop()


SENTINEL_IP = "10.0.0.254"  # an ARP request for it is flooded to every port but port 1


@contextmanager
def flushed_wire() -> Iterator[Wire]:
    """A wire on the lab's ports once everything an earlier test sent has come out (for a
    switch a module shares), closed at the end."""
    w = Wire()
    try:
        flush(w)
        w.clear()
        yield w
    finally:
        w.close()


def flush(wire: Wire) -> None:
    """Wait (bounded) until everything the switch took in before now has come out: an ARP
    request sent on port 1 after it is flooded to ports 2..N_PORTS, and each port's copy
    leaves behind what was queued for that port. The copies are then forgotten."""
    from scapy.layers.l2 import ARP, Ether

    def sentinel(port: int, raw: bytes) -> bool:
        pkt = Ether(raw)
        return ARP in pkt and pkt[ARP].pdst == SENTINEL_IP

    wire.send(
        1,
        Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff")
        / ARP(op=1, hwsrc=host_mac(1), psrc=host_ip(1), pdst=SENTINEL_IP),
    )
    got = wire.expect(N_PORTS - 1, timeout=5.0, where=sentinel)  # bounded; 5 s when busy
    assert sorted(p for p, _ in got) == list(range(2, N_PORTS + 1)), got
    wire.got[:] = [g for g in wire.got if not sentinel(*g)]


def backend_of(wire: Wire, sport: int) -> int:
    """The port the client's TCP packet from `sport` came out of, asserting it came out
    exactly once (and not back to the client): every copy is counted, a late one included,
    up to a sentinel sent after it (flush)."""
    from scapy.layers.inet import TCP
    from scapy.layers.l2 import Ether

    flush(wire)
    got = [
        (port, raw)
        for port, raw in wire.got
        if TCP in Ether(raw) and Ether(raw)[TCP].sport == sport and port != 1
    ]
    assert len(got) == 1, f"packet from port {sport} came out {len(got)} times"
    return got[0][0]


def have_artifacts() -> bool:
    return (COMPILED / "lb.json").exists() and (COMPILED / "lb.p4info.txtpb").exists()


def is_root() -> bool:
    return os.geteuid() == 0


def sharing_a_bucket(n: int, flows: Iterable[Flow]) -> list[Flow]:
    """The first `n` of `flows` whose connection state shares one bucket (4 ways: the
    fifth finds it full)."""
    seen: dict[int, list[Flow]] = {}
    for f in flows:
        same = seen.setdefault(bucket_index(f), [])
        same.append(f)
        if len(same) == n:
            return same
    raise AssertionError(f"no {n} flows share a bucket")


def same_bucket_flows(n: int) -> list[Flow]:
    """`n` client flows to the web VIP that share one bucket."""
    return sharing_a_bucket(
        n,
        (
            Flow(f"10.0.1.{host}", VIP, 6, sport, 80, WEB_SERVICE_ID)
            for host in range(2, 250)
            for sport in range(20000, 60000)
        ),
    )


def same_bucket_flows6(n: int, service_id: int, net: str = "2001:db8:1::") -> list[Flow]:
    """`n` IPv6 client flows (from `net`) to web6 that share one bucket."""
    return sharing_a_bucket(
        n,
        (
            Flow(f"{net}{host:x}", VIP6, 6, sport, 80, service_id)
            for host in range(2, 4000)
            for sport in range(20000, 20400)
        ),
    )


def drop_reasons() -> dict[str, int]:
    """DropReason names and codes, from the committed P4Info."""
    from p4lb.pipeline.p4info import schema

    return {name: code for code, name in schema().drop_reasons().items()}


def flow_syn(f: Flow, flags: str = "S") -> Any:
    """A TCP packet of flow `f` from the client port."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    return (
        Ether(src=host_mac(1), dst=VIP_MAC)
        / IP(src=f.src, dst=f.dst)
        / TCP(sport=f.sport, dport=f.dport, flags=flags)
    )
