"""The load-balancing intent as values: the switch, hosts, VIPs, their backends and health
check settings. Frozen dataclasses; nothing here knows about P4 tables."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

PROTOCOLS = ("tcp", "udp")
# How a VIP reaches its backends: "nat" rewrites the destination to the backend and the
# replies back to the VIP (both directions cross the switch); "dsr" (direct server return)
# rewrites only the frame toward the backend, which holds the VIP itself and answers the
# client directly, so replies never cross the switch.
MODES = ("nat", "dsr")
MAX_WEIGHT = 1000


class ConfigError(Exception):
    """A config the user wrote (or asked for) is not valid; the message is one line."""


@dataclass(frozen=True)
class TlsSettings:
    """`tls = { ca = ..., cert = ..., key = ... }`: P4Runtime over TLS. `ca` signs the
    switch's certificate; `cert` and `key` (both or neither) are the controller's own, for a
    switch that demands client certificates. `server_name`: the name the switch's
    certificate carries, when it is not the address's host. Paths are absolute (the reader
    resolves them against the config file's folder)."""

    ca: str
    cert: str = ""
    key: str = ""
    server_name: str = ""


@dataclass(frozen=True)
class SwitchConfig:
    address: str = "127.0.0.1:9559"
    device_id: int = 0
    election_id: int = 1
    mac: str = "00:00:00:00:01:00"
    # Ports that take part in ARP flooding; empty: every port named in the config.
    ports: tuple[int, ...] = ()
    # P4Runtime over TLS; None: clear text, allowed to a loopback address only unless
    # `insecure` says so explicitly.
    tls: TlsSettings | None = None
    insecure: bool = False


@dataclass(frozen=True)
class MetricsSettings:
    """`[metrics]`: `p4lb run` serves Prometheus metrics at /metrics and a live stats page at
    / on `listen` (HOST:PORT). Neither has authentication, so a non-loopback address needs
    `insecure = true`. `history_s`: how far back the page's plot goes (kept in memory)."""

    listen: str = "127.0.0.1:9100"
    insecure: bool = False
    history_s: int = 300


@dataclass(frozen=True)
class Host:
    """A machine the switch routes to that is not a backend (a client, a router). Its
    address is IPv4 or IPv6; `prefix_len` is at most the address's width, and by default
    that width (FULL_PREFIX: 32, or 128)."""

    name: str
    address: str
    mac: str
    switch_port: int
    prefix_len: int = -1

    def __post_init__(self) -> None:
        if self.prefix_len == FULL_PREFIX:
            object.__setattr__(self, "prefix_len", self.address_bits)

    @property
    def address_bits(self) -> int:
        """32 for an IPv4 address, 128 for an IPv6 one."""
        return address_bits(self.address)


FULL_PREFIX = -1  # Host.prefix_len's default: the whole address


def address_bits(address: str) -> int:
    """The width of an address the reader accepted: 128 for IPv6 (it has a colon), else 32."""
    return 128 if ":" in address else 32


@dataclass(frozen=True)
class Backend:
    name: str
    address: str
    port: int
    weight: int
    mac: str
    switch_port: int

    @property
    def active(self) -> bool:
        return self.weight > 0


@dataclass(frozen=True)
class HealthSettings:
    """One VIP's `[vip.NAME.health]` table: checks `p4lb run` makes of its backends (every key
    optional, a tcp VIP only).

        interval_s = 1.0     # start of one probe of a backend to the start of the next
        timeout_s = 0.5      # connect (and HTTP status line) deadline; at most interval_s
        rise = 2             # consecutive successes that bring a DOWN backend back UP
        fall = 2             # consecutive failures that take an UP backend DOWN
        http_path = ""       # "": TCP connect only; "/health": also GET it ...
        http_status = 200    # ... and expect this status (anything else is a failure)
        namespace = ""       # "": probe from the controller's namespace; a name
                             # (/run/netns/NAME) or a path (/proc/PID/ns/net: a Mininet
                             # host): probe from inside it (the probing thread enters it).
                             # "{backend}" in it becomes the backend's name: "{backend}"
                             # probes each backend from its own host's namespace.

    The defaults take a killed server out of rotation within fall * interval_s = 2 s (the
    issue's goal is 3 s); HAProxy's own defaults (inter 2 s, fall 3) would take 6 s."""

    interval_s: float = 1.0
    timeout_s: float = 0.5
    rise: int = 2
    fall: int = 2
    http_path: str = ""
    http_status: int = 200
    namespace: str = ""

    def __post_init__(self) -> None:
        problem = _settings_problem(self)
        if problem:
            raise ValueError(problem)


