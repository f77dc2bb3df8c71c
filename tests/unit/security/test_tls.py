"""P4Runtime over TLS against the fake switch serving TLS with client authentication (as
`make run` starts BMv2): the controller with its certificate programs it, a client without
one, with one of another CA, or in clear text gets nothing; p4lb shell connects the same way."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from p4lb.cli.main import main
from p4lb.cli.shell import TLS_LAUNCHER, shell_command
from p4lb.intent import reader
from p4lb.intent.model import TlsSettings
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from tests.unit.fake_switch import FakeSwitch
from topology.pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("TLS tests skipped: missing openssl")
    return make_pki(tmp_path_factory.mktemp("pki"), ["switch"])


@pytest.fixture
def tls_fake(pki: Pki) -> Iterator[FakeSwitch]:
    server = pki.servers["switch"]
    creds = grpc.ssl_server_credentials(
        [(server.key.read_bytes(), server.cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    sw = FakeSwitch().start(credentials=creds)
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def tls_cfg(cfg_file: Path, tls_fake: FakeSwitch, pki: Pki) -> Path:
    tls = f'tls = {{ ca = "{pki.ca}", cert = "{pki.client.cert}", key = "{pki.client.key}" }}'
    text = cfg_file.read_text().replace(
        'address = "127.0.0.1:9559"', f'address = "{tls_fake.address}"\n{tls}'
    )
    cfg_file.write_text(text)
    return cfg_file


def test_apply_over_tls_with_the_controller_certificate(
    tls_cfg: Path, tls_fake: FakeSwitch
) -> None:
    assert main(["-c", str(tls_cfg), "apply"]) == 0
    assert tls_fake.entries("vip_table")


def test_no_stream_without_a_certificate_of_our_ca(
    tls_fake: FakeSwitch, pki: Pki, tmp_path: Path
) -> None:
    ca = str(pki.ca)
    other = make_pki(tmp_path / "other", [])
    with Switch(
        tls_fake.address, 0, 10, tls=TlsSettings(ca, str(pki.client.cert), str(pki.client.key))
    ) as sw:
        assert sw.is_primary
    for tls in (
        TlsSettings(ca),  # no client certificate
        TlsSettings(ca, str(other.client.cert), str(other.client.key)),  # another CA's
        TlsSettings(str(other.ca), str(pki.client.cert), str(pki.client.key)),  # wrong server CA
        None,  # clear text
    ):
        with pytest.raises(SwitchError):
            Switch(tls_fake.address, 0, 20, tls=tls).close()


def test_shell_connects_with_the_config_tls(tls_cfg: Path, pki: Pki) -> None:
    cfg = reader.load(tls_cfg)
    cmd = shell_command(cfg, primary=False, election_id=None)
    assert cmd[1:6] == ["-c", TLS_LAUNCHER, str(pki.ca), str(pki.client.cert), str(pki.client.key)]
    assert cmd[7:9] == ["--grpc-addr", cfg.switch.address]
