"""The README's first success, run as a user runs it: `sudo make run` with its Mininet CLI
fed the README's `mininet>` commands one at a time (each read to the next prompt, within a
deadline), `sudo p4lb stats` from another directory while the lab is up (the pointer
/run/p4lb/config leads it to the lab's config), then `exit` and `sudo make stop`. Asserts what
matters, not the shown text: the request names a backend, the weight change succeeds and lands
in the lab's config, ab loses nothing, the shares follow the new weights 3:1:1, and nothing of
the lab is left afterwards. Needs BMv2, Mininet, ab, root and sudo (the layer's conftest skips
without them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from p4lb.intent import reader
from p4lb.intent.running import RUN_POINTER
from tests.docs import DocCommand, doc_block
from topology.procs import alive

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "p4src" / "compiled"
STATE = ROOT / "run" / "state.json"
LAB_CONFIG = ROOT / "run" / "lb.toml"
PROMPT = "mininet> "
# sudo's secure_path: where `sudo p4lb` finds the command make deps installs.
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
START_S = 600  # make run: build if needed, BMv2, the config applied, p4lb run, the servers
COMMAND_S = {"ab": 300, "default": 60}
STOP_S = 120


class Console:
    """The output of a process, read by a thread; read_until waits (bounded) for a marker."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.text = ""
        self.ended = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            with self._cond:
                self.text += chunk.decode(errors="replace")
                self._cond.notify_all()
        with self._cond:
            self.ended = True
            self._cond.notify_all()

    def read_until(self, marker: str, timeout_s: float, what: str) -> str:
        """Everything up to and including `marker`, consumed; fails after `timeout_s`."""
        with self._cond:
            # At a line's start only: the banner shows indented `mininet> ...` examples.
            def found() -> re.Match[str] | None:
                return re.search(rf"(?:^|\n){re.escape(marker)}", self.text)

            ok = self._cond.wait_for(lambda: found() is not None or self.ended, timeout_s)
            match = found()
            if not ok or match is None:
                raise AssertionError(
                    f"{what}: no {marker!r} within {timeout_s} s"
                    f"{' (the process ended)' if self.ended else ''}; output:\n{self.text[-3000:]}"
                )
            end = match.end()
            out, self.text = self.text[:end], self.text[end:]
            return out


def needs() -> list[str]:
    missing = [] if shutil.which("sudo") else ["sudo"]
    wrapper = shutil.which("p4lb", path=SECURE_PATH)
    ours = f'"{ROOT}/.venv/bin/p4lb"'
    if wrapper is None or ours not in Path(wrapper).read_text(errors="replace"):
        # Another checkout's (CI's clone, say) would test that checkout's code.
        missing.append("p4lb on sudo's PATH for this checkout (make deps installs it)")
    if shutil.which("curl") is None:
        missing.append("curl")
    if not (COMPILED / "lb.json").exists():
        missing.append("p4src/compiled artifacts (make artifacts)")
    return missing


def backend_rows(stats: str, vip: str = "web") -> dict[str, dict[str, str]]:
    """`p4lb stats`'s table for `vip`: backend name -> column -> value (by its header)."""
    lines = stats.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.split()[:2] == ["VIP", vip]]
    assert len(starts) == 1, f"not one VIP {vip} in p4lb stats:\n{stats}"
    head = starts[0] + 1
    assert lines[head].split()[:2] == ["backend", "address"], stats
    columns = lines[head].split()
    rows = {}
    for ln in lines[head + 1 :]:
        cells = ln.split()
        if len(cells) != len(columns) or not re.fullmatch(r"h\d+", cells[0]):
            break
        rows[cells[0]] = dict(zip(columns, cells, strict=True))
    return rows


def assert_shares_follow_weights(stats: str) -> None:
    """Connections per backend in proportion to the weights: weighted round robin is exact
    per cycle, so a backend of weight w is at most w away from w/W of the total (a cycle
    under way), as tests/e2e/test_fairness.py checks for equal and 1:2:2 weights."""
    rows = backend_rows(stats)
    weights = {b: int(r["weight"]) for b, r in rows.items()}
    conns = {b: int(r["conns"]) for b, r in rows.items()}
    assert weights == {"h2": 3, "h3": 1, "h4": 1}, stats
    total, w_sum = sum(conns.values()), sum(weights.values())
    assert total >= 600, stats  # ab's 600, and a few connections it opened unused
    for b, w in weights.items():
        assert abs(conns[b] - total * w / w_sum) <= w, (b, conns, stats)
    assert abs(conns["h2"] / total - 0.60) <= 3 / total, stats


