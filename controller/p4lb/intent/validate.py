"""Checks that span a whole intent: duplicates, conflicting routes, a VIP with nothing to
serve. Field-level checks happen while reading (p4lb.intent.reader); whether the compiled
program can hold the intent is p4lb.pipeline.capacity's question."""

from __future__ import annotations

from p4lb.intent.model import Config, ConfigError, Vip, address_bits


def validate(cfg: Config) -> None:
    """Check everything that spans keys: duplicates, route conflicts, total weights."""
    src = cfg.source
    if cfg.qos is not None and cfg.qos.ports and cfg.tier:
        # A discipline is queue rates and depths (set over one switch's Thrift port) as well
        # as entries and meters: [qos] names one Thrift port, each balancer has its own.
        raise ConfigError(
            f"{src}: qos: queueing disciplines are for one switch, not a [tier] (their queues "
            "are set over the one Thrift port [qos] names; each balancer has its own)"
        )
    names: set[str] = set()
    for h in cfg.hosts:
        if h.name in names:
            raise ConfigError(f"{src}: host {h.name!r}: duplicate host name")
        names.add(h.name)

    seen_vips: dict[tuple[str, str, int], str] = {}
    seen_backends: dict[tuple[str, str, int], str] = {}
    routes: dict[str, tuple[str, int, str]] = {}
    for h in cfg.hosts:
        routes[h.address] = (h.mac, h.switch_port, f"host {h.name!r}")
    vip_addresses = {v.address for v in cfg.vips}
    for v in cfg.vips:
        where = f"vip.{v.name}"
        if v.key in seen_vips:
            raise ConfigError(
                f"{src}: {where}: duplicate VIP {v.address}:{v.port}/{v.protocol} "
                f"(also vip.{seen_vips[v.key]})"
            )
        seen_vips[v.key] = v.name
        if v.address in routes:
            raise ConfigError(f"{src}: {where}.address: {v.address} is also a host address")
        if not v.backends:
            raise ConfigError(f"{src}: {where}: no backends")
        bnames: set[str] = set()
        baddrs: set[tuple[str, int]] = set()
        for b in v.backends:
            bwhere = f"{where}.backend {b.name!r}"
            if b.name in bnames:
                raise ConfigError(f"{src}: {bwhere}: duplicate backend name")
            bnames.add(b.name)
            if (b.address, b.port) in baddrs:
                raise ConfigError(f"{src}: {bwhere}: duplicate backend {b.address}:{b.port}")
            baddrs.add((b.address, b.port))
            if address_bits(v.address) == 32 and address_bits(b.address) == 128:
                raise ConfigError(
                    f"{src}: {bwhere}: {b.address} is IPv6, the VIP {v.address} IPv4: a "
                    "VIP's backends are of its family (no NAT64)"
                )
            if b.address in vip_addresses:
                raise ConfigError(f"{src}: {bwhere}: {b.address} is a VIP address")
            bkey = (b.address, v.protocol, b.port)
            if bkey in seen_backends and seen_backends[bkey] != v.name:
                raise ConfigError(
                    f"{src}: {bwhere}: {b.address}:{b.port}/{v.protocol} already serves "
                    f"vip.{seen_backends[bkey]} (replies could not be mapped back to one VIP)"
                )
            seen_backends[bkey] = v.name
            route = (b.mac, b.switch_port)
            if b.address in routes and routes[b.address][:2] != route:
                raise ConfigError(
                    f"{src}: {bwhere}: {b.address} has a different mac/switch_port "
                    f"in {routes[b.address][2]}"
                )
            routes.setdefault(b.address, (b.mac, b.switch_port, bwhere))
        if address_bits(v.address) == 128:
            _ipv6_vip(cfg, v)
        if v.mode == "dsr":
            _direct_server_return(cfg, v)
        if sum(b.weight for b in v.backends) == 0:
            raise ConfigError(
                f"{src}: {where}: total weight is 0 (at least one backend needs a weight above 0)"
            )
    _speaker_next_hops(cfg)


def _speaker_next_hops(cfg: Config) -> None:
    """A balancer's speaker (a balancer with `nexthop` or `nexthop6`) announces each family
    via that family's next hop: one for every family the tier announces."""
    announced = [f"{v.address}/{address_bits(v.address)}" for v in cfg.vips]
    announced += list(cfg.tier_announce)
    for b in cfg.tier:
        if not (b.nexthop or b.nexthop6):
            continue
        for p in announced:
            key, have = ("nexthop6", b.nexthop6) if ":" in p else ("nexthop", b.nexthop)
            if not have:
                family = "IPv6" if ":" in p else "IPv4"
                raise ConfigError(
                    f"{cfg.source}: tier.balancer {b.name!r}: {key}: needed to announce "
                    f"{p} (its speaker announces {family} routes via its {family} data address)"
                )


def _ipv6_vip(cfg: Config, v: Vip) -> None:
    """What an IPv6 VIP needs: backends of its own family (no NAT64)."""
    src, where = cfg.source, f"vip.{v.name}"
    for b in v.backends:
        if address_bits(b.address) != 128:
            raise ConfigError(
                f"{src}: {where}.backend {b.name!r}: {b.address} is IPv4, the VIP "
                f"{v.address} IPv6: a VIP's backends are of its family (no NAT64)"
            )


def _direct_server_return(cfg: Config, v: Vip) -> None:
    """What a DSR VIP needs: the balancer changes only the frame (destination MAC and
    port), so each backend must listen on the VIP's own port (nothing rewrites it) and be
    an L2 neighbour of the switch (its `mac` its own, not a router's that would route the
    VIP's packet back); its replies never cross the switch, so response time cannot be
    measured there."""
    src, where = cfg.source, f"vip.{v.name}"
    if v.algorithm == "leasttime":
        raise ConfigError(
            f"{src}: {where}: algorithm leasttime needs the backends' replies, which a "
            "dsr VIP never sees (use leastconn or leastpkt)"
        )
    gateways = {h.mac.lower(): h.name for h in cfg.hosts if h.prefix_len < h.address_bits}
    for b in v.backends:
        bwhere = f"{where}.backend {b.name!r}"
        if b.port != v.port:
            raise ConfigError(
                f"{src}: {bwhere}: port {b.port} differs from the VIP's {v.port}; a dsr "
                "VIP does not rewrite ports, so a backend listens on the VIP's port"
            )
        if b.mac.lower() in gateways:
            raise ConfigError(
                f"{src}: {bwhere}: mac {b.mac} is host {gateways[b.mac.lower()]!r}'s, a "
                "router's: a dsr backend must be on a segment the switch reaches directly"
            )
