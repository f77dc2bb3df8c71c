"""Driving the tier (topology.tier_procs) for its e2e tests and `make bench-tier`: bring it
up with its controller, wait for the router's next hops, hold keep-alive connections and run ab
through the VIP around an event, and call `p4lb` on the tier's config."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topology import ab as abtool
from topology import tier_plan as plan
from topology.procs import gone, poll_until
from topology.tier_plan import (
    NS,
    ROOT,
    VIP,
    VIP6,
    VIP_PORT,
    VIPS6,
    nexthop6_addr,
    nexthop_addr,
    p4lb_config,
    url,
)
from topology.tier_procs import Tier, in_ns, next_hops

CONVERGE_WAIT_S = 30.0  # a bound for waits that include BGP sessions coming up


def ab(
    requests: int,
    concurrency: int,
    seconds: int | None = None,
    port: int = VIP_PORT,
    vip: str = VIP,
) -> dict[str, Any]:
    """ab from the client through the VIP's `port` (no keep-alive, 5 s timeout, going on
    after errors): requests/s, complete and failed; an ab that gave up (a request
    unanswered for 5 s) counts every request as failed and says why."""
    cmd = abtool.command(url(vip, port), requests, concurrency, timeout_s=5, seconds=seconds)
    r = in_ns(NS + "c1", *cmd, check=False)
    try:
        report = abtool.parse(r.stdout)
    except ValueError:
        return {
            "rps": 0.0,
            "complete": 0,
            "failed": requests,
            "error": (r.stderr or r.stdout)[-200:],
        }
    return {"rps": report.rps, "complete": report.complete, "failed": report.failed, "error": ""}


def wait_for_vip(timeout_s: float = 60.0, port: int = VIP_PORT, vip: str = VIP) -> bool:
    """Bounded wait until a request from the client through the VIP gets an answer."""

    def answers() -> bool:
        r = in_ns(NS + "c1", "curl", "-g", "-s", "-m", "1", url(vip, port), check=False)
        return "p4lb" in r.stdout

    return poll_until(answers, timeout_s, every=0.2)


def start_controller(t: Tier, config: Path, standby: bool = False, name: str = "") -> int:
    """`p4lb run` for the tier, recorded as "controller"; `standby`: `p4lb run --standby`
    instead, recorded as "standby" (log standby.log), which takes over when it ends; or as
    `name` (log NAME.log)."""
    exe = Path(sys.executable).with_name("p4lb")
    name = name or ("standby" if standby else "controller")
    return t.start(
        name,
        [str(exe) if exe.exists() else "p4lb", "-c", str(config), "run"]
        + (["--standby"] if standby else []),
        None,
        plan.RUN / f"{name}.log",
    )


def log_of(name: str) -> str:
    """The log of the tier's process recorded as `name` (RUN/NAME.log), or "" (none yet)."""
    p = plan.RUN / f"{name}.log"
    return p.read_text() if p.exists() else ""


def controller_log() -> str:
    return log_of("controller")


def start_tier(
    balancers: int = 3,
    servers: int = 3,
    algorithm: str = "wrr",
    mode: str = "nat",
    standby: bool = False,
    body_bytes: int = 0,
    pair: bool = False,
) -> Tier:
    """The tier up (the port-80 VIP with `algorithm` and `mode`, the servers answering with
    `body_bytes`, or their short page), its config written, `p4lb run` started (and `p4lb
    run --standby` beside it with `standby`), both VIPs answering and every balancer in
    r0's next hops (IPv6 too in a dual-stack tier); stopped again (by PID) if any of it
    fails."""
    from p4lb.intent import writer

    t = Tier(balancers=balancers, servers=servers, mode=mode, body_bytes=body_bytes, pair=pair)
    try:
        t.up()
        config = plan.config_file()
        config.unlink(missing_ok=True)
        writer.save(p4lb_config(balancers, servers, algorithm, mode, pair), config)
        start_controller(t, config)
        vips = [(VIP, 80), (VIP, 81)] + ([(VIP6, p) for _, p, _ in VIPS6] if t.ipv6 else [])
        for vip, port in vips:
            if not wait_for_vip(60, port=port, vip=vip):
                raise RuntimeError(f"{url(vip, port)} never answered: {controller_log()[-2000:]}")
        for router in ("r0", "r0b") if pair else ("r0",):
            wait_hops(t, list(range(1, balancers + 1)), router=router)
        if t.ipv6:
            wait_hops(t, list(range(1, balancers + 1)), vip=VIP6)
        if standby:
            start_controller(t, config, standby=True)
    except BaseException:
        t.down()
        raise
    return t


