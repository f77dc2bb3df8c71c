"""BMv2's Thrift runtime server, kept to this host.

simple_switch_grpc always serves Thrift (`runtime_CLI`, `simple_switch_CLI`) on every
address of its network namespace: BMv2 has no option to bind it elsewhere, and it has no
authentication or arbitration, so whoever reaches the port can rewrite tables, registers,
mirroring and multicast behind the controller. Every switch the project starts runs in the
root namespace on veths whose far ends are Mininet hosts, the tier's bridges or test
namespaces, so the kernel would deliver their connections to it.

While a switch runs, an nftables table of its own (`inet p4lb_thrift_PORT`) rejects (TCP
reset) every connection to its Thrift port that does not arrive on the loopback interface.
A connection from a process of this host to any of its addresses goes through `lo`, so
`simple_switch_CLI --thrift-port PORT` keeps working here; one from another namespace,
another machine, or a switch port is refused. The table is removed when the switch stops.
"""

from __future__ import annotations

import shutil
import subprocess

TABLE_PREFIX = "p4lb_thrift_"


def table_name(port: int) -> str:
    return f"{TABLE_PREFIX}{port}"


def ruleset(port: int) -> str:
    """The nft script that (re)creates the port's table in one transaction."""
    t = table_name(port)
    return f"""add table inet {t}
delete table inet {t}
table inet {t} {{
    chain input {{
        type filter hook input priority filter - 10; policy accept;
        iif != "lo" tcp dport {port} counter reject with tcp reset
    }}
}}
"""


def _nft() -> str:
    nft = shutil.which("nft")
    if nft is None:
        raise RuntimeError(
            "nft (nftables) is not installed: BMv2's Thrift port would be open to every "
            "network this host is on; run `make deps` (or apt-get install nftables)"
        )
    return nft


def confine(port: int) -> None:
    """Only this host may connect to `port` from now on (until release)."""
    r = subprocess.run(
        [_nft(), "-f", "-"], input=ruleset(port), capture_output=True, text=True, timeout=30
    )
    if r.returncode != 0:
        raise RuntimeError(f"nft could not confine Thrift port {port}: {r.stderr.strip()}")


def release(port: int) -> None:
    """Remove the port's table (nothing if it is not there)."""
    nft = shutil.which("nft")
    if nft is not None:
        subprocess.run(
            [nft, "delete", "table", "inet", table_name(port)], capture_output=True, timeout=30
        )


def confined_ports() -> list[int]:
    """The Thrift ports whose table exists now."""
    nft = shutil.which("nft")
    if nft is None:
        return []
    out = subprocess.run(
        [nft, "list", "tables", "inet"], capture_output=True, text=True, timeout=30
    ).stdout
    return sorted(
        int(w[len(TABLE_PREFIX) :])
        for w in out.split()
        if w.startswith(TABLE_PREFIX) and w[len(TABLE_PREFIX) :].isdigit()
    )


def thrift_port_of(args: list[str] | tuple[str, ...]) -> int | None:
    """The Thrift port on a simple_switch command line (None: not given)."""
    args = list(args)
    if "--thrift-port" in args:
        i = args.index("--thrift-port")
        if i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
    return None
