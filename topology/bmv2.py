"""BMv2's simple_switch_grpc as every lab starts it: its command line (`command`: for the
Mininet switch Bmv2Switch, which needs no Open vSwitch; the tier's balancers; the veth lab
of the packet tests and benchmarks, topology.wire), its stop by PID, and a bounded wait
until it listens."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.node import Switch

from topology import thrift_guard
from topology.procs import poll_until

GRPC_PORT = 9559
THRIFT_PORT = 9090


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_listening(port: int, timeout_s: float, what: str = "simple_switch_grpc") -> None:
    """Bounded wait until something accepts TCP connections on 127.0.0.1:port."""
    if not poll_until(lambda: listening(port), timeout_s, every=0.05):
        raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s")


def switch_binary() -> str:
    """The simple_switch_grpc to run: $P4LB_SIMPLE_SWITCH (e.g. BMv2's speed build in its
    own prefix), else the one on PATH."""
    return (
        os.environ.get("P4LB_SIMPLE_SWITCH")
        or shutil.which("simple_switch_grpc")
        or "simple_switch_grpc"
    )


def log_args(log_file: Path | None) -> list[str]:
    """BMv2's logging flags. Without a log file BMv2 still formats every trace message at
    its default level 'trace' and throws it away, which took over half of the switch's
    time per packet here; level 'off' skips the formatting. (behavioral-model's
    docs/performance.md removes the cost at build time with --disable-logging-macros;
    p4lang's packages keep the macros, so the level is the knob users have.)"""
    if log_file is None:
        return ["--log-level", "off"]
    return ["--log-file", str(log_file), "--log-flush"]


def command(
    ports: dict[int, str],
    grpc_port: int,
    thrift_port: int,
    *,
    device_id: int = 0,
    binary: str | None = None,
    program: Path | None = None,
    log_file: Path | None = None,
    grpc_args: Sequence[str] = (),
    priority_queues: int = 0,
) -> list[str]:
    """simple_switch_grpc's command line: `ports` (number: interface); the compiled
    `program` (BMv2 JSON) loaded at start, else none until P4Runtime pushes one; P4Runtime
    on 127.0.0.1:grpc_port with `grpc_args` (TLS: grpc_tls_args); Thrift on thrift_port;
    `priority_queues` egress queues per port (queue_args)."""
    args = [binary or switch_binary(), "--device-id", str(device_id)]
    args += ["--thrift-port", str(thrift_port), *log_args(log_file)]
    for port, intf in sorted(ports.items()):
        args += ["-i", f"{port}@{intf}"]
    args += [str(program)] if program else ["--no-p4"]
    args += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", *grpc_args]
    return args + queue_args(priority_queues)


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """Stop a switch we started, by its PID (bounded), and lift its Thrift port's guard."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    port = thrift_guard.thrift_port_of([str(a) for a in proc.args])  # type: ignore[union-attr]
    if port is not None:
        thrift_guard.release(port)


def queue_args(priority_queues: int) -> list[str]:
    """simple_switch_grpc's own option (after `--`) for `priority_queues` egress queues per
    port (0: its default, one). The QoS disciplines that put sparse flows first need 2 or
    more; v1model's 3-bit priority addresses 8."""
    return ["--priority-queues", str(priority_queues)] if priority_queues else []


def grpc_tls_args(ca: Path, cert: Path, key: Path, client_auth: bool = True) -> list[str]:
    """BMv2's gRPC server options for TLS with `cert`/`key`; with client_auth, only clients
    presenting a certificate signed by `ca` may connect."""
    args = ["--grpc-server-ssl", "--grpc-server-cacert", str(ca)]
    args += ["--grpc-server-cert", str(cert), "--grpc-server-key", str(key)]
    return args + (["--grpc-server-with-client-auth"] if client_auth else [])


class Bmv2Switch(Switch):  # type: ignore[misc]
    """Starts simple_switch_grpc with the switch's Mininet interfaces as ports 1..n.

    P4Runtime listens on 127.0.0.1 only (with `grpc_args`, e.g. TLS and client
    certificates); Thrift is reachable from this host only while the switch runs
    (topology.thrift_guard); the pipeline is pushed by `p4lb apply`. Logging is off unless
    `log_dir` is given (BMv2 logging costs a large share of its speed)."""

    def __init__(
        self,
        name: str,
        grpc_port: int = GRPC_PORT,
        thrift_port: int = THRIFT_PORT,
        log_dir: str | None = None,
        binary: str | None = None,
        grpc_args: list[str] | None = None,
        priority_queues: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, **kwargs)
        self.grpc_args = grpc_args or []
        self.priority_queues = priority_queues
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.log_dir = log_dir
        self.binary = binary or switch_binary()
        self.switch_pid: int | None = None

    def start(self, controllers: list[Any]) -> None:
        ports = {p: intf.name for p, intf in self.intfs.items() if intf.name != "lo"}
        if self.log_dir:
            Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        args = command(
            ports,
            self.grpc_port,
            self.thrift_port,
            binary=self.binary,
            log_file=Path(self.log_dir) / self.name if self.log_dir else None,
            grpc_args=self.grpc_args,
            priority_queues=self.priority_queues,
        )
        out = f"{self.log_dir}/{self.name}.out" if self.log_dir else "/dev/null"
        thrift_guard.confine(self.thrift_port)
        self.switch_pid = int(
            self.cmd(" ".join(args) + f" > {out} 2>&1 & echo $!").strip().split()[-1]
        )
        wait_listening(self.grpc_port, 20.0, self.binary)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        if self.switch_pid is not None:
            self.cmd(f"kill {self.switch_pid}")
            # Bounded wait: 200 x 50 ms.
            self.cmd(
                f"for i in $(seq 200); do kill -0 {self.switch_pid} 2>/dev/null || break; "
                "sleep 0.05; done"
            )
            self.switch_pid = None
        thrift_guard.release(self.thrift_port)
        super().stop(deleteIntfs)
