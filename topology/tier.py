"""The tier's command line: `python -m topology.tier run|up|down` runs, builds or removes
the tier (`make run TOPO=tier`, `make stop`); `restart|add|remove` are the operator's verbs on
a running tier (`make tier-restart|tier-add|tier-remove`, topology.tier_ops).

The tier is split by job, each module importing only those above it in this list:
topology.tier_plan (what it is: addresses, names, config files; pure), topology.tier_procs
(its namespaces, links and daemons, recorded by PID in run/tier/state.json), topology.tier_load
(bringing it up with its controller, traffic through the VIP, for tests and benchmarks),
topology.tier_ops (the operator's verbs) and this module. Every process is started in a session
of its own, so `run --detach` can return and leave the tier running.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from p4lb.intent.running import clear_pointer, pointer_path, write_pointer
from topology import tier_plan as plan
from topology.stop import NEEDS_ROOT
from topology.tier_load import ab, start_tier
from topology.tier_ops import main as verbs
from topology.tier_plan import MODES, RUN, VIP, VIP6
from topology.tier_procs import Tier, missing_tools, stop_from_state

# The tier bench (bench/tier.py, bench/tier_runs.py) imports these from here.
__all__ = ["RUN", "ab", "main", "missing_tools"]


BANNER = """
p4lb tier is running: {n} balancers behind r0 (FRR, ECMP), VIP {vip}:80 (wrr) and :81 (maglev)
over {servers} servers. Each balancer's GoBGP speaker announces the VIP while its switch holds
the tier's state. p4lb finds the tier's config through {pointer}.
  sudo ip netns exec p4t-c1 curl -s http://{vip}/ | head -c 80   # one request
  sudo ip netns exec p4t-c1 ab -n 1000 -c 20 http://{vip}/        # load
  sudo ip netns exec p4t-r0 ip route show {vip}                   # the ECMP next hops
  sudo p4lb stats                                                 # per balancer + tier
  sudo p4lb tier drain lb1                                        # withdraw one
  {kill_line}   # a balancer dies
Controller log: {log}.  {how_to_stop}
"""


IPV6_LINE = """Dual stack: the IPv6 VIPs [{vip6}]:80 (maglev) and [{vip6}]:81 (wrr) over the same
servers, announced by the same speakers (IPv6 routes on their IPv4 sessions).
  sudo ip netns exec p4t-c1 curl -s http://[{vip6}]/ | head -c 80   # one request over IPv6
  sudo ip netns exec p4t-c1 curl -s http://[{vip6}]:81/ | head -c 80  # to the wrr VIP
  sudo ip netns exec p4t-r0 ip -6 route show {vip6}                 # its ECMP next hops
"""


PAIR_LINE = """A router pair: r0b beside r0, r1b beside r1; the clients, the servers and the
balancers reach each pair by a shared VRRP address. A router dies and comes back:
  sudo make tier-router-down ROUTER=r0      # its daemons killed, its links down
  sudo make tier-router-up ROUTER=r0        # back, as the pair's backup
"""


DSR_LINE = """The :80 VIP ({algorithm}) is in direct server return: the servers hold {vip}
and answer the client themselves through r1 and r0, past the balancers (r1 has a rule
for {vip} as source; the IPv6 :80 VIP likewise).
  sudo ip netns exec p4t-r1 ip route get 10.1.0.2 from {vip} iif r1-srv   # via r0
"""


def kill_line(name: str, state: Path) -> str:
    """The shell command that kills one process of the tier by the PID state.json holds."""
    return f"sudo kill -9 $(jq -r '.pids[\"{name}\"]' {state})"


def options(argv: list[str]) -> argparse.Namespace:
    """`run`'s command line (`--ha` sets what it stands for)."""
    p = argparse.ArgumentParser(prog="make run TOPO=tier")
    p.add_argument("--balancers", type=int, default=3)
    p.add_argument("--servers", type=int, default=3)
    p.add_argument("--algorithm", default="wrr", help="the port-80 VIP's algorithm")
    p.add_argument(
        "--mode",
        default="nat",
        choices=MODES,
        help="the port-80 VIP's mode; dsr: its replies go r1 -> r0, past the balancers",
    )
    p.add_argument(
        "--routers",
        type=int,
        default=1,
        choices=(1, 2),
        help="2: a router pair (r0 and r0b in front, r1 and r1b on the return path)",
    )
    p.add_argument(
        "--ha",
        action="store_true",
        help="no single point of failure: --routers 2 and --standby-controller together",
    )
    p.add_argument("--no-cli", action="store_true", help="start, check one request, stop")
    p.add_argument(
        "--detach",
        action="store_true",
        help="start, print the banner and return, the tier left running (sudo make stop)",
    )
    p.add_argument(
        "--standby-controller",
        action="store_true",
        help="p4lb run --standby beside the controller: it takes over when that one ends",
    )
    a = p.parse_args(argv)
    if a.ha:
        a.routers, a.standby_controller = 2, True
    return a


def run(argv: list[str]) -> int:
    a = options(argv)
    if missing := missing_tools():
        print(f"make run TOPO=tier: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        t = start_tier(
            a.balancers,
            a.servers,
            a.algorithm,
            a.mode,
            a.standby_controller,
            pair=a.routers == 2,
        )
    except (RuntimeError, TimeoutError) as e:
        print(f"tier: {e}", file=sys.stderr)
        return 1
    config = plan.config_file()
    state = plan.STATE
    left_running = False
    try:
        if a.no_cli:
            print(f"tier: the VIP answers; r0's next hops: {', '.join(t.ecmp_next_hops())}")
            return 0
        write_pointer(config)  # `sudo p4lb stats` from anywhere finds the tier's config
        print(
            BANNER.format(
                n=a.balancers,
                vip=VIP,
                servers=a.servers,
                pointer=pointer_path(),
                log=plan.RUN / "controller.log",
                kill_line=kill_line("switch-lb2", state),
                how_to_stop="`sudo make stop` stops everything."
                if a.detach
                else "Ctrl-C (or `sudo make stop` in another terminal) stops everything.",
            ),
            flush=True,
        )
        if a.mode == "dsr":
            print(DSR_LINE.format(vip=VIP, algorithm=a.algorithm), flush=True)
        if t.ipv6:
            print(IPV6_LINE.format(vip6=VIP6), flush=True)
        if t.pair:
            print(PAIR_LINE, flush=True)
        if a.detach:  # every process runs in a session of its own, recorded in state.json
            left_running = True
            return 0
        with contextlib.suppress(KeyboardInterrupt):
            while state.exists():  # `make stop` removes it
                time.sleep(0.5)
        return 0
    finally:
        if not left_running:
            clear_pointer(config)
            t.down()


def down() -> int:
    """`python -m topology.tier down`: stop the recorded tier. Needs root."""
    if os.geteuid() != 0:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    try:
        stopped = stop_from_state(plan.STATE)
    except PermissionError:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    print("tier: stopped" if stopped else "tier: nothing recorded as running")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["down"]:
        return down()
    if args[:1] == ["run"]:
        return run(args[1:])
    if args[:1] in (["restart"], ["add"], ["remove"], ["router-down"], ["router-up"]):
        return verbs(args)
    if args[:1] == ["up"]:
        if missing := missing_tools():
            print(f"tier: needs {', '.join(missing)}", file=sys.stderr)
            return 2
        t = Tier()
        t.up()
        print(f"tier: up, state in {plan.STATE}")
        return 0
    print(
        "usage: python -m topology.tier run [--balancers N ... --detach] | up | down"
        " | restart lbN [--switch|--speaker] | add | remove lbN | router-down|router-up rN",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
