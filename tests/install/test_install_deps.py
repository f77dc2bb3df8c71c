"""scripts/install-deps.sh end to end, against stand-in p4lang repositories on 127.0.0.1.

Every route of the script runs with real apt, real dpkg and real signature checks, into a
throwaway root: no package, source line or key lands on this machine, and nothing but
127.0.0.1 is contacted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.install import repo
from tests.install.repo import Fault, Plan

pytestmark = pytest.mark.install

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-deps.sh"
NEEDED = [
    "dpkg-deb",
    "dpkg-scanpackages",
    "dpkg",
    "apt-get",
    "apt-config",
    "gpg",
    "gpgconf",
    "curl",
]
MISSING = [t for t in NEEDED if shutil.which(t) is None] + (["root"] if os.geteuid() else [])
if MISSING:
    pytest.skip(f"install layer skipped: missing {', '.join(MISSING)}", allow_module_level=True)

ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout
# p4c and PI versions of the stand-in routes, and their BMv2's. home:p4lang still carries the p4c
# 1.2.4.8 that rejects lb.p4: its route installs, and the version check turns it down.
LATEST, OLD = "1.2.5.2-1", "1.2.4.8-1"
LATEST_BMV2, OLD_BMV2 = "1.15.5-1", "1.15.0-1"


def host_apt() -> dict[str, float]:
    """This machine's own apt sources and keys (the tests must never touch them)."""
    dirs = [Path("/etc/apt/sources.list.d"), Path("/etc/apt/keyrings")]
    return {str(p): p.stat().st_mtime for d in dirs if d.is_dir() for p in d.iterdir()}


@pytest.fixture(scope="module", autouse=True)
def host_untouched() -> Iterator[None]:
    before = host_apt()
    yield
    assert host_apt() == before


@dataclass
class Site:
    url: str
    plan: Plan
    distro_key: Path
    www: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("site")
    signer = repo.Signer(base / "gnupg")
    try:
        www = base / "www"
        repo.p4lang_debs(www / "latest/xUbuntu_22.04", LATEST, LATEST_BMV2)
        repo.p4lang_debs(www / "old/xUbuntu_22.04", OLD, OLD_BMV2)
        repo.p4lang_debs(www / "old/xUbuntu_24.04", OLD, OLD_BMV2, with_bmv2=False)  # as upstream
        distro = www / "distro"
        distro.mkdir()
        repo.build_deb(
            distro / "tools.deb",
            "p4lb-standin-tools",
            "1.0",
            {"mn": "2.3.0", "ab": "This is ApacheBench, Version 2.3", "tcpdump": "tcpdump 4.99.1"},
        )
        repo.build_deb(distro / "py.deb", "python3.11", "3.11.0-1", {"python3.11": "Python 3.11.0"})
        repo.build_deb(distro / "pyvenv.deb", "python3.11-venv", "3.11.0-1", {})
        repo.build_deb(distro / "sudo.deb", "sudo", "1.9.13-1", {"sudo": "Sudo version 1.9.13"})
        # The tier's engines, as Debian names them.
        repo.build_deb(distro / "frr.deb", "frr", "8.4.4-1", {"vtysh": "vtysh 8.4.4"})
        repo.build_deb(distro / "gobgpd.deb", "gobgpd", "3.10.0-1", {"gobgpd": "gobgpd 3.10.0"})
        for d in ("latest/xUbuntu_22.04", "old/xUbuntu_22.04", "old/xUbuntu_24.04", "distro"):
            repo.index(www / d, signer)
        key = base / "distro.gpg"
        key.write_bytes(signer.gpg("--export"))
        plan = Plan()
        server = repo.serve(www, plan)
        try:
            yield Site(f"http://127.0.0.1:{server.server_address[1]}", plan, key, www)
        finally:
            server.shutdown()
            server.server_close()
    finally:
        signer.close()