def _settings_problem(s: HealthSettings) -> str:
    if not (math.isfinite(s.interval_s) and s.interval_s > 0):
        return "interval_s: must be > 0"
    if not (math.isfinite(s.timeout_s) and 0 < s.timeout_s <= s.interval_s):
        return "timeout_s: must be > 0 and at most interval_s (probes would pile up)"
    if not 1 <= s.rise <= 100:
        return "rise: must be 1..100"
    if not 1 <= s.fall <= 100:
        return "fall: must be 1..100"
    if s.http_path and (not s.http_path.startswith("/") or any(c.isspace() for c in s.http_path)):
        return "http_path: must start with / and contain no spaces"
    if not 100 <= s.http_status <= 599:
        return "http_status: must be 100..599"
    return ""


# A VIP's `choices` = "all": the least-* algorithms compare every active backend.
CHOICES_ALL = 0
CHOICES_DEFAULT = CHOICES_ALL


@dataclass(frozen=True)
class Vip:
    name: str
    address: str
    protocol: str
    port: int
    algorithm: str
    mac: str
    backends: tuple[Backend, ...] = ()
    # `[vip.NAME.health]`: check the backends from `p4lb run`; None: no checks.
    health: HealthSettings | None = None
    # What the least-* algorithms compare for a new connection: every active backend
    # (CHOICES_ALL) or d >= 2 of them drawn by weight (power of d choices).
    choices: int = CHOICES_DEFAULT
    mode: str = "nat"

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.address, self.protocol, self.port)

    def backend(self, name: str) -> Backend:
        for b in self.backends:
            if b.name == name:
                return b
        raise ConfigError(f"VIP {self.name!r} has no backend {name!r}")


# Queueing disciplines a switch port can carry (`[qos.port.N]`, `p4lb qos set`). "-approx":
# BMv2 cannot do the real thing; the README's known limits say what differs.
DISCIPLINES = ("fifo", "codel", "sfq-approx", "pcq-approx", "fq_codel-approx", "cake-approx")
CLASSIFIERS = ("src", "dst")


@dataclass(frozen=True)
class QosPort:
    """One switch port's queueing discipline (`[qos.port.N]`); counts are packets, rates
    packets per second, times microseconds. 0 for a share or a class rate: none."""

    port: int
    discipline: str
    rate_pps: int  # the port's shaper (BMv2's queue rate)
    limit: int  # packets queued toward the port; tail drop above
    flow_limit: int = 0  # a flow bucket's share of the queue
    host_limit: int = 0  # a host bucket's (PCQ's class, CAKE's host) share
    classifier: str = "src"  # a host is the source (or destination) address
    class_rate_pps: int = 0  # PCQ: each class's rate (a meter)
    target_us: int = 0  # CoDel: acceptable standing queue delay (0: no CoDel)
    interval_us: int = 0  # CoDel: the window it must persist for before a drop

    @property
    def codel(self) -> bool:
        return self.target_us > 0

    @property
    def sparse_first(self) -> bool:
        """Flows with nothing queued go first (BMv2 priority queue 1)."""
        return self.discipline in ("sfq-approx", "fq_codel-approx", "cake-approx")


