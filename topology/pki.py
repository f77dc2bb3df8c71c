"""A throwaway certificate authority for the switches this project starts (`make run`, the
tier, the tests): one CA, a server certificate per switch (for 127.0.0.1 and localhost), a
client certificate for the controller. Made with the openssl command (ECDSA P-256, valid
for a few days), never by hand; the folder and every key are readable by their owner only.
A real network wants its own CA and certificates: see README's Security section."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DAYS = 7
SERVER_NAMES = "IP:127.0.0.1,IP:::1,DNS:localhost"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Where a make_pki() put things: the CA's certificate, one pair per server name, the
    controller's pair."""

    ca: Path
    servers: dict[str, Pair]
    client: Pair


def _openssl(*args: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("openssl is not installed: it makes the switches' certificates")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {args[0]}: {r.stderr.strip()[-300:]}")


def _key(path: Path) -> None:
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
    )
    path.chmod(0o600)


def _issue(folder: Path, name: str, cn: str, ext: str) -> Pair:
    """A key and a certificate for `cn` signed by the folder's CA, with extensions `ext`."""
    pair = Pair(folder / f"{name}.crt", folder / f"{name}.key")
    _key(pair.key)
    csr = folder / f"{name}.csr"
    _openssl("req", "-new", "-key", str(pair.key), "-subj", f"/CN={cn}", "-out", str(csr))
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".ext", delete=False) as f:
        f.write(ext)
    try:
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(folder / "ca.crt"),
            "-CAkey", str(folder / "ca.key"), "-CAcreateserial", "-days", str(DAYS),
            "-sha256", "-extfile", f.name, "-out", str(pair.cert),
        )  # fmt: skip
    finally:
        os.unlink(f.name)
        csr.unlink(missing_ok=True)
    return pair


def make_pki(folder: Path, servers: list[str], client: str = "p4lb") -> Pki:
    """A fresh CA in `folder` (mode 0700, replacing what was there), a server pair per name
    in `servers` and the controller's pair `client`."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    _key(folder / "ca.key")
    _openssl(
        "req", "-x509", "-new", "-key", str(folder / "ca.key"), "-subj", "/CN=p4lb throwaway CA",
        "-days", str(DAYS), "-sha256", "-out", str(folder / "ca.crt"),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    server_ext = (
        f"subjectAltName={SERVER_NAMES}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature\n"
    )
    client_ext = "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n"
    return Pki(
        ca=folder / "ca.crt",
        servers={s: _issue(folder, s, s, server_ext) for s in servers},
        client=_issue(folder, client, client, client_ext),
    )
