"""A local stand-in for p4lang's apt repositories: packages, a signed flat index, a server.

Stand-in `p4lang-p4c`, `p4lang-bmv2`, `p4lang-pi` and distribution packages are built with
dpkg-deb; their tools are tiny scripts under /opt/p4lb-standin/bin that print a version, and
they are only ever installed into a throwaway root (dpkg --root), never over real tools. Each
repository is indexed with dpkg-scanpackages and signed with a throwaway gpg key, so apt
verifies it exactly as it verifies the real one. The server answers on 127.0.0.1 and can be
told to fail: some requests get an HTTP error, or a file of the wrong size (which apt reports
as "File has unexpected size ... Mirror sync in progress?").
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

STANDIN_BIN = "opt/p4lb-standin/bin"


def build_deb(out: Path, name: str, version: str, tools: dict[str, str], depends: str = "") -> None:
    """One stand-in .deb installing each tool as a script that prints its version line."""
    pkg = out.parent / f".build-{name}-{version}"
    (pkg / "DEBIAN").mkdir(parents=True)
    bindir = pkg / STANDIN_BIN
    bindir.mkdir(parents=True)
    # Every package owns a file of its own: one whose files all belong to others "disappears".
    (pkg / "opt/p4lb-standin" / name).write_text(f"{version}\n")
    for tool, line in tools.items():
        script = bindir / tool
        script.write_text(f"#!/bin/sh\necho '{line}'\n")
        script.chmod(0o755)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: p4lb tests <tests@p4lb.invalid>\n"
        + (f"Depends: {depends}\n" if depends else "")
        + "Description: p4lb install-test stand-in\n"
    )
    (pkg / "DEBIAN" / "control").write_text(control)
    subprocess.run(
        ["dpkg-deb", "-Zgzip", "--root-owner-group", "-b", str(pkg), str(out)],
        check=True,
        capture_output=True,
    )


def p4lang_debs(repo: Path, version: str, bmv2_version: str, with_bmv2: bool = True) -> None:
    """The three p4lang packages (BMv2 needs PI, as upstream's do): p4c and PI at `version`."""
    repo.mkdir(parents=True, exist_ok=True)
    build_deb(
        repo / f"p4lang-p4c_{version}_all.deb",
        "p4lang-p4c",
        version,
        {"p4c": f"p4c {version} (stand-in)", "p4c-bm2-ss": f"p4c-bm2-ss {version} (stand-in)"},
    )
    build_deb(repo / f"p4lang-pi_{version}_all.deb", "p4lang-pi", version, {})
    if with_bmv2:
        build_deb(
            repo / f"p4lang-bmv2_{bmv2_version}_all.deb",
            "p4lang-bmv2",
            bmv2_version,
            {"simple_switch_grpc": f"{bmv2_version} (stand-in)"},
            depends="p4lang-pi",
        )


class Signer:
    """A throwaway gpg key in its own home; `close` stops the gpg-agent it started."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(mode=0o700)
        self.gpg(
            "--quick-gen-key", "p4lb install tests <tests@p4lb.invalid>", "ed25519", "sign", "never"
        )

    def gpg(self, *args: str) -> bytes:
        cmd = ["gpg", "--homedir", str(self.home), "--batch", "--yes", "--quiet"]
        cmd += ["--pinentry-mode", "loopback", "--passphrase", "", *args]
        return subprocess.run(cmd, check=True, capture_output=True).stdout

    def public_key(self) -> bytes:
        return self.gpg("--armor", "--export")

    def close(self) -> None:
        subprocess.run(
            ["gpgconf", "--homedir", str(self.home), "--kill", "gpg-agent"], capture_output=True
        )


def index(repo: Path, signer: Signer) -> None:
    """Packages, Release, InRelease, Release.gpg and Release.key for a flat repository."""
    packages = subprocess.run(
        ["dpkg-scanpackages", "-m", "."], cwd=repo, check=True, capture_output=True
    ).stdout
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages))
    lines = ["Origin: p4lb-tests", "Label: p4lb-tests", f"Date: {formatdate(usegmt=True)}"]
    for field_name, algo in (("MD5Sum", "md5"), ("SHA256", "sha256")):
        lines.append(f"{field_name}:")
        for name in ("Packages", "Packages.gz"):
            data = (repo / name).read_bytes()
            lines.append(f" {hashlib.new(algo, data).hexdigest()} {len(data)} {name}")
    release = repo / "Release"
    release.write_text("\n".join(lines) + "\n")
    signer.gpg("--clearsign", "-o", str(repo / "InRelease"), str(release))
    signer.gpg("--detach-sign", "--armor", "-o", str(repo / "Release.gpg"), str(release))
    (repo / "Release.key").write_bytes(signer.public_key())


@dataclass
class Fault:
    """Requests whose path starts with `prefix` (and ends with `suffix`) fail `times` times
    (None: always) with HTTP `status`; status 0: a complete file of the wrong size; status -1:
    no answer for HANG seconds (longer than the timeout the tests give the script)."""

    prefix: str
    status: int
    times: int | None = 1
    suffix: str = ""


@dataclass
class Plan:
    faults: list[Fault] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, *faults: Fault) -> None:
        with self.lock:
            self.faults = list(faults)
            self.requests.clear()

    def fault_for(self, path: str) -> Fault | None:
        with self.lock:
            self.requests.append(path)
            for f in self.faults:
                if path.startswith(f.prefix) and path.endswith(f.suffix) and f.times != 0:
                    if f.times is not None:
                        f.times -= 1
                    return f
        return None


REASONS = {403: "Forbidden", 404: "Not Found", 503: "Service Unavailable"}
HANG = 3.0


def serve(root: Path, plan: Plan) -> http.server.ThreadingHTTPServer:
    """Serve `root` on 127.0.0.1 (a free port) in a daemon thread, failing as `plan` says."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            fault = plan.fault_for(self.path)
            if fault is None:
                super().do_GET()
                return
            if fault.status == -1:
                time.sleep(HANG)  # the client has given up by now; its socket is closed
                self.close_connection = True
                return
            if fault.status == 0:
                real = (root / self.path.lstrip("/")).read_bytes()
                body = real[: len(real) // 2]
                self.send_response(200)
            else:
                body = f"{REASONS.get(fault.status, 'Error')} (Mirror sync in progress?)\n".encode()
                self.send_response(fault.status, REASONS.get(fault.status))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def throwaway_root(root: Path, distro_url: str, keyring: Path) -> Path:
    """An empty dpkg/apt root whose only distribution repository is `distro_url`; returns the
    APT_CONFIG file that points apt (and dpkg, through apt) at it."""
    for d in (
        "etc/apt/sources.list.d",
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "etc/apt/keyrings",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/log",
    ):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "var/lib/dpkg/status").touch()
    (root / "etc/apt/sources.list").write_text(f"deb [signed-by={keyring}] {distro_url}/ /\n")
    conf = root.parent / "apt.conf"
    conf.write_text(
        f'Dir "{root}/";\n'
        f'Dir::State::status "{root}/var/lib/dpkg/status";\n'
        f'DPkg::Options {{ "--root={root}"; "--log={root}/var/log/dpkg.log"; }};\n'
        'APT::Sandbox::User "root";\n'
    )
    os.chmod(conf, 0o644)
    return conf