# The source route's stand-in: records that it ran and with which prefix, then installs tools
# that print the versions in STANDIN_VERSIONS (or fails, printing what the real one prints).
SOURCE_STANDIN = """#!/bin/sh
echo "ran prefix=$P4LB_PREFIX" >>"$STANDIN_LOG"
if [ -n "$STANDIN_FAIL" ]; then
    echo "source route: FAILED: step p4c (exit 2); the end of /src/logs/p4c.log:"
    exit 1
fi
mkdir -p "$P4LB_PREFIX/bin"
set -- $STANDIN_VERSIONS
for t in p4c p4c-bm2-ss; do
    printf '#!/bin/sh\\necho "%s %s"\\n' "$t" "$1" >"$P4LB_PREFIX/bin/$t"
done
printf '#!/bin/sh\\necho "%s-source"\\n' "$2" >"$P4LB_PREFIX/bin/simple_switch_grpc"
chmod +x "$P4LB_PREFIX/bin/"*
"""


# systemctl's stand-in: records what it was asked.
SYSTEMCTL_STANDIN = """#!/bin/sh
echo "$@" >>"$STANDIN_SYSTEMCTL_LOG"
"""


@dataclass
class Machine:
    root: Path
    env: dict[str, str]
    site: Site
    prefix: Path
    source_log: Path

    @property
    def wrapper(self) -> Path:
        return Path(self.env["P4LB_WRAPPER"])

    def systemctl_calls(self) -> list[str]:
        log = Path(self.env["STANDIN_SYSTEMCTL_LOG"])
        return log.read_text().splitlines() if log.exists() else []

    def source_runs(self) -> list[str]:
        """One line per run of the source route: what it was told."""
        return self.source_log.read_text().splitlines() if self.source_log.exists() else []

    def run(self, os_id: str = "ubuntu", version: str = "22.04") -> tuple[int, str]:
        release = self.root.parent / "os-release"
        release.write_text(f'ID={os_id}\nVERSION_ID="{version}"\nPRETTY_NAME="{os_id} {version}"\n')
        p = subprocess.run(
            ["bash", str(SCRIPT)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        print(p.stdout, p.stderr)
        return p.returncode, p.stdout

    def installed(self, package: str) -> str:
        p = subprocess.run(
            ["dpkg-query", f"--root={self.root}", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
        )
        return p.stdout

    def lists(self) -> list[str]:
        return sorted(p.name for p in (self.root / "etc/apt/sources.list.d").iterdir())


@pytest.fixture
def machine(site: Site, tmp_path: Path) -> Machine:
    root = tmp_path / "root"
    conf = repo.throwaway_root(root, f"{site.url}/distro", site.distro_key)
    site.plan.reset()
    standin = tmp_path / "source-route"
    standin.write_text(SOURCE_STANDIN)
    standin.chmod(0o755)
    prefix = tmp_path / "prefix"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(SYSTEMCTL_STANDIN)
    systemctl.chmod(0o755)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LC_ALL": "C",
        "APT_CONFIG": str(conf),
        "P4LB_OS_RELEASE": str(tmp_path / "os-release"),
        "P4LB_REPO_LATEST": f"{site.url}/latest",
        "P4LB_REPO_OLD": f"{site.url}/old",
        "P4LB_KEYRING_DIR": str(root / "etc/apt/keyrings"),
        # The source route's prefix first, as /usr/local/bin is on a user's PATH.
        "P4LB_TOOL_PATH": f"{prefix / 'bin'}:{root / repo.STANDIN_BIN}",
        "P4LB_SOURCE_ROUTE": str(standin),
        "P4LB_PREFIX": str(prefix),
        "STANDIN_LOG": str(tmp_path / "source-runs"),
        "STANDIN_VERSIONS": "1.2.5.16 1.15.5",
        "STANDIN_FAIL": "",
        "P4LB_K6": "0",
        "P4LB_CHROMIUM": "0",
        "P4LB_DISTRO_PKGS": "p4lb-standin-tools",
        "P4LB_RETRIES": "4",
        "P4LB_BACKOFF": "0",
        "P4LB_VENV": "0",
        # Inside the throwaway root: the p4lb command, the policy-rc.d; systemctl's stand-in.
        "P4LB_WRAPPER": str(root / "usr/local/bin/p4lb"),
        "P4LB_POLICY_RC_D": str(root / "usr/sbin/policy-rc.d"),
        "P4LB_SYSTEMCTL": str(systemctl),
        "STANDIN_SYSTEMCTL_LOG": str(tmp_path / "systemctl.log"),
    }
    return Machine(root, env, site, prefix, tmp_path / "source-runs")


def lines(out: str, *needles: str) -> list[str]:
    return [ln for ln in out.splitlines() if any(n in ln for n in needles)]


latest_route = pytest.mark.skipif(
    ARCH.strip() != "amd64", reason=f"home:p4lang:latest is amd64 only; this is {ARCH.strip()}"
)


@latest_route
def test_latest_route_installs(machine: Machine) -> None:
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "installed p4lang-p4c p4lang-bmv2 p4lang-pi from home:p4lang:latest")
    assert f"p4c {LATEST}, simple_switch_grpc {LATEST_BMV2}" in out
    assert out.rstrip().endswith("deps: next: make run")
    assert machine.source_runs() == []
    assert machine.installed("p4lang-bmv2") == LATEST_BMV2
    # Ubuntu 22.04's python3 is 3.10: the script brings python3.11 and its venv module.
    assert machine.installed("python3.11") and machine.installed("python3.11-venv")
    assert machine.lists() == ["p4lang-latest.list"]
    line = (machine.root / "etc/apt/sources.list.d/p4lang-latest.list").read_text()
    assert line == (
        f"deb [signed-by={machine.root}/etc/apt/keyrings/p4lang-latest.gpg] "
        f"{machine.site.url}/latest/xUbuntu_22.04/ /\n"
    )
    assert not [r for r in machine.site.plan.requests if r.startswith("/old/")]


@latest_route
def test_transient_errors_are_retried(machine: Machine) -> None:
    machine.site.plan.reset(
        Fault("/latest/", 403, suffix="Release.key"),
        Fault("/latest/", 503, suffix="InRelease"),
        Fault("/latest/", 0, suffix=".deb"),  # wrong size: "Mirror sync in progress?"
    )
    rc, out = machine.run()
    assert rc == 0, out
    retries = lines(out, "transient error")
    assert len(retries) == 3, out
    assert "403" in retries[0] and "503" in retries[1] and "Mirror sync" in retries[2]
    assert lines(out, "from home:p4lang:latest")
    assert machine.installed("p4lang-p4c") == LATEST


@latest_route
def test_timeouts_are_retried(machine: Machine) -> None:
    machine.env["P4LB_TIMEOUT"] = "1"
    machine.site.plan.reset(
        Fault("/latest/", -1, suffix="Release.key"), Fault("/latest/", -1, times=2, suffix=".deb")
    )
    rc, out = machine.run()
    assert rc == 0, out
    retries = lines(out, "transient error")
    assert len(retries) == 2, out
    # curl says so; apt, having given up on a silent connection, says "Connection failed".
    assert "timed out" in retries[0] and "Connection failed" in retries[1]
    assert machine.installed("p4lang-p4c") == LATEST


def test_latest_not_published_falls_back(machine: Machine) -> None:
    # home:p4lang keeps only the newest revision: an index may name a .deb already gone.
    machine.site.plan.reset(
        Fault("/latest/", 404, times=None), Fault("/old/", 404, suffix="_all.deb")
    )
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "home:p4lang: transient error (E: Failed to fetch", "404  Not Found")
    if ARCH.strip() == "amd64":
        assert lines(out, "home:p4lang:latest failed (missing)")
    assert lines(out, "installed p4lang-p4c p4lang-bmv2 p4lang-pi from home:p4lang")
    assert machine.installed("p4lang-bmv2") == OLD_BMV2
    assert machine.lists() == ["p4lang.list"]  # the failed route left nothing behind
    # ... and its p4c is too old for lb.p4: the source route comes last and gives one.
    assert lines(
        out, "home:p4lang gave a toolchain that is too old: p4c 1.2.4.8-1 (needs >= 1.2.5)"
    )
    assert machine.source_runs() == [f"ran prefix={machine.prefix}"]
    assert lines(out, "installed p4c and BMv2 from source")
    assert lines(out, "installed: p4c 1.2.5.16, simple_switch_grpc 1.15.5-source")


