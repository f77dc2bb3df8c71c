"""What every results file says about how it was measured: when, on which code and tools,
on which machine, how loaded it was, and how many repetitions ran in which order.

`start(...)` refuses a machine whose other processes use more than P4LB_MAX_OTHER_CPU of
the CPU (default 0.25; P4LB_ALLOW_BUSY=1 marks the file busy instead) and samples the load
until `Run.finish()` returns the `provenance` block."""

from __future__ import annotations

import contextlib
import os
import platform
import random
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench import toolchain
from bench.outdir import ROOT

STAMP = ROOT / "p4src" / "compiled" / "SOURCES.sha256"
MAX_OTHER_CPU_DEFAULT = 0.25
SAMPLE_S = 1.0  # the sampler's period
PROBE_S = 2.0  # how long the machine is watched before a run may start
# Where scripts/build-from-source.sh keeps its build trees (each with .p4lb-configure).
SOURCE_DIRS = ("/usr/local/src/p4lb", "/opt/p4lb-src")
NOT_RECORDED = "not recorded"


class BusyMachine(RuntimeError):
    """Other processes use more of the CPU than a measurement allows."""


# ---------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class Sample:
    """One reading: the machine's busy and total CPU seconds, and each of our processes'."""

    busy: float
    total: float
    ours: dict[int, float]  # pid -> CPU seconds, our process tree (and adopted daemons)
    reaped: float = 0.0  # CPU seconds of our children that ended and were waited for


def other_share(a: Sample, b: Sample) -> float:
    """Share of all cores (0..1) that processes other than ours kept busy between two
    samples. One of ours that ended in between counts as ours through the children's time
    the kernel keeps once it is waited for (less what the first sample had already seen of
    the processes gone since); one not waited for (a grandchild, an adopted daemon) counts
    as others' (the safe side)."""
    total = b.total - a.total
    if total <= 0:
        return 0.0
    ours = sum(
        t - a.ours[pid] if pid in a.ours else min(t, total)
        for pid, t in b.ours.items()
        if t >= a.ours.get(pid, 0)
    )
    gone = sum(t for pid, t in a.ours.items() if pid not in b.ours)
    ours += max(0.0, b.reaped - a.reaped - gone)
    return max(0.0, min(1.0, ((b.busy - a.busy) - ours) / total))


def load_verdict(share: float, limit: float, allow_busy: bool) -> tuple[bool, str | None]:
    """(may start, marker): above `limit` refused, or with `allow_busy` started and marked."""
    if share <= limit:
        return True, None
    text = f"other processes used {share:.0%} of the CPU (limit {limit:.0%})"
    return (True, f"BUSY: {text}") if allow_busy else (False, text)


def max_other_cpu(env: dict[str, str] | None = None) -> float:
    """The limit from P4LB_MAX_OTHER_CPU (a fraction, or a percentage with %)."""
    raw = (env if env is not None else os.environ).get("P4LB_MAX_OTHER_CPU", "")
    if not raw:
        return MAX_OTHER_CPU_DEFAULT
    try:
        value = float(raw.rstrip("%")) / (100 if raw.endswith("%") else 1)
    except ValueError as e:
        raise ValueError(f"P4LB_MAX_OTHER_CPU={raw!r}: want a fraction (0.25) or 25%") from e
    if not 0 <= value <= 1:
        raise ValueError(f"P4LB_MAX_OTHER_CPU={raw!r}: want 0..1 (or 0%..100%)")
    return value


def configure_flags(stamp_text: str) -> tuple[str, list[str]]:
    """(prefix, configure arguments) from a .p4lb-configure stamp ("PREFIX ARG ...")."""
    words = stamp_text.strip().split(" ")
    return words[0], words[1:]


def configure_from_log(log_text: str) -> list[str] | None:
    """The configure arguments but --prefix, quoting kept, from autoconf's config.log."""
    for line in log_text.splitlines()[:40]:
        if line.startswith("  $ ") and "configure" in line:
            words = shlex.split(line[4:])
            return [w for w in words[1:] if not w.startswith("--prefix=")]
    return None


def build_kind(flags: list[str] | None) -> str:
    """speed (no logging macros), standard, or unknown (flags not recovered)."""
    if flags is None:
        return "unknown"
    return "speed" if "--disable-logging-macros" in flags else "standard"


