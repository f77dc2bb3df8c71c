"""Health checks, step by step: the rise/fall state machine, the probes (in process, from
inside a namespace in process, a subprocess in a namespace, real servers on 127.0.0.1), and
the checker driven round by round."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from p4lb.intent.model import HealthSettings
from p4lb.service.health.checker import HealthChecker
from p4lb.service.health.overlay import effective_weights
from p4lb.service.health.probes import (
    SubprocessProbe,
    inside,
    namespace_prefix,
    namespace_probe,
    tcp_probe,
)
from p4lb.service.health.socket_probe import main as probe_main
from p4lb.service.health.state import Health, ProbeResult, State, Target, observe

OK = ProbeResult(True, "ok")
BAD = ProbeResult(False, "refused")

# ---------------------------------------------------------------- the state machine


def run_results(results: str, rise: int, fall: int, start: State = State.UP) -> str:
    """Feed 's'/'f' results; return the state after each as 'U'/'D'."""
    h = Health(state=start)
    out = ""
    for c in results:
        h = observe(h, OK if c == "s" else BAD, rise, fall)
        out += "U" if h.state is State.UP else "D"
    return out


@pytest.mark.parametrize(
    "desc,results,rise,fall,start,states",
    [
        ("fall failures take an UP backend down", "fff", 2, 3, State.UP, "UUD"),
        ("a success resets the failure run", "ffsff", 2, 3, State.UP, "UUUUU"),
        ("rise successes bring it back", "fffss", 2, 3, State.UP, "UUDDU"),
        ("a failure resets the success run", "ffsfss", 2, 2, State.UP, "UDDDDU"),
        ("flapping while UP stays UP", "fsfsfsfs", 2, 2, State.UP, "UUUUUUUU"),
        ("flapping while DOWN stays DOWN", "sfsfsfsf", 2, 2, State.DOWN, "DDDDDDDD"),
        ("rise=fall=1 follows every result", "fsfs", 1, 1, State.UP, "DUDU"),
        ("successes while UP change nothing", "sss", 2, 2, State.UP, "UUU"),
        ("failures while DOWN change nothing", "fff", 2, 2, State.DOWN, "DDD"),
        ("a long outage then recovery", "f" * 10 + "s" * 3, 3, 2, State.UP, "U" + "D" * 11 + "U"),
    ],
)
def test_rise_fall(
    desc: str, results: str, rise: int, fall: int, start: State, states: str
) -> None:
    assert run_results(results, rise, fall, start) == states, desc


def test_observe_counts_runs_and_keeps_the_reason() -> None:
    h = observe(observe(Health(), BAD, 2, 3), ProbeResult(False, "timed out"), 2, 3)
    assert (h.state, h.failures, h.successes, h.checks, h.reason) == (
        State.UP,
        2,
        0,
        2,
        "timed out",
    )
    assert h.as_dict()["consecutive_failures"] == 2


def test_backends_start_up() -> None:
    assert Health().state is State.UP


def test_effective_weights_zero_only_down_backends() -> None:
    configured = {"h2": 1, "h3": 2, "h4": 3}
    states = {"h2": State.UP, "h3": State.DOWN}
    assert effective_weights(configured, states) == {"h2": 1, "h3": 0, "h4": 3}


# ---------------------------------------------------------------- probes


def test_namespace_prefix() -> None:
    assert namespace_prefix("") == []
    assert namespace_prefix("h1") == ["ip", "netns", "exec", "h1"]
    assert namespace_prefix("/proc/42/ns/net") == ["nsenter", "--net=/proc/42/ns/net"]


def test_namespace_can_name_each_backends_own_host() -> None:
    t = Target("web", "h3", "10.0.0.3", 8000, HealthSettings(namespace="/run/netns/{backend}"))
    assert SubprocessProbe(python="/py").command(t)[:2] == ["nsenter", "--net=/run/netns/h3"]


def test_subprocess_command_runs_the_probe_module_in_the_namespace() -> None:
    t = Target("web", "h2", "10.0.0.2", 8000, HealthSettings(http_path="/", namespace="h1"))
    cmd = SubprocessProbe(python="/py").command(t)
    assert cmd == [
        *["ip", "netns", "exec", "h1", "/py", "-m", "p4lb.service.health.socket_probe"],
        *["10.0.0.2", "8000", "/", "200", "--timeout", "0.5"],
    ]


# ---------------------------------------------------------------- the checker, scripted probe


@dataclass
class Script:
    """A probe that answers from a per-backend list of results, one per call."""

    results: dict[str, list[bool]]
    calls: int = 0

    def __call__(self, target: Target) -> ProbeResult:
        self.calls += 1
        ok = self.results[target.backend].pop(0)
        return ProbeResult(ok, "ok" if ok else f"{target.backend} failed")


def targets(*names: str, **settings: object) -> list[Target]:
    s = HealthSettings(**settings)  # type: ignore[arg-type]
    return [Target("web", n, "127.0.0.1", 1, s) for n in names]


def test_checker_reports_each_change_once_with_old_new_and_reason() -> None:
    seen: list[tuple[str, State, State, str]] = []
    probe = Script({"h2": [True, False, False, False, True, True], "h3": [True] * 6})
    with HealthChecker(
        targets("h2", "h3"), lambda t, o, n, r: seen.append((t.backend, o, n, r)), probe
    ) as hc:
        for step in range(6):
            hc.tick(now=float(step))
        assert hc.health()[("web", "h2")].state is State.UP
    assert seen == [
        ("h2", State.UP, State.DOWN, "h2 failed"),
        ("h2", State.DOWN, State.UP, "ok"),
    ]
    assert probe.calls == 12


def test_checker_probes_only_targets_that_are_due() -> None:
    probe = Script({"h2": [True] * 3})
    with HealthChecker(targets("h2", interval_s=1.0), lambda *a: None, probe) as hc:
        hc.tick(now=10.0)
        hc.tick(now=10.5)
        assert probe.calls == 1
        assert hc.next_due() == 11.0
        hc.tick(now=11.0)
        assert probe.calls == 2


def test_set_targets_keeps_state_of_backends_that_stay() -> None:
    probe = Script({"h2": [False, False], "h3": [True]})
    with HealthChecker(targets("h2", fall=2), lambda *a: None, probe) as hc:
        hc.tick(now=0.0)
        hc.tick(now=1.0)
        assert hc.health()[("web", "h2")].state is State.DOWN
        hc.set_targets(targets("h2", "h3", fall=2))
        assert hc.health()[("web", "h2")].state is State.DOWN
        assert hc.health()[("web", "h3")] == Health()
        assert [t.target.backend for t in hc.tick(now=1.5)] == []  # h3 due at once, still UP
        assert probe.calls == 3
        hc.set_targets(targets("h3"))
        assert set(hc.health()) == {("web", "h3")}


def test_a_raising_probe_is_a_failure_and_a_raising_handler_does_not_stop_checks() -> None:
    def probe(target: Target) -> ProbeResult:
        raise RuntimeError("boom")

    def handler(*args: object) -> None:
        raise ValueError("handler bug")

    with HealthChecker(targets("h2", fall=1), handler, probe) as hc:
        changes = hc.tick(now=0.0)
        assert [(c.new, c.reason) for c in changes] == [
            (State.DOWN, "probe raised RuntimeError: boom")
        ]
        assert hc.tick(now=5.0) == []


# ---------------------------------------------------------------- real servers on 127.0.0.1


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield s
    s.close()


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Status:
    code = 200


@pytest.fixture
def http_server() -> Iterator[tuple[int, type[Status]]]:
    class Handler(BaseHTTPRequestHandler):
        status = Status

        def do_GET(self) -> None:
            code = 404 if self.path != "/health" else self.status.code
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    srv = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    Status.code = 200
    yield srv.server_address[1], Status
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)
    assert not thread.is_alive()


def real(port: int, **settings: object) -> Target:
    s = HealthSettings(**settings)  # type: ignore[arg-type]
    return Target("web", "h2", "127.0.0.1", port, s)


def test_tcp_connect_to_a_listener_succeeds_and_to_a_closed_port_fails(
    listener: socket.socket,
) -> None:
    assert tcp_probe(real(listener.getsockname()[1])).ok
    r = tcp_probe(real(free_port()))
    assert (r.ok, r.reason) == (False, "connection refused")


def test_http_status_must_match(http_server: tuple[int, type[Status]]) -> None:
    port, status = http_server
    assert tcp_probe(real(port, http_path="/health")) == ProbeResult(True, "HTTP status 200")
    status.code = 503
    r = tcp_probe(real(port, http_path="/health"))
    assert (r.ok, r.reason) == (False, "HTTP status 503, expected 200")
    assert tcp_probe(real(port, http_path="/health", http_status=503)).ok
    # TCP-only checks do not look at HTTP at all.
    assert tcp_probe(real(port)).ok
    r = tcp_probe(real(port, http_path="/other"))
    assert (r.ok, r.reason) == (False, "HTTP status 404, expected 200")


def test_a_server_that_never_answers_times_out_within_the_timeout(
    listener: socket.socket,
) -> None:
    # Accepted by the kernel (backlog) but never answered: the HTTP check must give up.
    t0 = time.monotonic()
    r = tcp_probe(real(listener.getsockname()[1], http_path="/health", timeout_s=0.3))
    elapsed = time.monotonic() - t0
    assert (r.ok, r.reason) == (False, "timed out after 0.3 s")
    assert 0.25 <= elapsed < 2.0


def test_a_non_http_answer_is_a_failure(listener: socket.socket) -> None:
    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"SSH-2.0-nope\r\n")

    thread = threading.Thread(target=answer)
    thread.start()
    r = tcp_probe(real(listener.getsockname()[1], http_path="/", timeout_s=2.0, interval_s=2.0))
    thread.join(timeout=5)
    assert (r.ok, r.reason) == (False, "no HTTP status line in the response")


def test_checker_takes_a_dead_server_out_and_back_in(http_server: tuple[int, type[Status]]) -> None:
    port, status = http_server
    seen: list[tuple[State, State, str]] = []
    target = real(port, http_path="/health", rise=2, fall=2)
    with HealthChecker([target], lambda t, o, n, r: seen.append((o, n, r))) as hc:
        hc.tick(now=0.0)
        status.code = 503
        hc.tick(now=1.0)
        assert seen == []
        hc.tick(now=2.0)
        assert seen == [(State.UP, State.DOWN, "HTTP status 503, expected 200")]
        status.code = 200
        hc.tick(now=3.0)
        hc.tick(now=4.0)
        assert seen[1:] == [(State.DOWN, State.UP, "HTTP status 200")]


def test_closing_the_listener_takes_the_backend_down(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with HealthChecker([real(port, fall=2)], lambda *a: None) as hc:
        hc.tick(now=0.0)
        listener.close()
        hc.tick(now=1.0)
        changes = hc.tick(now=2.0)
        assert [(c.new, c.reason) for c in changes] == [(State.DOWN, "connection refused")]


def test_run_reports_through_the_callback_and_stops_on_the_event() -> None:
    down = threading.Event()
    stop = threading.Event()
    target = real(free_port(), interval_s=0.05, timeout_s=0.05, fall=3)
    with HealthChecker([target], lambda t, o, n, r: down.set()) as hc:
        thread = threading.Thread(target=hc.run, args=(stop,))
        thread.start()
        try:
            assert down.wait(timeout=10)
        finally:
            stop.set()
            thread.join(timeout=10)
        assert not thread.is_alive()
        assert hc.health()[target.key].checks >= 3


# ---------------------------------------------------------------- the probe command


def test_probe_command_answers_by_exit_status(
    listener: socket.socket,
    http_server: tuple[int, type[Status]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    port, status = http_server
    assert probe_main(["127.0.0.1", str(listener.getsockname()[1])]) == 0
    assert probe_main(["127.0.0.1", str(free_port()), "--timeout", "1"]) == 1
    assert probe_main(["127.0.0.1", str(port), "/health", "200"]) == 0
    status.code = 503
    assert probe_main(["127.0.0.1", str(port), "/health", "200"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "HTTP status 503, expected 200"
    assert probe_main(["127.0.0.1"]) == 2
    assert probe_main(["127.0.0.1", "0"]) == 2
    assert probe_main(["127.0.0.1", "80", "health"]) == 2


def test_subprocess_probe_runs_the_module(listener: socket.socket) -> None:
    probe = SubprocessProbe(python=sys.executable)
    r = probe(real(listener.getsockname()[1]))
    assert r == ProbeResult(True, "tcp connect ok")
    r = probe(real(free_port()))
    assert r == ProbeResult(False, "connection refused")


def test_subprocess_probe_that_cannot_start_is_a_failure() -> None:
    r = SubprocessProbe(python="/nonexistent/python")(real(1))
    assert not r.ok and r.reason.startswith("cannot run the probe")


# ---------------------------------------------------------------- in a namespace, in process


@pytest.fixture
def netns() -> Iterator[str]:
    """A network namespace of its own (loopback up), removed after."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("namespace probe skipped: needs root and iproute2's ip")
    name = f"p4lb-ut-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"namespace probe skipped: ip netns add failed: {made.stderr.strip()}")
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