@latest_route
def test_latest_down_gives_up_then_falls_back(machine: Machine) -> None:
    machine.site.plan.reset(Fault("/latest/", 503, times=None))
    rc, out = machine.run()
    assert rc == 0, out
    assert len(lines(out, "home:p4lang:latest: transient error")) == 3  # 4 tries in all
    assert lines(out, "home:p4lang:latest failed (transient, gave up after 4 tries)")
    assert machine.installed("p4lang-p4c") == OLD
    assert len(machine.source_runs()) == 1  # home:p4lang's p4c is too old


def test_all_routes_fail(machine: Machine) -> None:
    machine.site.plan.reset(Fault("/latest/", 503, times=None), Fault("/old/", 403, times=None))
    machine.env["STANDIN_FAIL"] = "1"
    rc, out = machine.run()
    assert rc == 2, out
    assert lines(out, "MISSING: p4c p4c-bm2-ss simple_switch_grpc. Everything else is installed.")
    assert lines(out, "home:p4lang (xUbuntu_22.04): transient, gave up after 4 tries")
    # The source route ran last, said which step failed, and how to go on.
    assert len(machine.source_runs()) == 1
    assert lines(out, "source route: FAILED: step p4c (exit 2); the end of /src/logs/p4c.log:")
    assert lines(
        out, "the source route failed (its message is above); 'make deps' again resumes it"
    )
    assert lines(out, "What to do: if a repository was down")
    # The rest is installed all the same, and no broken source line is left for apt.
    assert machine.installed("p4lb-standin-tools") and machine.installed("python3.11")
    assert lines(out, "installed: mn 2.3.0, ab 2.3, tcpdump 4.99.1")
    assert machine.lists() == []


