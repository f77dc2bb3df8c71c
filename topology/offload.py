"""Turn checksum offload off on an interface without the ethtool program (the ETHTOOL_S*CSUM
ioctls it uses). With offload on, a veth hands the switch TCP segments whose checksum is a
placeholder; the switch fixes it on the packets it rewrites (NAT) but not on the ones it
only routes, so those reach the other host with a bad checksum and are dropped.

Run inside the host's namespace: `python -m topology.offload IFNAME`; prints the resulting
tx/rx checksum state and exits non-zero when it could not be turned off."""

from __future__ import annotations

import array
import fcntl
import socket
import struct
import sys

SIOCETHTOOL = 0x8946
ETHTOOL_GRXCSUM, ETHTOOL_SRXCSUM = 0x14, 0x15
ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM = 0x16, 0x17


def _ethtool(sock: socket.socket, ifname: str, cmd: int, data: int = 0) -> int:
    buf = array.array("B", struct.pack("II", cmd, data))
    addr, _ = buf.buffer_info()
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, struct.pack("16sP", ifname.encode(), addr))
    return int(struct.unpack("II", buf.tobytes())[1])


def checksum_offload_off(ifname: str) -> tuple[int, int]:
    """Turn tx and rx checksum offload off; returns the (tx, rx) state read back (0 = off)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _ethtool(s, ifname, ETHTOOL_STXCSUM, 0)
        _ethtool(s, ifname, ETHTOOL_SRXCSUM, 0)
        return _ethtool(s, ifname, ETHTOOL_GTXCSUM), _ethtool(s, ifname, ETHTOOL_GRXCSUM)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m topology.offload IFNAME", file=sys.stderr)
        return 2
    try:
        tx, rx = checksum_offload_off(args[0])
    except OSError as e:
        print(f"{args[0]}: checksum offload: {e}", file=sys.stderr)
        return 1
    state = {True: "on", False: "off"}
    print(f"{args[0]}: tx-checksumming {state[bool(tx)]}, rx-checksumming {state[bool(rx)]}")
    return 0 if (tx, rx) == (0, 0) else 1


if __name__ == "__main__":
    sys.exit(main())