def this_thread_netns() -> str:
    return os.readlink("/proc/thread-self/ns/net")


def test_a_namespace_probe_reaches_what_listens_only_there_and_comes_back(netns: str) -> None:
    home = this_thread_netns()
    with inside(netns):
        there = socket.create_server(("127.0.0.1", 0))  # stays in that namespace
        assert this_thread_netns() != home
    assert this_thread_netns() == home
    port = there.getsockname()[1]
    try:
        for namespace in (netns, f"/run/netns/{netns}"):
            r = namespace_probe(real(port, namespace=namespace))
            assert r.ok, r.reason
            assert this_thread_netns() == home
        assert not tcp_probe(real(port)).ok  # nothing listens on it here
    finally:
        there.close()


def test_a_namespace_that_does_not_exist_is_a_failure_here() -> None:
    home = this_thread_netns()
    r = namespace_probe(real(free_port(), namespace="/nonexistent/ns"))
    assert not r.ok and "cannot enter namespace /nonexistent/ns" in r.reason
    assert this_thread_netns() == home


def test_an_ipv6_backend_is_checked_over_http_with_its_address_in_brackets() -> None:
    """An IPv6 VIP's backend: the probe connects over IPv6 and names the host as HTTP
    wants an IPv6 literal, [address]:port."""
    hosts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True

    try:
        srv = Server(("::1", 0), Handler)
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        port = srv.server_address[1]
        target = Target("web6", "b2", "::1", port, HealthSettings(http_path="/health"))
        assert tcp_probe(target) == ProbeResult(True, "HTTP status 200")
        assert hosts == [f"[::1]:{port}"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