def test_ubuntu_2404_has_no_bmv2(machine: Machine) -> None:
    machine.env["STANDIN_FAIL"] = "1"
    rc, out = machine.run(version="24.04")
    assert rc == 2, out
    assert lines(out, "skipping home:p4lang:latest: it publishes for xUbuntu_22.04 (amd64) only")
    assert lines(out, "(xUbuntu_24.04): missing: E: Unable to locate package p4lang-bmv2")
    assert not [r for r in machine.site.plan.requests if r.startswith("/latest/")]
    assert len(machine.source_runs()) == 1


@pytest.mark.parametrize(
    ("os_id", "version", "dist"),
    [("debian", "12", "Debian_12"), ("ubuntu", "24.04", "xUbuntu_24.04")],
)
def test_source_route_where_no_package_has_bmv2(
    machine: Machine, os_id: str, version: str, dist: str
) -> None:
    # Debian 12 (no tree: 404) and Ubuntu 24.04 (a tree without BMv2) end with a working switch.
    rc, out = machine.run(os_id, version)
    assert rc == 0, out
    assert lines(out, f"home:p4lang ({dist}): missing")
    assert machine.source_runs() == [f"ran prefix={machine.prefix}"]
    assert lines(out, "installed: p4c 1.2.5.16, simple_switch_grpc 1.15.5-source")
    assert out.rstrip().endswith("deps: next: make run")


def test_from_source_forced(machine: Machine) -> None:
    machine.env["P4LB_FROM_SOURCE"] = "1"
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "P4LB_FROM_SOURCE=1: building p4c and BMv2 from source")
    assert not [r for r in machine.site.plan.requests if r.startswith(("/latest/", "/old/"))]
    assert machine.source_runs() == [f"ran prefix={machine.prefix}"]
    assert machine.lists() == []


def test_source_route_too_old_is_reported(machine: Machine) -> None:
    machine.env["P4LB_FROM_SOURCE"] = "1"
    machine.env["STANDIN_VERSIONS"] = "1.2.4.8 1.15.5"
    rc, out = machine.run()
    assert rc == 2, out
    assert lines(
        out,
        "the source route finished, but p4c and BMv2 on PATH are too old: "
        "p4c 1.2.4.8 (needs >= 1.2.5)",
    )
    assert lines(out, "MISSING: a new enough p4c and BMv2 (p4c 1.2.4.8 (needs >= 1.2.5))")


