"""A balancer's BGP speaker, as the tier's controller drives it: announce the VIPs (and the
return path's prefixes) while the balancer's switch holds the tier's state, withdraw them
when it does not. The speaker is GoBGP (Debian's gobgpd), driven through its own client,
`gobgp`, in the speaker's network namespace; nothing here speaks BGP.

Why GoBGP: a speaker that only originates routes needs no routing table, and gobgpd is one
process with an API (cold start to a route on the router: 0.37 s here), where FRR would be
zebra + bgpd per balancer and ~3 s to re-establish. BFD runs beside it in FRR's bfdd."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 5.0


class SpeakerError(Exception):
    """The speaker did not take a command; the message is one line."""


def family(prefix: str) -> str:
    """GoBGP's name for a prefix's address family."""
    return "ipv6" if ":" in prefix else "ipv4"


@dataclass(frozen=True)
class Speaker:
    """IPv4 and IPv6 routes over the speaker's one (IPv4) BGP session: each announced
    with its family's next hop; a family without one is never asked for."""

    netns: str  # "" : the controller's own namespace
    api: str  # gobgpd's API, host:port as seen from inside netns
    nexthop: str  # the address this balancer's IPv4 routes point to
    nexthop6: str = ""  # and its IPv6 routes

    @property
    def next_hops(self) -> dict[str, str]:
        """Each family's next hop, for the families this speaker announces."""
        hops = {"ipv4": self.nexthop, "ipv6": self.nexthop6}
        return {fam: hop for fam, hop in hops.items() if hop}

    def _gobgp(self, *args: str) -> str:
        host, _, port = self.api.rpartition(":")
        cmd = ["gobgp", "-u", host, "-p", port, *args]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SpeakerError(f"gobgp ({self.netns or 'here'}, {self.api}): {e}") from e
        if r.returncode != 0:
            raise SpeakerError(
                f"gobgp ({self.netns or 'here'}, {self.api}) {' '.join(args)}: "
                f"{(r.stderr or r.stdout).strip().splitlines()[-1:] or ['failed']}"
            )
        return r.stdout

    def announced(self) -> set[str]:
        """The prefixes the speaker originates now, of the families it announces."""
        out: set[str] = set()
        for fam in self.next_hops:
            text = self._gobgp("-j", "global", "rib", "-a", fam)
            if text.strip():
                out |= set(json.loads(text))
        return out

    def announce(self, prefixes: list[str]) -> None:
        # origin igp: with GoBGP's default (incomplete) its path loses to an FRR one and
        # silently leaves the router's multipath set.
        have = self.announced()
        for p in prefixes:
            if p not in have:
                fam = family(p)
                hop = self.next_hops.get(fam)
                if hop is None:
                    raise SpeakerError(f"gobgp ({self.netns or 'here'}): no {fam} next hop for {p}")
                self._gobgp("global", "rib", "-a", fam, "add", p, "origin", "igp", "nexthop", hop)

    def withdraw(self, prefixes: list[str]) -> None:
        have = self.announced()
        for p in prefixes:
            if p in have:
                self._gobgp("global", "rib", "-a", family(p), "del", p)