def summarize_load(shares: list[float]) -> dict[str, Any]:
    if not shares:
        return {"samples": 0}
    s = sorted(shares)
    return {
        "samples": len(s),
        "other_cpu_median": s[len(s) // 2],
        "other_cpu_max": s[-1],
        "other_cpu_mean": sum(s) / len(s),
    }


def interleaved(variants: list[str], reps: int, seed: int, salt: str = "") -> list[list[str]]:
    """Each repetition's order of `variants`, shuffled by a generator seeded with `seed` and
    `salt` (a build's name), so a run can be replayed."""
    rng = random.Random(f"{seed}/{salt}")
    out = []
    for _ in range(reps):
        order = list(variants)
        rng.shuffle(order)
        out.append(order)
    return out


# ---------------------------------------------------------------- the machine


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _out(cmd: list[str], timeout: float = 15) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout or r.stderr).strip() or None


def version_line(cmd: list[str]) -> str | None:
    """The first line a tool says of its version (`cmd`: [binary, "--version"]), or None."""
    text = _out(cmd)
    return text.splitlines()[0] if text else None


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """The commit, and whether the code (not results/, the benches' output) differs from it."""
    commit = _out(["git", "-C", str(root), "rev-parse", "HEAD"])
    status = _out(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "."]
        + [":(exclude)results"]
    )
    return {"commit": commit or "unknown", "dirty": bool(status)}


def p4_stamp(path: Path = STAMP) -> dict[str, str]:
    """The committed P4 sources' SHA-256 and the p4c that compiled them (SOURCES.sha256)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {"sources_sha256": "unknown", "compiled_by": "unknown"}
    return {
        "sources_sha256": lines[0].split()[0] if lines else "unknown",
        "compiled_by": lines[1].strip() if len(lines) > 1 else NOT_RECORDED,
    }


def bmv2_build(binary: str, source_dirs: tuple[str, ...] = SOURCE_DIRS) -> dict[str, Any]:
    """A simple_switch_grpc's version and, where the source route built it, its configure flags."""
    path = Path(binary)
    info: dict[str, Any] = {"path": str(path), "version": _out([str(path), "--version"])}
    prefix = str(path.resolve().parent.parent)
    dirs = [os.environ.get("P4LB_SRC_DIR", ""), *source_dirs]
    for d in filter(None, dirs):
        for stamp in sorted(Path(d).glob("build/*/.p4lb-configure")):
            with contextlib.suppress(OSError):
                p, flags = configure_flags(stamp.read_text())
                if p == prefix and stamp.parent.name.startswith("bmv2"):
                    log = stamp.parent / "config.log"
                    exact = configure_from_log(log.read_text()) if log.exists() else None
                    flags = exact or flags
                    return info | {
                        "configure": flags,
                        "configure_from": str(log if exact else stamp),
                        "kind": build_kind(flags),
                    }
    return info | {
        "configure": "unknown",
        "configure_from": f"no .p4lb-configure for prefix {prefix} under {', '.join(dirs[1:])}",
        "kind": build_kind(None),
    }


def proc_field(path: str, pattern: str) -> str | None:
    """The first group of `pattern` in /proc file `path`, None if absent."""
    with contextlib.suppress(OSError):
        if m := re.search(pattern, Path(path).read_text(), re.M):
            return m.group(1).strip()
    return None