def test_rerun_is_a_noop(machine: Machine) -> None:
    rc, first = machine.run()
    assert rc == 0, first
    state = {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in machine.root.rglob("*")
        if p.is_file() and "/var/cache/" not in str(p)
    }
    machine.site.plan.reset()
    rc, out = machine.run()
    assert rc == 0, out
    assert machine.site.plan.requests == []
    assert lines(out, "distribution packages already installed")
    assert lines(out, "p4c and BMv2 already installed")
    after = {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in machine.root.rglob("*")
        if p.is_file() and "/var/cache/" not in str(p)
    }
    assert after == state


def test_already_installed_fetches_nothing(machine: Machine, tmp_path: Path) -> None:
    # A source build in its own prefix (as into /usr/local), distribution packages present.
    local = tmp_path / "local-bin"
    local.mkdir()
    for tool, text in {
        "p4c": "p4c 1.2.5.16",
        "p4c-bm2-ss": "p4c-bm2-ss 1.2.5.16",
        "simple_switch_grpc": "1.15.0-source",
    }.items():
        (local / tool).write_text(f"#!/bin/sh\necho '{text}'\n")
        (local / tool).chmod(0o755)
    debs = sorted(str(p) for p in (machine.site.www / "distro").glob("*.deb"))
    subprocess.run(["dpkg", f"--root={machine.root}", "-i", *debs], check=True, capture_output=True)
    machine.env["P4LB_TOOL_PATH"] = f"{local}:{machine.root / repo.STANDIN_BIN}"
    rc, out = machine.run()
    assert rc == 0, out
    assert machine.site.plan.requests == []
    assert lines(out, f"p4c and BMv2 already installed: {local}/simple_switch_grpc")
    assert lines(out, "installed: p4c 1.2.5.16, simple_switch_grpc 1.15.0-source")
    assert machine.lists() == []
    assert machine.source_runs() == []


def test_already_installed_but_too_old(machine: Machine, tmp_path: Path) -> None:
    # p4c 1.2.4.8 on PATH rejects lb.p4: not taken as installed; the routes give a newer one.
    local = tmp_path / "old-bin"
    local.mkdir()
    for tool, text in {
        "p4c": "p4c 1.2.4.8",
        "p4c-bm2-ss": "p4c-bm2-ss 1.2.4.8",
        "simple_switch_grpc": "1.15.0",
    }.items():
        (local / tool).write_text(f"#!/bin/sh\necho '{text}'\n")
        (local / tool).chmod(0o755)
    machine.env["P4LB_TOOL_PATH"] = f"{machine.root / repo.STANDIN_BIN}:{local}"
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "p4c and BMv2 found, but too old: p4c 1.2.4.8 (needs >= 1.2.5): trying")
    assert lines(out, "installed p4lang-p4c p4lang-bmv2 p4lang-pi from home:p4lang:latest")
    assert machine.source_runs() == []


def test_minimums_come_from_toolchain_env(machine: Machine, tmp_path: Path) -> None:
    # The same p4c passes with the project's minimums and fails with a raised one.
    env = (SCRIPT.parent / "toolchain.env").read_text()
    assert "P4LB_MIN_P4C=1.2.5\n" in env
    raised = tmp_path / "toolchain.env"
    raised.write_text(env.replace("P4LB_MIN_P4C=1.2.5\n", "P4LB_MIN_P4C=1.2.6\n"))
    machine.env["P4LB_FROM_SOURCE"] = "1"
    rc, out = machine.run()
    assert rc == 0, out
    machine.env["P4LB_TOOLCHAIN_ENV"] = str(raised)
    rc, out = machine.run()
    assert rc == 2, out
    assert lines(out, "p4c 1.2.5.16 (needs >= 1.2.6)")


GO_STANDIN = """#!/bin/sh
# go install go.k6.io/k6@vX: a k6 that prints that version, into $GOBIN.
echo "$@" >>"$STANDIN_GO_LOG"
[ -n "$STANDIN_GO_FAIL" ] && { echo "go: go.k6.io/k6@$3: proxy refused" >&2; exit 1; }
v=${2#*@v}
printf '#!/bin/sh\\necho "k6 v%s (go1.26, linux/amd64)"\\n' "$v" >"$GOBIN/k6"
/bin/chmod +x "$GOBIN/k6"
"""


