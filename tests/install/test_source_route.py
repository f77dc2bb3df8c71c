"""scripts/build-from-source.sh, the source route, against stand-in upstream repositories.

Each stand-in is a small git repository with the build system its upstream has (autotools for
PI and BMv2, CMake for p4c) that installs tools printing a version, so the route's own logic
runs for real: checkouts at pinned commits from P4LB_GIT_BASE, PI's submodules at the commits
its tree records, steps and their logs, stamps and resuming, the version check. The real
toolchain build (75 min) runs the same script against local copies of the upstream
repositories: test_real_toolchain, opt-in.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-from-source.sh"
MISSING = [t for t in ("git", "cmake", "make") if shutil.which(t) is None]
if os.geteuid():
    MISSING.append("root")  # the route installs with sudo otherwise

# An autotools stand-in: configure writes a Makefile into the build directory that counts its
# builds and installs its tools/. It fails while $FAIL_FLAG.NAME exists.
CONFIGURE = """#!/bin/sh
for a; do case $a in --prefix=*) prefix=${a#--prefix=} ;; esac; done
if [ -e "$FAIL_FLAG.@NAME@" ]; then
    echo "configure: error: @NAME@ stand-in told to fail"
    exit 1
fi
src=$(cd "$(dirname "$0")" && pwd)
cat >Makefile <<EOF
all:
\techo built >>"$COUNTS/@NAME@"
install:
\tmkdir -p "$prefix/bin"
\tfor t in \\$\\$(ls "$src/tools"); do cp "$src/tools/\\$\\$t" "$prefix/bin/\\$\\$t"; \\
\t  chmod +x "$prefix/bin/\\$\\$t"; done
EOF
"""

# autogen.sh of a stand-in: counts its runs (configure is already there, as after a run that
# was interrupted before it finished).
AUTOGEN = """#!/bin/sh
echo ran >>"$COUNTS/autogen-$(basename "$(pwd)")"
"""

CMAKELISTS = """cmake_minimum_required(VERSION 3.16)
project(p4c NONE)
file(APPEND $ENV{COUNTS}/p4c "built\\n")
install(PROGRAMS tools/p4c tools/p4c-bm2-ss DESTINATION bin)
"""


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@p4lb.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@p4lb.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path, files: dict[str, str], links: dict[str, str] | None = None) -> str:
    """A git repository at path with these files (and gitlinks), one commit; its hash."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, text in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        if name in ("configure", "autogen.sh") or name.startswith("tools/"):
            f.chmod(0o755)
    git(path, "add", "-A")
    for where, commit in (links or {}).items():
        git(path, "update-index", "--add", "--cacheinfo", f"160000,{commit},{where}")
    git(path, "commit", "-q", "-m", "stand-in")
    return git(path, "rev-parse", "HEAD")


def tool(text: str) -> str:
    return f"#!/bin/sh\necho '{text}'\n"


@dataclass
class Upstream:
    """Stand-in upstream repositories, the pins naming them, and a place to build."""

    tmp: Path
    env: dict[str, str] = field(default_factory=dict)

    def counts(self, name: str) -> int:
        f = self.tmp / "counts" / name
        return len(f.read_text().splitlines()) if f.exists() else 0

    def run(self, *steps: str) -> tuple[int, str]:
        p = subprocess.run(
            ["bash", str(SCRIPT), *steps],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        print(p.stdout, p.stderr)
        return p.returncode, p.stdout + p.stderr


def upstream(tmp: Path, p4c_version: str = "1.2.5.16") -> Upstream:
    base = tmp / "git"
    pins = {}
    p4rt = make_repo(base / "p4lang/p4runtime", {"proto/p4.proto": "// stand-in\n"})
    gnmi = make_repo(base / "openconfig/gnmi", {"proto/gnmi.proto": "// stand-in\n"})
    pins["P4C_P4RUNTIME"] = f"p4lang/p4runtime@{p4rt}"
    pins["PROTOBUF"] = "protocolbuffers/protobuf@" + make_repo(
        base / "protocolbuffers/protobuf", {"README": "v25.3 stand-in\n"}
    )
    pins["ABSEIL"] = "abseil/abseil-cpp@" + make_repo(
        base / "abseil/abseil-cpp", {"README": "20240722.1 stand-in\n"}
    )
    pins["PI"] = "p4lang/PI@" + make_repo(
        base / "p4lang/PI",
        {
            "configure.ac": "AC_INIT([PI], [0.1], [pi@p4lb.invalid])\n",
            "configure": CONFIGURE.replace("@NAME@", "PI"),
            "autogen.sh": AUTOGEN,
            "tools/pi-standin": tool("PI"),
        },
        links={"proto/p4runtime": p4rt, "proto/openconfig/gnmi": gnmi},
    )
    pins["BMV2"] = "p4lang/behavioral-model@" + make_repo(
        base / "p4lang/behavioral-model",
        {
            "configure": CONFIGURE.replace("@NAME@", "bmv2"),
            "autogen.sh": AUTOGEN,
            "tools/simple_switch_grpc": tool("1.15.5-standin"),
            # As upstream's: a Python CLI wrapper that runs whatever python3 is first on PATH.
            "tools/simple_switch_CLI": "#!/usr/bin/env python3\nimport runtime_CLI\n",
        },
    )
    # p4c elsewhere, named by its own variable: a mirror or a local copy stands in for one.
    pins["P4C"] = "p4lang/p4c@" + make_repo(
        tmp / "elsewhere/p4c",
        {
            "CMakeLists.txt": CMAKELISTS,
            "tools/p4c": tool(f"p4c {p4c_version} (SHA: standin BUILD: Release)"),
            "tools/p4c-bm2-ss": tool(f"p4c-bm2-ss {p4c_version}"),
        },
    )
    env_file = tmp / "toolchain.env"
    real = (ROOT / "scripts/toolchain.env").read_text().splitlines()
    env_file.write_text(
        "\n".join(ln for ln in real if not ln.startswith("P4LB_PIN_"))
        + "\n"
        + "".join(f"P4LB_PIN_{k}={v}\n" for k, v in pins.items())
    )
    (tmp / "counts").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LC_ALL": "C",
        "P4LB_TOOLCHAIN_ENV": str(env_file),
        "P4LB_GIT_BASE": str(base),
        "P4LB_GIT_P4C": str(tmp / "elsewhere/p4c"),
        "P4LB_PREFIX": str(tmp / "prefix"),
        "P4LB_SRC_DIR": str(tmp / "src"),
        "P4LB_SPEED_PREFIX": str(tmp / "speed"),
        "P4LB_BMV2_SPEED": "1",
        "P4LB_APT": "0",
        "P4LB_JOBS": "1",
        "COUNTS": str(tmp / "counts"),
        "FAIL_FLAG": str(tmp / "fail"),
    }
    return Upstream(tmp, env)


needs_tools = pytest.mark.skipif(
    bool(MISSING), reason=f"source route tests skipped: missing {', '.join(MISSING)}"
)
STEPS = ["deps", "fetch", "pi", "bmv2", "bmv2-speed", "p4c", "check"]


def step_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("source route: step ")]


