"""The veth+BMv2 lab the packet tests and the switch benches share: veth pairs numbered by
switch port (PREFIX-hN the host's end, PREFIX-sN the switch's), a simple_switch_grpc on the
switch's ends (topology.bmv2), BMv2's Thrift CLI, and the host ends' packet counters. Each
lab has its own prefix and ports, so two run side by side; a lab removes what it made: its
veths, and its switch by the PID it started."""

from __future__ import annotations

import fcntl
import functools
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from topology import bmv2, thrift_guard

# Each lab's lock while a run holds its veths (released when that run ends, or dies).
LOCKS = Path("/run/p4lb")


@dataclass(frozen=True)
class VethLab:
    """Ports 1..`ports`, each a veth pair; the switch's P4Runtime and Thrift ports."""

    prefix: str
    ports: int
    grpc_port: int
    thrift_port: int

    def host_if(self, port: int) -> str:
        return f"{self.prefix}-h{port}"

    def switch_if(self, port: int) -> str:
        return f"{self.prefix}-s{port}"

    def host_ifs(self) -> dict[str, int]:
        """The host ends, each with its port."""
        return {self.host_if(p): p for p in range(1, self.ports + 1)}

    @contextmanager
    def veths(self) -> Iterator[None]:
        """The veth pairs, up, IPv6 off (no stray router solicitations); any a run killed
        hard left behind are removed first, and all at the end. A lab another run holds
        (its lock in LOCKS), or whose switch still runs, is refused, not taken over."""
        LOCKS.mkdir(parents=True, exist_ok=True)
        with open(LOCKS / f"lab-{self.prefix}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeError(f"the {self.prefix} lab is in use by another run") from None
            if _listening(self.grpc_port):
                raise RuntimeError(
                    f"the {self.prefix} lab's port 127.0.0.1:{self.grpc_port} is taken (a "
                    "switch of an earlier run still running?)"
                )
            self.remove_veths()
            try:
                for p in range(1, self.ports + 1):
                    h, s = self.host_if(p), self.switch_if(p)
                    _run("ip", "link", "add", h, "type", "veth", "peer", "name", s)
                    for ifc in (h, s):
                        _run("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1")
                        _run("ip", "link", "set", ifc, "up")
                yield
            finally:
                self.remove_veths()

    def remove_veths(self) -> None:
        for h in self.host_ifs():
            if Path(f"/sys/class/net/{h}").exists():
                subprocess.run(["ip", "link", "del", h], capture_output=True)

    def spawn(
        self,
        *,
        binary: str | None = None,
        program: Path | None = None,
        log_file: Path | None = None,
        out: Path | None = None,
        wrap: Sequence[str] = (),
        grpc_args: Sequence[str] = (),
        priority_queues: int = 0,
    ) -> subprocess.Popen[bytes]:
        """simple_switch_grpc on the switch's ends (topology.bmv2.command): `program` (BMv2
        JSON) loaded at start, else empty until P4Runtime pushes one; run under `wrap` if
        given (valgrind: the PID stays the switch's, and it gets longer to listen). Its
        Thrift port is reachable from this host only (topology.thrift_guard). Returns once
        gRPC and Thrift listen; stopped with topology.bmv2.terminate."""
        ports = {p: self.switch_if(p) for p in range(1, self.ports + 1)}
        args = bmv2.command(
            ports,
            self.grpc_port,
            self.thrift_port,
            binary=binary,
            program=program,
            log_file=log_file,
            grpc_args=grpc_args,
            priority_queues=priority_queues,
        )
        thrift_guard.confine(self.thrift_port)
        try:
            with open(out or "/dev/null", "wb") as sink:
                proc = subprocess.Popen([*wrap, *args], stdout=sink, stderr=subprocess.STDOUT)
        except BaseException:
            thrift_guard.release(self.thrift_port)
            raise
        try:
            for port in (self.grpc_port, self.thrift_port):
                bmv2.wait_listening(port, 120.0 if wrap else 20.0)
        except BaseException:
            bmv2.terminate(proc)
            raise
        return proc

    @contextmanager
    def switch(
        self,
        *,
        binary: str | None = None,
        program: Path | None = None,
        log_file: Path | None = None,
        out: Path | None = None,
        wrap: Sequence[str] = (),
    ) -> Iterator[subprocess.Popen[bytes]]:
        """`spawn`'s switch, stopped by its PID at the end."""
        proc = self.spawn(binary=binary, program=program, log_file=log_file, out=out, wrap=wrap)
        try:
            yield proc
        finally:
            bmv2.terminate(proc)

    def thrift(self, cmds: list[str]) -> str:
        """simple_switch_CLI commands against this lab's switch (thrift_cli)."""
        return thrift_cli(self.thrift_port, cmds)

    def rx_packets(self) -> int:
        """Packets the host ends received so far: what came out of the switch."""
        return sum(
            int(Path(f"/sys/class/net/{h}/statistics/rx_packets").read_text())
            for h in self.host_ifs()
        )


@functools.cache
def cli_command() -> list[str] | None:
    """simple_switch_CLI and a Python that runs it (BMv2 installs its Thrift modules for
    the system's Python, maybe not for ours); None if there is none."""
    cli = shutil.which("simple_switch_CLI")
    if cli is None:
        return None
    for py in (sys.executable, "/usr/bin/python3"):
        probe = [py, "-c", "import thrift, bmpy_utils"]
        if Path(py).exists() and subprocess.run(probe, capture_output=True).returncode == 0:
            return [py, cli]
    return None


def thrift_cli(thrift_port: int, cmds: list[str]) -> str:
    """Run simple_switch_CLI commands against the switch on 127.0.0.1:thrift_port; its
    output. A missing CLI, a failed run or an error in the output raises."""
    cli = cli_command()
    if cli is None:
        raise RuntimeError("simple_switch_CLI (with Python's thrift modules) is not installed")
    r = subprocess.run(
        [*cli, "--thrift-port", str(thrift_port)],
        input="\n".join(cmds) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0 or "Error" in r.stdout:
        raise RuntimeError(f"simple_switch_CLI failed: {r.stdout[-300:]} {r.stderr[-300:]}")
    return r.stdout


def register_read(thrift_port: int, name: str, index: int) -> int:
    """One cell of a P4 register, read over Thrift (P4Runtime cannot read registers on
    BMv2); a cell the CLI did not print raises."""
    out = thrift_cli(thrift_port, [f"register_read {name} {index}"])
    found = re.search(rf"{re.escape(name)}\[{index}\]\s*=\s*(\d+)", out)
    if found is None:
        raise RuntimeError(f"register_read {name} {index}: no value in {out[-200:]!r}")
    return int(found.group(1))


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)