@pytest.mark.parametrize("fail", [False, True])
def test_k6_by_go_install(machine: Machine, tmp_path: Path, fail: bool) -> None:
    go = tmp_path / "go"
    go.write_text(GO_STANDIN)
    go.chmod(0o755)
    machine.env.update(
        P4LB_K6="1",
        P4LB_K6_APT="",  # k6's own repository is not reachable from here
        P4LB_GO=str(go),
        P4LB_K6_BIN=str(machine.prefix / "bin"),
        STANDIN_GO_LOG=str(tmp_path / "go.log"),
        STANDIN_GO_FAIL="1" if fail else "",
        P4LB_FROM_SOURCE="1",
    )
    rc, out = machine.run()
    assert rc == 0, out  # k6 is for the benchmarks: its absence is a note, not a failure
    version = next(
        ln.split("=", 1)[1]
        for ln in (SCRIPT.parent / "toolchain.env").read_text().splitlines()
        if ln.startswith("P4LB_K6_VERSION=")
    )
    assert (tmp_path / "go.log").read_text().split() == ["install", f"go.k6.io/k6@v{version}"]
    if fail:
        assert lines(out, "go install failed: go: go.k6.io/k6@")
        assert lines(out, f"note: k6 {version}: neither k6's apt repository nor 'go install'")
    else:
        assert lines(out, f"k6 {version}")  # in the versions installed
        assert not lines(out, "note: k6")


def test_sudo_the_tiers_engines_and_the_p4lb_command(machine: Machine, tmp_path: Path) -> None:
    """sudo where it is missing; frr and gobgpd with no service started (our policy-rc.d in
    place while dpkg runs, gone after) and their services disabled; /usr/local/bin/p4lb runs
    the checkout's venv. A rerun changes none of it."""
    seen = tmp_path / "policy-seen"
    policy = machine.env["P4LB_POLICY_RC_D"]
    conf = Path(machine.env["APT_CONFIG"])
    conf.write_text(
        conf.read_text() + f'DPkg::Pre-Invoke {{ "if [ -x {policy} ]; then {policy} frr start; '
        f'echo policy $? >>{seen}; else echo none >>{seen}; fi"; }};\n'
    )
    machine.env["P4LB_FROM_SOURCE"] = "1"
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "sudo is missing: adding it")
    assert machine.installed("sudo") == "1.9.13-1"
    assert lines(out, "installing frr gobgpd: the tier's engines")
    assert machine.installed("frr") == "8.4.4-1" and machine.installed("gobgpd") == "3.10.0-1"
    # dpkg ran once without our policy (the distribution packages), once with it, forbidding.
    assert seen.read_text().splitlines() == ["none", "policy 101"]
    assert not Path(policy).exists()
    assert machine.systemctl_calls() == [
        "disable --now frr.service",
        "disable --now gobgpd.service",
    ]
    assert lines(out, "installed: ") and "frr 8.4.4-1, gobgpd 3.10.0-1" in out
    # The p4lb command: this checkout's venv, runnable.
    wrapper = machine.wrapper
    assert wrapper.read_text() == f'#!/bin/sh\nexec "{SCRIPT.parents[1]}/.venv/bin/p4lb" "$@"\n'
    assert lines(out, f"installed {wrapper}: it runs")
    r = subprocess.run([str(wrapper), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: p4lb"), r.stderr
    before = wrapper.stat().st_mtime_ns
    rc, out = machine.run()
    assert rc == 0, out
    assert lines(out, "the tier's engines already installed: frr gobgpd")
    assert lines(out, f"p4lb already on PATH: {wrapper}")
    assert not lines(out, "sudo is missing")
    assert wrapper.stat().st_mtime_ns == before
    assert len(machine.systemctl_calls()) == 2  # nothing installed: nothing disabled again


def test_a_policy_rc_d_of_the_machine_is_left_alone(machine: Machine) -> None:
    policy = Path(machine.env["P4LB_POLICY_RC_D"])
    policy.parent.mkdir(parents=True)
    policy.write_text("#!/bin/sh\nexit 0\n")
    machine.env["P4LB_FROM_SOURCE"] = "1"
    rc, out = machine.run()
    assert rc == 0, out
    assert machine.installed("frr")
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"