def machine() -> dict[str, Any]:
    mem_kib = int(proc_field("/proc/meminfo", r"^MemTotal:\s+(\d+)") or 0)
    return {
        "cores": os.cpu_count(),
        "cpu": proc_field("/proc/cpuinfo", r"^model name\s*:\s*(.+)$") or "unknown",
        "memory_gib": round(mem_kib / 1024**2, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def sample(*adopted: int) -> Sample:
    """The machine's and this process tree's (and `adopted`'s and their children's) CPU
    seconds now (idle and iowait are not busy; guest time is inside user and nice)."""
    t = psutil.cpu_times()
    total = sum(t[:8])
    ours: dict[int, float] = {}
    for root in (os.getpid(), *adopted):
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(root)
            for proc in (top, *top.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    ours[proc.pid] = sum(proc.cpu_times()[:2])
    mine = os.times()
    return Sample(total - t.idle - t.iowait, total, ours, mine.children_user + mine.children_system)


def busiest_others(n: int = 4) -> list[str]:
    """The processes using most CPU right now, for the record."""
    text = _out(["ps", "-eo", "pcpu,pid,args", "--sort=-pcpu"]) or ""
    me = os.getpid()
    rows = []
    for line in text.splitlines()[1:]:
        parts = line.split(None, 2)
        if len(parts) == 3 and int(parts[1]) != me:
            rows.append(f"{parts[0]} % {parts[2][:100]}")
    return rows[:n]


# ---------------------------------------------------------------- a run


@dataclass
class Run:
    """A bench's run: the facts collected at its start, the load sampled while it runs."""

    bench: str
    argv: list[str]
    facts: dict[str, Any]
    limit: float
    marker: str | None = None
    shares: list[float] = field(default_factory=list)
    adopted: list[Callable[[], Iterable[int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _ours(self) -> set[int]:
        pids: set[int] = set()
        for source in self.adopted:
            with contextlib.suppress(RuntimeError):  # its dict changed while read: next time
                pids |= set(source())
        return pids

    def _loop(self) -> None:
        """A share every SAMPLE_S, and one for the time since the last when the run ends (a
        run shorter than SAMPLE_S has one)."""
        last, stopped = sample(*self._ours()), False
        while not stopped:
            stopped = self._stop.wait(SAMPLE_S)
            now = sample(*self._ours())
            self.shares.append(other_share(last, now))
            last = now

    def adopt(self, pids: Callable[[], Iterable[int]]) -> None:
        """Count the processes `pids()` names (asked at every sample) and their children as
        the run's own: daemons it started that left its tree (FRR's)."""
        self.adopted.append(pids)

    def finish(
        self, reps: int | dict[str, int], order: str | None = None, **more: Any
    ) -> dict[str, Any]:
        """The provenance block: facts, load while running, repetitions and their order."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        load = summarize_load(self.shares)
        load |= {"limit": self.limit, "busiest_at_end": busiest_others()}
        if self.marker or any(s > self.limit for s in self.shares):
            load["marker"] = self.marker or (
                f"BUSY during the run: other processes peaked at {max(self.shares):.0%} "
                f"of the CPU (limit {self.limit:.0%})"
            )
        return (
            self.facts
            | {
                "finished": now(),
                "load": load,
                "repetitions": reps,
                "order": order or NOT_RECORDED,
            }
            | more
        )


def collect(
    bench: str, binaries: dict[str, str] | None = None, argv: list[str] | None = None
) -> dict[str, Any]:
    """The facts of a run that do not depend on the load: when, which code, tools, machine."""
    return {
        "bench": bench,
        "started": now(),
        "command": shlex.join(argv if argv is not None else []),
        "git": git_state(),
        "p4_stamp": p4_stamp(),
        "p4c": toolchain.tool_version(toolchain.p4c()) or "missing",
        "bmv2": {name: bmv2_build(path) for name, path in (binaries or {}).items()},
        "machine": machine(),
    }


def start(
    bench: str,
    binaries: dict[str, str] | None = None,
    argv: list[str] | None = None,
    probe_s: float = PROBE_S,
) -> Run:
    """Collect the facts, watch the machine for `probe_s`, refuse (BusyMachine) or mark a
    busy start, then sample the load in a thread until `finish()`."""
    limit = max_other_cpu()
    allow = os.environ.get("P4LB_ALLOW_BUSY", "") not in ("", "0")
    a = sample()
    time.sleep(probe_s)
    b = sample()
    share = other_share(a, b)
    ok, marker = load_verdict(share, limit, allow)
    if not ok:
        raise BusyMachine(
            f"{bench}: {marker}; {'; '.join(busiest_others(3))}. Wait, or set "
            "P4LB_ALLOW_BUSY=1 to measure anyway (the results file will say so)"
        )
    facts = collect(bench, binaries, argv) | {
        "other_cpu_at_start": share,
        "busiest_at_start": busiest_others(),
    }
    run = Run(bench, argv or [], facts, limit, marker)
    run._thread = threading.Thread(target=run._loop, name="p4lb-load-sampler", daemon=True)
    run._thread.start()
    return run


def describe(doc: dict[str, Any]) -> str:
    """One line for a generated table: how a results file was measured, or that it does not say."""
    from bench import templates  # jinja2: the reports' dependency, not the benches'

    p = doc.get("provenance") if isinstance(doc, dict) else None
    return templates.render("provenance.md", p=p, not_recorded=NOT_RECORDED).strip()