@dataclass(frozen=True)
class QosSettings:
    """`[qos]`: BMv2's Thrift port on this host (queue rates and depths are set over Thrift,
    which is reachable from this host only) and the ports with a discipline."""

    thrift_port: int = 9090
    ports: tuple[QosPort, ...] = ()

    def port(self, number: int) -> QosPort | None:
        return next((p for p in self.ports if p.port == number), None)


@dataclass(frozen=True)
class Balancer:
    """One switch of a tier (`[[tier.balancer]]`): where its P4Runtime server is, its own
    MAC and flooding ports, the hosts only it routes to (its BGP speaker), the speaker the
    controller drives (GoBGP's API in a network namespace, announcing IPv4 routes via
    `nexthop` and IPv6 ones via `nexthop6`), and whether it is being drained (programmed,
    announcing nothing)."""

    name: str
    address: str
    device_id: int
    mac: str
    ports: tuple[int, ...] = ()
    hosts: tuple[Host, ...] = ()
    speaker_netns: str = ""
    speaker_api: str = "127.0.0.1:50051"
    nexthop: str = ""
    nexthop6: str = ""
    drain: bool = False
    # Its own TLS settings (None: the [switch] table's) and clear-text permission.
    tls: TlsSettings | None = None
    insecure: bool = False


@dataclass(frozen=True)
class Config:
    switch: SwitchConfig = field(default_factory=SwitchConfig)
    hosts: tuple[Host, ...] = ()
    vips: tuple[Vip, ...] = ()
    source: str = "<config>"
    # A tier: the balancers that all hold this intent (empty: the one [switch]), what their
    # speakers announce besides the VIPs, and how long a copied connection may go unused.
    tier: tuple[Balancer, ...] = ()
    tier_announce: tuple[str, ...] = ()
    tier_state_ttl_s: float = 3600.0
    # This intent is one balancer's of a tier: its stateful VIPs share their connections.
    shared: bool = False
    # `[metrics]`: Prometheus metrics and the stats page from `p4lb run`; None: off.
    metrics: MetricsSettings | None = None
    # Queueing disciplines on switch ports (`[qos]`); None: no [qos] table.
    qos: QosSettings | None = None

    def balancer(self, name: str) -> Balancer:
        for b in self.tier:
            if b.name == name:
                return b
        raise ConfigError(f"{self.source}: no balancer {name!r} in [tier]")

    def vip(self, name: str) -> Vip:
        for v in self.vips:
            if v.name == name or f"{v.address}:{v.port}" == name:
                return v
        raise ConfigError(f"{self.source}: no VIP {name!r}")

    def with_vip(self, vip: Vip) -> Config:
        """A copy with `vip` replacing the VIP of the same name (or appended)."""
        vips = [vip if v.name == vip.name else v for v in self.vips]
        if not any(v.name == vip.name for v in self.vips):
            vips.append(vip)
        return replace(self, vips=tuple(vips))

    def without_vip(self, name: str) -> Config:
        self.vip(name)
        return replace(self, vips=tuple(v for v in self.vips if v.name != name))


def member_config(cfg: Config, b: Balancer) -> Config:
    """The intent as balancer `b` holds it: the tier's VIPs, backends and hosts, with its own
    switch address, id, MAC and flooding ports, and its own hosts."""
    return replace(
        cfg,
        switch=replace(
            cfg.switch,
            address=b.address,
            device_id=b.device_id,
            mac=b.mac,
            ports=b.ports or cfg.switch.ports,
            tls=b.tls or cfg.switch.tls,
            insecure=b.insecure or cfg.switch.insecure,
        ),
        hosts=cfg.hosts + b.hosts,
        shared=True,
    )


def switch_configs(cfg: Config) -> list[tuple[str, Config]]:
    """Every switch the intent describes, named: the tier's balancers, or the one [switch]."""
    if cfg.tier:
        return [(b.name, member_config(cfg, b)) for b in cfg.tier]
    return [("switch", cfg)]
