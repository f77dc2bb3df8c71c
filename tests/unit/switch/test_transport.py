"""Why a switch session did not come up, told apart: a closed port (refused), a listener that
speaks TLS only (the lab's switch, asked in clear text), one that speaks neither."""

from __future__ import annotations

import shutil
import socket
import ssl
import threading
from collections.abc import Iterator

import grpc
import pytest

from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from p4lb.switch.transport import Transport, probe
from tests.unit.fake_switch import FakeSwitch
from topology.pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("TLS tests skipped: missing openssl")
    return make_pki(tmp_path_factory.mktemp("pki"), ["switch"])


def closed_port() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def tls_listener(pki: Pki) -> Iterator[str]:
    """A plain TLS server on loopback (no gRPC): it completes handshakes, then closes."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.servers["switch"].cert, pki.servers["switch"].key)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            try:
                with ctx.wrap_socket(conn, server_side=True):
                    pass
            except OSError:  # a clear-text client: the handshake fails, as it should
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """Accepts connections and closes them without a word (neither TLS nor HTTP/2)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_probe_tells_refused_tls_and_other_apart(tls_listener: str, silent_listener: str) -> None:
    assert probe(closed_port()) is Transport.REFUSED
    assert probe(tls_listener) is Transport.TLS
    assert probe(silent_listener) is Transport.OTHER


def test_clear_text_to_a_tls_only_listener_says_tls_is_required(tls_listener: str) -> None:
    with pytest.raises(SwitchError) as e:
        Switch(tls_listener, 0, None)
    assert str(e.value) == (
        f"switch at {tls_listener} refused clear text: it requires TLS; give the config a "
        "[switch.tls] table (the running make run's config has one: sudo p4lb ... uses it by "
        "default)"
    )


def test_clear_text_to_a_grpc_tls_switch_says_tls_is_required(pki: Pki) -> None:
    """The fake P4Runtime switch serving TLS with client authentication, as make run's BMv2."""
    server = pki.servers["switch"]
    creds = grpc.ssl_server_credentials(
        [(server.key.read_bytes(), server.cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    sw = FakeSwitch().start(credentials=creds)
    try:
        with pytest.raises(SwitchError, match=r"refused clear text: it requires TLS"):
            Switch(sw.address, 0, 10)
    finally:
        sw.stop()


def test_closed_port_is_unreachable_not_tls() -> None:
    address = closed_port()
    with pytest.raises(SwitchError) as e:
        Switch(address, 0, None)
    assert str(e.value) == (
        f"switch at {address} is unreachable (connection refused: nothing listens there)"
    )


def test_a_listener_that_is_not_p4runtime_is_unreachable(silent_listener: str) -> None:
    with pytest.raises(SwitchError) as e:
        Switch(silent_listener, 0, None)
    assert str(e.value) == (
        f"switch at {silent_listener} is unreachable (no P4Runtime server answered within 3 s)"
    )
