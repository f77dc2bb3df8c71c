"""How the checker probes a backend: in this process (`tcp_probe`), or as a subprocess inside
a network namespace (`SubprocessProbe`, running `python -m p4lb.service.health.socket_probe`).
A probe is any callable Target -> ProbeResult, so tests plug in their own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
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


def default_probe(target: Target) -> ProbeResult:
    """In-process without a namespace, a subprocess inside one."""
    if target.settings.namespace:
        return SubprocessProbe()(target)
    return tcp_probe(target)
