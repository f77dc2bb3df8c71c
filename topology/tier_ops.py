"""The operator's verbs on a running tier: restart a balancer's switch or speaker, add a
balancer, remove one. Each records what it starts, and forgets what it stops, in
run/tier/state.json (under its lock), so `make stop` stops exactly what runs.

    sudo make tier-restart LB=lb2 [WHAT=--speaker]   python -m topology.tier restart lb2
    sudo make tier-add                               python -m topology.tier add
    sudo make tier-remove LB=lb4                     python -m topology.tier remove lb4

`p4lb run` does the rest on its own: a restarted or new switch gets the tier's state, then
its speaker announces it; a balancer taken out of the config is withdrawn and let go."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time

from p4lb.intent import reader, writer
from p4lb.intent.lock import config_lock
from p4lb.intent.model import ConfigError
from topology import thrift_guard
from topology import tier_plan as plan
from topology.procs import alive, poll_until, stop_pids
from topology.tier_plan import (
    MAX_BALANCERS,
    NS,
    VIP6,
    balancer_records,
    nexthop6_addr,
    nexthop_addr,
    tier_balancer,
)
from topology.tier_procs import Tier, in_ns, missing_tools, sh

WITHDRAW_WAIT_S = 15.0  # a removed balancer's drain: p4lb run withdraws it within a round


class VerbError(Exception):
    """What the operator asked cannot be done; the message is one line."""


def router_of(name: str, t: Tier) -> str:
    """A router of the tier's pair, by name."""
    names = list(plan.routers(t.pair))
    if not t.pair:
        raise VerbError("the tier runs one router of each kind: a pair needs ROUTERS=2")
    if name not in names:
        raise VerbError(f"no router {name!r}: the tier's routers are {', '.join(names)}")
    return name


def index_of(name: str, t: Tier) -> int:
    """lbN's index, if the tier runs it."""
    m = re.fullmatch(r"lb(\d+)", name)
    if not m or int(m.group(1)) not in t.lbs:
        running = ", ".join(f"lb{i}" for i in sorted(t.lbs)) or "none"
        raise VerbError(f"no balancer {name!r} in the running tier (it runs: {running})")
    return int(m.group(1))


def stop(t: Tier, name: str) -> None:
    """Stop one recorded process by its PID (TERM, KILL after 3 s) and forget it."""
    pid = t.pids.pop(name, None)
    if pid is not None:
        stop_pids([pid])


def running(t: Tier, name: str) -> bool:
    pid = t.pids.get(name)
    return pid is not None and alive(pid)


def restart(t: Tier, i: int, switch: bool, speaker: bool) -> list[str]:
    """Restart balancer i's switch (its speaker too: the bond takes it down with the
    switch) and/or its speaker; start again whatever of it is not running. What it did."""
    done = []
    if switch:
        stop(t, f"bond-lb{i}")  # first: it would take down the speaker started next
        stop(t, f"switch-lb{i}")
    if switch or speaker:
        stop(t, f"gobgpd-lb{i}")
    if not running(t, f"switch-lb{i}"):
        t.start_switch(i)
        done.append(f"switch lb{i} started (pid {t.pids[f'switch-lb{i}']})")
    if not running(t, f"gobgpd-lb{i}"):
        t.start_speaker(i)
        done.append(f"speaker lb{i} started (pid {t.pids[f'gobgpd-lb{i}']})")
    if not running(t, f"bond-lb{i}"):
        t.start_bond(i)
    return done


def add(t: Tier) -> int:
    """A new balancer (the next free index): links, switch, speaker, bond, then its entry
    in the tier's config (p4lb run takes it in and announces it once it holds the state)."""
    free = [i for i in range(1, MAX_BALANCERS + 1) if i not in t.lbs]
    if not free:
        raise VerbError(f"the tier has {MAX_BALANCERS} balancers, the routers' ECMP width")
    i = max(t.lbs, default=0) + 1 if max(t.lbs, default=0) < MAX_BALANCERS else free[0]
    t.add_balancer(i)
    config = plan.config_file()
    with config_lock(config):
        cfg = reader.load(config)
        if all(b.name != f"lb{i}" for b in cfg.tier):
            tier = (*cfg.tier, tier_balancer(i, t.ipv6))
            writer.save(dataclasses.replace(cfg, tier=tier), config)
    return i