def routing_report(t: Tier) -> str:
    """What a wait for next hops that timed out needs to be read: each router's BGP and BFD
    sessions, each speaker's routes, each balancer's process that is not running (and the
    end of its output), the controller's log's end."""
    parts = []
    for router in ("r0", "r0b") if t.pair else ("r0",):
        state = str(plan.RUN / router)
        for show in ("show bgp summary", "show bfd peers brief"):
            r = in_ns(NS + router, "vtysh", "--vty_socket", state, "-c", show, check=False)
            parts.append(f"{router}: {show}:\n{(r.stdout + r.stderr).strip()}")
        log = plan.RUN / router / "frr.log"
        changes = [
            line
            for line in (log.read_text(errors="replace") if log.exists() else "").splitlines()
            if "ADJCHANGE" in line or "state-change" in line or "session" in line.lower()
        ]
        parts.append(
            f"{router}: its last BGP and BFD session changes:\n" + "\n".join(changes[-30:])
        )
    for i in t.lbs:
        for fam in ("ipv4", "ipv6"):
            r = in_ns(NS + f"lb{i}", "gobgp", "global", "rib", "-a", fam, check=False)
            parts.append(f"lb{i}'s speaker, {fam}: {(r.stdout + r.stderr).strip()}")
        for name, out in (("switch", "switch.out"), ("gobgpd", "gobgpd.log"), ("bond", "bond.out")):
            pid = t.pids.get(f"{name}-lb{i}")
            if pid is None or gone(pid):
                path = plan.RUN / f"lb{i}" / out
                tail = path.read_text(errors="replace")[-600:] if path.exists() else ""
                parts.append(f"lb{i}'s {name} (pid {pid}) is not running; {path} ends:\n{tail}")
    parts.append("controller log:\n" + controller_log()[-2000:])
    return "\n".join(parts)


def hops(indexes: list[int], vip: str = VIP) -> list[str]:
    """The balancers' data addresses of the VIP's family."""
    return sorted((nexthop6_addr if ":" in vip else nexthop_addr)(i) for i in indexes)


