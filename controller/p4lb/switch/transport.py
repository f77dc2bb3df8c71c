"""Why a clear-text P4Runtime connection did not come up: nothing listens at the address, it
does not answer, or what listens speaks TLS (the lab's and the tier's switches take TLS
only). Asked only after gRPC gave up, so a working session never sees the probe."""

from __future__ import annotations

import contextlib
import socket
import ssl
from enum import Enum

PROBE_TIMEOUT_S = 1.0


class Transport(Enum):
    REFUSED = "refused"  # nothing listens: the connection is refused
    SILENT = "silent"  # no answer to the connection (filtered, or a host that is down)
    TLS = "tls"  # a TLS server: it answered a ClientHello with a TLS record
    OTHER = "other"  # it accepts connections, but did not answer a ClientHello as TLS does


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def client_hello() -> bytes:
    """The first flight of a TLS client (no certificate checks: the bytes are only a probe)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_side=False)
    # It waits for the server's answer: the ClientHello is in `outgoing`.
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> Transport:
    """Connect to `address` (host:port) and send a TLS ClientHello: a TLS server answers
    with a handshake (0x16) or alert (0x15) record of version 3.x."""
    try:
        host, port = split_address(address)
    except ValueError:
        return Transport.SILENT
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        return Transport.REFUSED
    except OSError:
        return Transport.SILENT
    with sock:
        try:
            sock.sendall(client_hello())
            first = sock.recv(5)
        except OSError:
            return Transport.OTHER
    is_tls = first[:1] in (b"\x15", b"\x16") and first[1:2] == b"\x03"
    return Transport.TLS if is_tls else Transport.OTHER