@needs_tools
def test_every_step_in_order_installs_and_checks(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    rc, out = up.run()
    assert rc == 0, out
    src = tmp_path / "src"
    starts = [ln for ln in step_lines(out) if "done" not in ln]
    assert starts == [
        f"source route: step {i}/{len(STEPS)}: {s} (log: {src}/logs/{s}.log)"
        for i, s in enumerate(STEPS, 1)
    ]
    assert "about 75 minutes on 2 cores" in out  # said up front
    prefix = tmp_path / "prefix"
    p4c = subprocess.run([prefix / "bin/p4c", "--version"], capture_output=True, text=True)
    assert p4c.stdout.startswith("p4c 1.2.5.16")
    assert (tmp_path / "speed/bin/simple_switch_grpc").exists()
    # The CLI wrappers get the distribution's Python, which has the thrift module.
    for d in (prefix, tmp_path / "speed"):
        assert (d / "bin/simple_switch_CLI").read_text().startswith("#!/usr/bin/python3\n")
    for line in (
        "p4c 1.2.5.16 (>= 1.2.5)",
        "simple_switch_grpc 1.15.5 (>= 1.15.0)",
        "PI 0.1 (>= 0.1)",
    ):
        assert f"source route:   {line}" in out
    # PI's submodules at the commits PI's tree records, from P4LB_GIT_BASE.
    pi = src / "src/PI"
    for sub in ("proto/p4runtime", "proto/openconfig/gnmi"):
        recorded = git(pi, "ls-tree", "HEAD", sub).split()[2]
        assert git(pi / sub, "rev-parse", "HEAD") == recorded
    record = (prefix / "share/p4lb/toolchain-source.txt").read_text()
    assert "PI_VERSION=0.1" in record and "P4LB_PIN_P4C=p4lang/p4c@" in record
    assert [up.counts(n) for n in ("PI", "bmv2", "p4c")] == [1, 2, 1]  # bmv2: standard + speed


@needs_tools
def test_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    (tmp_path / "fail.bmv2").touch()
    rc, out = up.run()
    assert rc == 1, out
    log = tmp_path / "src/logs/bmv2.log"
    failed = out[out.index("source route: FAILED: step bmv2 (exit ") :]
    assert f"the end of {log}:" in failed
    assert "configure: error: bmv2 stand-in told to fail" in failed
    assert not (tmp_path / "prefix/bin/p4c").exists()  # nothing after the failed step ran
    (tmp_path / "fail.bmv2").unlink()
    rc, out = up.run()
    assert rc == 0, out
    done = [ln for ln in step_lines(out) if ln.endswith(": done already")]
    assert done == [
        f"source route: step {i}/{len(STEPS)}: {s}: done already"
        for i, s in enumerate(STEPS[:3], 1)
    ]
    assert [up.counts(n) for n in ("PI", "bmv2", "p4c")] == [1, 2, 1]
    # autogen ran once per source tree, the failed run's included: not again on resuming.
    assert [up.counts(f"autogen-{n}") for n in ("PI", "behavioral-model")] == [1, 1]
    # A third run has nothing left to do but the check.
    rc, out = up.run()
    assert rc == 0, out
    assert len([ln for ln in step_lines(out) if ln.endswith(": done already")]) == len(STEPS) - 1
    assert [up.counts(n) for n in ("PI", "bmv2", "p4c")] == [1, 2, 1]


@needs_tools
def test_a_new_pin_rebuilds_that_step(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    assert up.run()[0] == 0
    env_file = Path(up.env["P4LB_TOOLCHAIN_ENV"])
    p4c = tmp_path / "elsewhere/p4c"
    (p4c / "tools/p4c").write_text(tool("p4c 1.2.5.17 (SHA: newer)"))
    git(p4c, "commit", "-q", "-am", "newer")
    new = git(p4c, "rev-parse", "HEAD")
    text = env_file.read_text()
    old = next(ln for ln in text.splitlines() if ln.startswith("P4LB_PIN_P4C="))
    env_file.write_text(text.replace(old, f"P4LB_PIN_P4C=p4lang/p4c@{new}"))
    # CMake installs only what is newer than what is there: the first build was not an
    # instant ago, as it is in this test.
    os.utime(tmp_path / "prefix/bin/p4c", (0, 0))
    rc, out = up.run()
    assert rc == 0, out
    assert "source route:   p4c 1.2.5.17 (>= 1.2.5)" in out
    assert [up.counts(n) for n in ("PI", "bmv2", "p4c")] == [1, 2, 2]


@needs_tools
def test_older_than_the_minimum_fails_the_check(tmp_path: Path) -> None:
    up = upstream(tmp_path, p4c_version="1.2.4.8")
    rc, out = up.run()
    assert rc == 1, out
    assert "source route:   p4c 1.2.4.8: p4lb needs >= 1.2.5" in out
    assert "source route: FAILED: step check" in out


@needs_tools
def test_unknown_step_is_one_clear_line(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    rc, out = up.run("pi", "p4")
    assert rc == 1
    assert out.strip() == (
        "source route: FAILED: unknown step 'p4' (steps: deps fetch pi bmv2 bmv2-speed p4c check)"
    )


@needs_tools
def test_unreachable_repository_names_it(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    up.env["P4LB_GIT_P4C"] = str(tmp_path / "nowhere/p4c")
    rc, out = up.run("fetch")
    assert rc == 1, out
    assert "source route: FAILED: could not check out p4lang/p4c at " in out


# --- the real toolchain, opt-in --------------------------------------------------------------

GIT_BASE = os.environ.get("P4LB_TEST_GIT_BASE", "")


@pytest.mark.skipif(
    not GIT_BASE,
    reason="the real source route (75 min) runs only with P4LB_TEST_GIT_BASE set to a directory "
    "of local copies of the upstream repositories (OWNER/NAME, as scripts/toolchain.env pins)",
)
def test_real_toolchain(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "P4LB_GIT_BASE": GIT_BASE,
        "P4LB_PREFIX": str(tmp_path / "prefix"),
        "P4LB_SRC_DIR": str(tmp_path / "src"),
    }
    subprocess.run(["bash", str(SCRIPT)], env=env, check=True, timeout=3 * 3600)
    bin_ = tmp_path / "prefix/bin"
    out = tmp_path / "out"
    subprocess.run(
        ["make", "-C", str(ROOT), "build", f"BUILD={out}", f"P4C={bin_ / 'p4c-bm2-ss'}"],
        check=True,
    )
    for name in ("lb.json", "lb.p4info.txtpb"):
        assert filecmp.cmp(out / name, ROOT / "p4src/compiled" / name, shallow=False), name
