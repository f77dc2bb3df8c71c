"""How the checker probes a backend: in this process (`tcp_probe`), from inside a network
namespace in this process too (`namespace_probe`: the probing thread enters it with setns(2)
and comes back), or as a subprocess inside one (`SubprocessProbe`, running `python -m
p4lb.service.health.socket_probe`). A probe is any callable Target -> ProbeResult, so tests
plug in their own."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from p4lb.service.health.socket_probe import probe as _socket_probe
from p4lb.service.health.state import ProbeResult, Target

Probe = Callable[[Target], ProbeResult]


def tcp_probe(target: Target) -> ProbeResult:
    """Probe from this process's network namespace."""
    s = target.settings
    ok, reason = _socket_probe(target.address, target.port, s.timeout_s, s.http_path, s.http_status)
    return ProbeResult(ok, reason)


def namespace_prefix(namespace: str) -> list[str]:
    """The command that runs a program inside `namespace` ("" = here)."""
    if not namespace:
        return []
    if namespace.startswith("/"):
        return ["nsenter", f"--net={namespace}"]
    return ["ip", "netns", "exec", namespace]


# Starting the interpreter and entering a namespace takes time the probe's own deadline does
# not cover; past timeout_s plus this the process is killed and the probe fails.
SUBPROCESS_GRACE_S = 2.0


@dataclass(frozen=True)
class SubprocessProbe:
    """Runs `python -m p4lb.service.health.socket_probe`, in the target's namespace if it
    names one."""

    python: str = sys.executable

    def command(self, target: Target) -> list[str]:
        s = target.settings
        cmd = [
            *namespace_prefix(s.namespace.replace("{backend}", target.backend)),
            self.python,
            "-m",
            "p4lb.service.health.socket_probe",
            target.address,
            str(target.port),
        ]
        if s.http_path:
            cmd += [s.http_path, str(s.http_status)]
        return [*cmd, "--timeout", f"{s.timeout_s:g}"]

    def __call__(self, target: Target) -> ProbeResult:
        try:
            done = subprocess.run(
                self.command(target),
                capture_output=True,
                text=True,
                timeout=target.settings.timeout_s + SUBPROCESS_GRACE_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return ProbeResult(False, "probe process did not finish in time")
        except OSError as e:
            return ProbeResult(False, f"cannot run the probe: {e.strerror or e}")
        lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
        reason = lines[-1] if lines else f"probe exited {done.returncode}"
        if done.returncode in (0, 1):
            return ProbeResult(done.returncode == 0, reason)
        return ProbeResult(False, f"probe failed (exit {done.returncode}): {reason}")


CLONE_NEWNET = 0x40000000


def namespace_path(namespace: str) -> str:
    """The file of a network namespace: a path as it is, a name under /run/netns."""
    return namespace if namespace.startswith("/") else f"/run/netns/{namespace}"


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def inside(namespace: str) -> Iterator[None]:
    """The calling thread inside `namespace`'s network namespace for the block (setns(2)
    moves one thread, not the process), back in its own after. Needs CAP_SYS_ADMIN, as
    `ip netns exec` does. Sockets opened inside stay in that namespace."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        there = os.open(namespace_path(namespace), os.O_RDONLY)
        try:
            _setns(there)
        finally:
            os.close(there)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def namespace_probe(target: Target) -> ProbeResult:
    """`tcp_probe` from inside the target's namespace, in this process: no interpreter to
    start per probe, which on a loaded machine took longer than the probe's deadline and
    took healthy backends DOWN (`make bench-tier`: a probe process not done in 2.5 s)."""
    ns = target.settings.namespace.replace("{backend}", target.backend)
    try:
        with inside(ns):
            return tcp_probe(target)
    except OSError as e:
        return ProbeResult(False, f"cannot enter namespace {ns}: {e.strerror or e}")


def default_probe(target: Target) -> ProbeResult:
    """In this process: from here without a namespace, from inside it with one."""
    if target.settings.namespace:
        return namespace_probe(target)
    return tcp_probe(target)