def check_mininet_command(cmd: DocCommand, out: str) -> None:
    """What the README's mininet> command must have done, judged from its output."""
    text = out.removesuffix(PROMPT)
    if cmd.command.startswith("h1 curl"):  # over IPv4 or IPv6
        assert re.search(r"p4lb backend h[234]\b", text), text
    elif cmd.command.startswith("p4lb weight set"):
        assert "exited with status" not in text and "p4lb: " not in text, text
        *_, vip, backend, weight = cmd.command.split()
        assert reader.load(LAB_CONFIG).vip(vip).backend(backend).weight == int(weight)
    elif cmd.command.startswith("h1 ab"):
        n = int(re.search(r"-n (\d+)", cmd.command).group(1))  # type: ignore[union-attr]
        assert re.search(rf"Complete requests:\s+{n}\b", text), text
        assert re.search(r"Failed requests:\s+0\b", text), text
    elif cmd.command == "p4lb stats":
        assert_shares_follow_weights(text)
        # The IPv6 VIP beside it: the README's IPv6 request counted, its backends up.
        rows = backend_rows(text, "web6")
        assert sum(int(r["conns"]) for r in rows.values()) >= 1, text
        assert {r["health"] for r in rows.values()} == {"up"}, text
    else:
        raise AssertionError(f"the README shows a mininet> command this test does not know: {cmd}")


@pytest.fixture
def make_run() -> Iterator[tuple[subprocess.Popen[bytes], Console, str]]:
    """`sudo make run` as the README writes it, stdin a pipe, in a session of its own (no
    terminal: sudo and Mininet see none); taken down (exit, then TERM to its group, then
    make stop) if the test leaves it running."""
    if missing := needs():
        pytest.skip(f"e2e layer skipped: missing {', '.join(missing)}")
    if STATE.exists() or Path(RUN_POINTER).exists():
        pytest.fail(f"a lab is running already ({STATE} or {RUN_POINTER}): sudo make stop first")
    steps = doc_block("first-success")
    assert steps[0].prompt == "$" and steps[0].command == "sudo make run", steps[0]
    proc = subprocess.Popen(
        ["bash", "-c", steps[0].command],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    console = Console(proc.stdout)  # type: ignore[arg-type]
    try:
        yield proc, console, steps[0].command
    finally:
        if proc.poll() is None:
            try:
                proc.stdin.write(b"exit\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                proc.wait(STOP_S)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(STOP_S)
            subprocess.run(["make", "stop"], cwd=ROOT, capture_output=True, timeout=STOP_S)


def test_the_readmes_first_success_as_written(
    make_run: tuple[subprocess.Popen[bytes], Console, str],
) -> None:
    proc, console, _ = make_run
    steps = doc_block("first-success")[1:]
    outside = doc_block("first-success-outside")
    assert [c.command for c in outside] == ["sudo p4lb stats", "sudo make stop"], outside
    assert steps and all(c.prompt == "mininet>" for c in steps), steps
    assert steps[-1].command == "exit", steps[-1]

    banner = console.read_until(PROMPT, START_S, "sudo make run")
    assert "p4lb is running" in banner, banner
    state = json.loads(STATE.read_text())  # what make stop would need: PIDs, links, names
    assert Path(RUN_POINTER).read_text().strip() == str(LAB_CONFIG)

    for cmd in steps[:-1]:
        proc.stdin.write(f"{cmd.command}\n".encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        kind = "ab" if " ab " in f" {cmd.command} " else "default"
        out = console.read_until(PROMPT, COMMAND_S[kind], f"mininet> {cmd.command}")
        check_mininet_command(cmd, out)

    # From another terminal, in another directory, while the lab is up: the pointer.
    r = subprocess.run(
        ["bash", "-c", outside[0].command],
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=COMMAND_S["default"],
        env={k: v for k, v in os.environ.items() if k != "P4LB_CONFIG"},
    )
    assert r.returncode == 0, r.stderr
    assert_shares_follow_weights(r.stdout)

    proc.stdin.write(b"exit\n")  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(STOP_S) == 0, console.text[-3000:]
    r = subprocess.run(
        ["bash", "-c", outside[1].command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STOP_S,
    )
    assert r.returncode == 0, r.stdout + r.stderr

    # Nothing of the lab is left: processes, switch interfaces, namespace names, files.
    assert [n for n, pid in state["pids"].items() if pid and alive(int(pid))] == []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = {ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()}
    assert names.isdisjoint(state["interfaces"]), names & set(state["interfaces"])
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert {ln.split()[0] for ln in netns.splitlines() if ln.strip()}.isdisjoint(state["netns"])
    assert not STATE.exists() and not Path(RUN_POINTER).exists()