def forget(t: Tier, i: int) -> None:
    """Drop balancer i's records (its processes already stopped)."""
    procs, links, ns, thrift = balancer_records(i)
    for name in procs:
        t.pids.pop(name, None)
    t.root_links = [x for x in t.root_links if x not in links]
    t.namespaces = [x for x in t.namespaces if x != ns]
    t.thrift_ports = [p for p in t.thrift_ports if p != thrift]
    t.lbs = [x for x in t.lbs if x != i]


def remove(t: Tier, i: int, wait_s: float = WITHDRAW_WAIT_S) -> float:
    """Take balancer i out: out of the config (p4lb run withdraws it: its flows move to the
    others, which share its connections), then, once r0 no longer routes to it (bounded),
    its processes stopped, its links, namespace and fixed entries removed. Seconds until
    r0 let it go."""
    if len(t.lbs) == 1:
        raise VerbError(f"lb{i} is the tier's last balancer: `sudo make stop` stops the tier")
    config = plan.config_file()
    with config_lock(config):
        cfg = reader.load(config)
        tier = tuple(b for b in cfg.tier if b.name != f"lb{i}")
        writer.save(dataclasses.replace(cfg, tier=tier), config)
    started = time.monotonic()

    def routed() -> bool:  # r0 still routes the VIP (or, dual stack, the IPv6 VIP) to it
        v6 = t.ipv6 and nexthop6_addr(i) in t.ecmp_next_hops(VIP6)
        return v6 or nexthop_addr(i) in t.ecmp_next_hops()

    poll_until(lambda: not routed(), wait_s, every=0.05)
    withdrawn = time.monotonic() - started
    procs, links, ns, thrift = balancer_records(i)
    for name in sorted(procs, key=lambda n: n.startswith("switch")):  # the switch last
        stop(t, name)
    for link in sorted(links):  # each veth's fabric end (and its bridge entry) goes with it
        sh("ip", "link", "del", link, check=False)
    for router in plan.routers(t.pair):
        for addr in (nexthop_addr(i), nexthop6_addr(i)):
            in_ns(NS + router, "ip", "neigh", "del", addr, "dev", f"{router}-lb", check=False)
    sh("ip", "netns", "del", ns, check=False)  # the control link's fabric end goes with it
    thrift_guard.release(thrift)
    forget(t, i)
    return withdrawn


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m topology.tier", description=__doc__)
    sub = p.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("restart", help="restart a balancer's switch (and speaker) or speaker")
    r.add_argument("name", help="lbN")
    what = r.add_mutually_exclusive_group()
    what.add_argument("--switch", action="store_true", help="its switch (the default)")
    what.add_argument("--speaker", action="store_true", help="its BGP speaker only")
    sub.add_parser("add", help="add a balancer to the running tier")
    rm = sub.add_parser("remove", help="withdraw a balancer, then stop and remove it")
    rm.add_argument("name", help="lbN")
    for verb, what in (("router-down", "kill a router of a pair"), ("router-up", "bring it back")):
        sub.add_parser(verb, help=what).add_argument("name", help="r0, r0b, r1 or r1b")
    a = p.parse_args(argv)
    prog = f"tier {a.verb}"
    if missing := missing_tools():
        print(f"{prog}: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    if not plan.STATE.exists():
        print(f"{prog}: no tier is running (start one: sudo make run TOPO=tier)", file=sys.stderr)
        return 1
    t = Tier()
    try:
        with t.edit():  # the whole verb under the state lock, from the record as it is
            if a.verb == "restart":
                i = index_of(a.name, t)
                done = restart(t, i, switch=not a.speaker, speaker=a.speaker)
                print(f"{prog}: " + ("; ".join(done) or f"lb{i}: everything runs"))
                print(f"{prog}: p4lb run gives lb{i} the tier's state, then announces it")
            elif a.verb == "add":
                i = add(t)
                print(
                    f"{prog}: lb{i} added (switch pid {t.pids[f'switch-lb{i}']}); "
                    "p4lb run gives it the tier's state, then announces it"
                )
            elif a.verb == "remove":
                i = index_of(a.name, t)
                took = remove(t, i)
                print(f"{prog}: lb{i} withdrawn after {took:.2f} s, stopped and removed")
            else:
                router = router_of(a.name, t)
                if a.verb == "router-down":
                    t.router_down(router)
                    print(f"{prog}: {router}'s daemons killed, its links down")
                else:
                    t.router_up(router)
                    print(f"{prog}: {router} runs again (its pair's backup)")
    except (VerbError, ConfigError, RuntimeError, TimeoutError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    return 0
