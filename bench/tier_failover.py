"""The tier bench's failover (bench.tier): per kind of event, with connections held and ab
batches running, the time until the routers, the twin router or the standby controller
took over, the longest stall, connections broken or moved, ab's failures while the routes
were converged and across route changes, and the victim's return."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench import runner
from bench.tier_runs import held, over_runs

KINDS = ["switch killed", "speaker killed", "drain"]
HA_KINDS = [*KINDS, "front router died", "return router died", "controller killed"]
TAKEOVER_WAIT_S = 30.0  # bounds on a router's or a controller's takeover, and their return


def wait_for(what: str, done: Callable[[], bool], timeout_s: float = TAKEOVER_WAIT_S) -> float:
    """Seconds until `done()` (bounded)."""
    from topology.tier_load import waited

    if (took := waited(done, timeout_s)) is None:
        raise TimeoutError(f"bench-tier: {what} not within {timeout_s} s")
    return took


def leave(t: Any, kind: str, victim: int, rep: int) -> tuple[float, Callable[[], None]]:
    """One event: (seconds until the router's next hops, the twin or the standby took over,
    what brings the victim back and, for a router or the controller, waits for it)."""
    from topology import tier_plan as plan
    from topology.tier_load import log_of, p4lb, start_controller, verb, wait_hops
    from topology.tier_procs import next_hops

    if kind in KINDS:  # the balancer `victim`; it comes back by the operator's verb
        if kind == "drain":
            p4lb("tier", "drain", f"lb{victim}")
        else:
            t.kill(f"{'switch' if kind == 'switch killed' else 'gobgpd'}-lb{victim}")

        def restart() -> None:
            if kind == "drain":
                p4lb("tier", "restore", f"lb{victim}")
            else:
                speaker = ["--speaker"] if kind == "speaker killed" else []
                verb(t, "restart", f"lb{victim}", *speaker)

        return wait_hops(t, [i for i in (1, 2, 3) if i != victim]), restart
    if kind == "controller killed":
        # Each balancer a controller becomes primary on is logged "in the tier" (a standby
        # may have been primary before: on a restarted switch it can connect first).
        def taken(name: str, at_least: int) -> Callable[[], bool]:
            return lambda: log_of(name).count(": in the tier") >= at_least

        before = log_of("standby").count(": in the tier")
        t.kill("controller")
        took = wait_for("the standby's takeover", taken("standby", before + len(t.lbs)))

        def back() -> None:
            start_controller(t, plan.config_file())  # the config's id: primary again at once
            wait_for("the old primary's return", taken("controller", len(t.lbs)))  # a new log

        return took, back
    front = kind == "front router died"
    pair = ("r0", "r0b") if front else ("r1", "r1b")
    victim_r, twin = pair if rep % 2 == 0 else pair[::-1]  # the master: it alternates
    groups = {vrid for _, vrid, _ in plan.vrrp_groups(twin, t.clients)}
    t.router_down(victim_r)
    took = wait_for(f"{twin} master", lambda: t.vrrp_masters(twin) == groups)

    def back_router() -> None:
        t.router_up(victim_r)
        if front:
            wait_hops(t, list(t.lbs), router=victim_r)
        else:
            want = sorted(plan.nexthop_addr(i) for i in t.lbs)
            wait_for(f"{victim_r}'s routes", lambda: next_hops(victim_r, "0.0.0.0/0") == want)

    return took, back_router


def ab_batches(batches: list[dict[str, Any]], when: str) -> dict[str, int]:
    """The ab batches' failed requests, ab processes that gave up, and requests done."""
    return {
        f"ab_failed_{when}": sum(b["failed"] for b in batches),
        f"ab_gave_up_{when}": sum(1 for b in batches if b["error"]),
        f"ab_requests_{when}": sum(b["complete"] for b in batches),
    }


def event(trial: runner.Trial, kind: str) -> dict[str, Any]:
    """One event of `kind` (the victim rotating with the repetition), with connections held
    and ab batches running."""
    from topology.tier_load import steady_batches, traffic, wait_hops

    t, rep = trial.lab, trial.rep
    victim = 1 + (rep % 3)
    # Connections open a second before the event (the bar), ab -c 4 running.
    with traffic(1.0, 4) as (result, load):
        detect, come_back = leave(t, kind, victim, rep)
        # Converged now: the event's start plus the wait would leave out the event's
        # own time (the drain's CLI process) and count batches begun before the
        # route change as steady.
        converged = time.monotonic()
        time.sleep(2)
        t1 = time.monotonic()  # the balancer comes back: routes change again
        come_back()  # a balancer's verb is not timed: the wait for the routes is
        back = 0.0 if kind in KINDS else time.monotonic() - t1
        back = max(back, wait_hops(t, [1, 2, 3]))
        back_at = time.monotonic()  # not t1 + back: starting a switch takes seconds
        time.sleep(2)
    conns = result["connections"]
    h = held(conns)
    errors = Counter(f"port {c['port']}: {c['broken']['error'][:40]}" for c in conns if c["broken"])
    # Routes converged: after the event's convergence until the balancer comes back,
    # and after it is back; the rest overlaps a route change.
    after, during = steady_batches(load, (converged, t1), (back_at, float("inf")))
    r = {
        "rep": rep,
        "victim": f"lb{victim}" if kind in KINDS else kind,
        "detection_s": detect,
        "rejoin_s": back,
        **{k: h[k] for k in ("longest_stall_s", "connections", "broken", "moved")},
        "broken_by": dict(errors),
        "drops": result.get("drops", {}),
        **ab_batches(during, "across_route_changes"),
        **ab_batches(after, "while_converged"),
    }
    runner.progress(
        f"{kind}: detected {detect:.2f} s, longest stall {r['longest_stall_s']:.2f} s, broken "
        f"{r['broken']}, moved {r['moved']}, ab failed {r['ab_failed_while_converged']} while "
        f"converged, {r['ab_failed_across_route_changes']} across route changes"
    )
    return r


def figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    ab_counts: tuple[str, ...] = ("ab_failed_while_converged", "ab_gave_up_while_converged")
    ab_counts += ("ab_failed_across_route_changes", "ab_gave_up_across_route_changes")
    timed = ("detection_s", "longest_stall_s", "rejoin_s")
    return {k: over_runs(rs, timed, ("broken", "moved", *ab_counts)) for k, rs in values.items()}


FAILOVER = runner.part("bench-tier failover", lambda a: HA_KINDS if a.ha else KINDS, event, figures)