def verb(t: Tier, *args: str) -> str:
    """An operator's verb on the running tier, as a user runs it (`python -m topology.tier
    restart lb2`, what `make tier-restart LB=lb2` runs); `t` then holds the new record. Its
    output; a verb that fails raises, naming it."""
    r = subprocess.run(
        [sys.executable, "-m", "topology.tier", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    t.reload()  # what the verb recorded
    if r.returncode != 0:
        raise RuntimeError(f"tier {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout


def waited(done: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until `done()` held (polled every 10 ms), or None once `timeout_s` passed."""
    t0 = time.monotonic()
    return time.monotonic() - t0 if poll_until(done, timeout_s) else None


def wait_hops(
    t: Tier,
    indexes: list[int],
    timeout_s: float = CONVERGE_WAIT_S,
    router: str = "r0",
    vip: str = VIP,
) -> float:
    """Seconds until `router`'s next hops for the VIP (IPv4 or IPv6) are exactly those
    balancers' (bounded)."""
    want = hops(indexes, vip)
    took = waited(lambda: t.ecmp_next_hops(vip, router=router) == want, timeout_s)
    if took is not None:
        return took
    got = t.ecmp_next_hops(vip, router=router)
    raise TimeoutError(
        f"{router}'s next hops for {vip} {got} != {want} after {timeout_s} s\n{routing_report(t)}"
    )


@dataclass
class Load:
    """ab in batches from the client to `vip`'s port 80, each batch's start, end and
    failures."""

    concurrency: int
    vip: str = VIP
    stop: threading.Event = field(default_factory=threading.Event)
    batches: list[dict[str, Any]] = field(default_factory=list)

    def run(self) -> None:
        for _ in range(10_000):  # bounded; stop ends it long before
            if self.stop.is_set():
                return
            t0 = time.monotonic()
            r = ab(200, self.concurrency, vip=self.vip)
            self.batches.append({"start": t0, "end": time.monotonic(), **r})


def steady_batches(
    load: Load, *spans: tuple[float, float]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ab batches run wholly within a span of converged routes (a convergence to the
    next route change), and the others (they overlap a route change)."""
    within = [b for b in load.batches if any(a <= b["start"] and b["end"] <= z for a, z in spans)]
    return within, [b for b in load.batches if b not in within]


@contextmanager
def traffic(
    open_before_s: float,
    ab_concurrency: int,
    connections: int = 60,
    ports: tuple[int, ...] = (80, 81),
    without_timestamps: int = 0,
    vip: str = VIP,
) -> Iterator[tuple[dict[str, Any], Load]]:
    """Keep-alive connections to `vip`'s `ports` (the holder, `connections` to each, the
    first `without_timestamps` of each from a client that sends no TCP timestamps) and ab
    batches (to its port 80), for the block, which starts once every connection is
    `open_before_s` old; yields the holder's result (filled at the end) and the load."""
    work = plan.RUN / "holder"
    work.mkdir(parents=True, exist_ok=True)
    stop, ready, out = work / "stop", work / "ready", work / "out.json"
    for f in (stop, ready, out):
        f.unlink(missing_ok=True)
    holder = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            NS + "c1",
            sys.executable,
            "-m",
            "topology.holder",
            "--vip",
            vip,
            "--ports",
            *(str(p) for p in ports),
            "--connections",
            str(connections),
            "--stop-file",
            str(stop),
            "--ready-file",
            str(ready),
            "--out",
            str(out),
            "--without-timestamps",
            str(without_timestamps),
        ],
        cwd=ROOT,
    )
    load = Load(ab_concurrency, vip)
    thread = threading.Thread(target=load.run, daemon=True)
    result: dict[str, Any] = {}
    try:
        poll_until(lambda: ready.exists() or holder.poll() is not None, 60, every=0.05)
        if not ready.exists():
            raise RuntimeError("the holder did not open its connections within 60 s")
        opened = json.loads(ready.read_text())["at"]
        thread.start()
        time.sleep(max(0.0, opened + open_before_s - time.monotonic()))  # held that long
        yield result, load
    finally:
        load.stop.set()
        stop.touch()
        holder.wait(60)
        if thread.is_alive():
            thread.join(30)
        if out.exists():
            result.update(json.loads(out.read_text()))
        # For the report of a failure: each balancer's drops by reason.
        stats = p4lb("stats", "--json")
        if stats.returncode in (0, 1) and stats.stdout.strip().startswith("{"):
            doc = json.loads(stats.stdout)
            result["drops"] = {
                n: {v["name"]: v["drops"] for v in b["vips"]} | {"": b["drops"]}
                for n, b in doc["balancers"].items()
            }


def count_replies() -> dict[str, int]:
    """Frames of replies that reached r0, per VIP and way (tier_plan.reply_counter_rules:
    `web_from_r1`, `web_from_balancers`, ...), counted from the first call on: the first
    call installs the counters in the fabric's namespace (all 0)."""
    fab = NS + "fab"
    listed = in_ns(
        fab, "nft", "-j", "list", "counters", "table", "bridge", plan.REPLY_TABLE, check=False
    )
    if listed.returncode != 0:
        rules = plan.RUN / "replies.nft"
        rules.write_text(plan.reply_counter_rules())
        in_ns(fab, "nft", "-f", str(rules))
        listed = in_ns(fab, "nft", "-j", "list", "counters", "table", "bridge", plan.REPLY_TABLE)
    return {
        item["counter"]["name"]: int(item["counter"]["packets"])
        for item in json.loads(listed.stdout)["nftables"]
        if "counter" in item
    }


def p4lb(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("p4lb")
    return subprocess.run(
        [str(exe), "-c", str(plan.config_file()), *args], capture_output=True, text=True, timeout=60
    )


# --- overload: more offered than the tier serves ----------------------------------------


@dataclass
class RouteSamples:
    """r0's next hops for the VIP and r1's for the return path, every `every_s`, from the
    start until `stop` is set."""

    every_s: float = 0.2
    stop: threading.Event = field(default_factory=threading.Event)
    samples: list[tuple[float, list[str], list[str]]] = field(default_factory=list)

    def run(self) -> None:
        for _ in range(100_000):  # bounded; stop ends it long before
            if self.stop.is_set():
                return
            at = time.monotonic()
            self.samples.append((at, next_hops("r0", f"{VIP}/32"), next_hops("r1", "0.0.0.0/0")))
            self.stop.wait(max(0.0, self.every_s - (time.monotonic() - at)))


@contextmanager
def sampling_routes(every_s: float = 0.2) -> Iterator[RouteSamples]:
    """RouteSamples taken by a thread for the block, stopped (and joined, bounded) at its end."""
    routes = RouteSamples(every_s=every_s)
    sampler = threading.Thread(target=routes.run, daemon=True)
    sampler.start()
    try:
        yield routes
    finally:
        routes.stop.set()
        sampler.join(10)


def route_gaps(samples: list[tuple[float, list[str]]], n: int, until: float) -> dict[str, Any]:
    """Over samples (time, next hops) up to `until`: seconds with fewer than n next hops, with
    none, how often the set changed, the fewest seen. Each sample holds until the next."""
    below = none = 0.0
    changes = 0
    fewest = n
    for k, (at, hops) in enumerate(samples):
        end = samples[k + 1][0] if k + 1 < len(samples) else until
        span = max(0.0, end - at)
        if len(hops) < n:
            below += span
        if not hops:
            none += span
        if k and hops != samples[k - 1][1]:
            changes += 1
        fewest = min(fewest, len(hops))
    return {"s_below_n": below, "s_none": none, "changes": changes, "fewest": fewest}


def parse_ab(text: str) -> dict[str, float]:
    """ab's summary numbers (all 0 when it printed no report: an ab that gave up)."""
    try:
        r = abtool.parse(text)
    except ValueError:
        return dict.fromkeys(("complete", "failed", "rps", "ms_per_request"), 0.0)
    return {"complete": r.complete, "failed": r.failed, "rps": r.rps, "ms_per_request": r.mean_ms}


@contextmanager
def overload(concurrency: list[int], seconds: int) -> Iterator[list[dict[str, Any]]]:
    """One ab process from the client's namespace per entry of `concurrency`, with that many
    requests in flight for `seconds` (bounded: -t and -n), waiting up to 30 s for an answer
    and going on after errors; yields a list filled at the end with each one's numbers. One
    still running when the block ends is interrupted (SIGINT, by its PID: ab prints what it
    did so far)."""
    cap = 2_000_000
    args = ["ab", "-q", "-r", "-s", "30", "-t", str(seconds), "-n", str(cap)]
    procs = [
        subprocess.Popen(
            ["ip", "netns", "exec", NS + "c1", *args, "-c", str(c), f"http://{VIP}/"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for c in concurrency
    ]
    results: list[dict[str, Any]] = []
    try:
        yield results
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # `ip netns exec` exec'd ab: the PID is ab's
        for p in procs:
            try:
                out, _ = p.communicate(timeout=seconds + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            results.append({**parse_ab(out), "exit": p.returncode, "tail": out[-300:]})


def unloaded_ms_per_request() -> float:
    """What one request takes through the idle tier (ab -c 1): the offered load of a closed
    loop of C clients is C / this, the rate they would send if answered that fast."""
    r = in_ns(
        NS + "c1", "ab", "-q", "-s", "5", "-n", "300", "-c", "1", f"http://{VIP}/", check=False
    )
    return parse_ab(r.stdout)["ms_per_request"]
