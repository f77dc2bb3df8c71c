"""`make run`: the topology, the switch, `p4lb apply`, `p4lb run`, servers, Mininet CLI."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from mininet.cli import CLI
from mininet.log import output

from p4lb.intent.reader import is_loopback
from p4lb.intent.running import clear_pointer, pointer_path, write_pointer
from p4lb.pipeline.p4info import schema
from topology.net import (
    RUN_DIR,
    VIP6_ADDR,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    build,
    name_server_namespaces,
    p4lb_cmd,
    start_servers,
    stop,
)
from topology.procs import poll_until

BANNER = """
p4lb is running: VIP {vip}:{port} over {servers} ({algorithm}).{vip6}
  mininet> h1 curl -s http://{vip}:{port}/ | head -c 80        # one request through the VIP{curl6}
  mininet> h1 ab -n 300 -c 10 http://{vip}:{port}/              # load
  mininet> p4lb weight set web h2 3                            # a runtime change
  mininet> p4lb stats                                          # shares, Jain's index, health
From another terminal (p4lb finds this run's config through {pointer}):
  sudo p4lb stats          # health column: kill a server to see it go DOWN
  sudo p4lb weight set web h2 3
{metrics}Controller log: {log}.  Type 'exit' to stop everything.
"""


class LabCLI(CLI):  # type: ignore[misc]  # Mininet has no type hints
    """Mininet's CLI with one command more: `p4lb ARGS` runs the p4lb CLI on the lab's
    config (`mininet> p4lb weight set web h2 3`, `mininet> p4lb stats`)."""

    def __init__(self, lab: Lab, **kwargs: Any) -> None:
        self.lab = lab  # before Mininet's __init__: it runs the command loop
        super().__init__(lab.net, **kwargs)

    def do_p4lb(self, line: str) -> None:
        """Run p4lb on the running lab's config, e.g. p4lb weight set web h2 3, p4lb stats."""
        try:
            args = shlex.split(line)
        except ValueError as e:
            output(f"p4lb: {e}\n")
            return
        r = subprocess.run(
            p4lb_cmd(self.lab, *args), capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        output(r.stdout + r.stderr)
        if r.returncode:  # the shell would show it in $?: here, one line
            output(f"(p4lb exited with status {r.returncode})\n")


def metrics_started(log: Path, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> bool:
    """Whether `p4lb run` (`proc`, writing `log`) says it serves its metrics within
    `timeout_s`: it listens before it starts, and exits at once when it cannot (the port is
    taken). A connect would not tell: whoever holds the port answers it."""

    def said() -> bool:
        return "metrics at http://" in log.read_text()

    poll_until(lambda: proc.poll() is not None or said(), timeout_s, every=0.2)
    return said()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make run")
    p.add_argument("--servers", type=int, default=3)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--bw", type=float, default=None, help="link bandwidth, Mbit/s")
    p.add_argument("--delay", default=None, help="link delay, e.g. 1ms")
    p.add_argument("--algorithm", default="wrr", choices=sorted(schema().algorithms()))
    p.add_argument(
        "--mode",
        default="nat",
        choices=("nat", "dsr"),
        help="the VIP's mode; dsr adds the return path beside the switch (topology.net)",
    )
    p.add_argument("--no-health", action="store_true", help="no health checks in p4lb run")
    p.add_argument(
        "--metrics",
        default="127.0.0.1:9100",
        metavar="IP:PORT",
        help="p4lb run's [metrics] listener: /metrics and the stats page, no authentication "
        "(default %(default)s; another address than loopback: anyone who reaches it reads them)",
    )
    p.add_argument("--no-metrics", action="store_true", help="no [metrics] listener")
    p.add_argument("--threaded", action="store_true", help="threaded HTTP servers")
    p.add_argument("--switch-log", action="store_true", help="BMv2 logging on (slow)")
    p.add_argument("--no-cli", action="store_true", help="start, check one request, stop")
    p.add_argument(
        "--standby-controller",
        action="store_true",
        help="p4lb run --standby beside the controller: it takes over when that one ends",
    )
    a = p.parse_args(argv)
    lab = build(
        Options(
            servers=a.servers,
            clients=a.clients,
            bw=a.bw,
            delay=a.delay,
            algorithm=a.algorithm,
            threaded=a.threaded,
            switch_log=a.switch_log,
            mode=a.mode,
            ipv6=True,
        )
    )
    try:
        if not a.no_health:
            # p4lb run probes each server with an HTTP GET from the server's own host.
            namespace = name_server_namespaces(lab)
            with open(lab.config_path, "a") as f:
                for vip in lab.config.vips:
                    f.write(
                        f'\n[vip.{vip.name}.health]\nhttp_path = "/"\nnamespace = "{namespace}"\n'
                    )
        if not a.no_metrics:
            # The listener has no authentication: loopback, unless --metrics names another
            # address on purpose (in the VM, for the forwarded port that reaches only this
            # VM's NAT address): that choice is the config's insecure = true.
            insecure = "" if is_loopback(a.metrics) else "insecure = true\n"
            with open(lab.config_path, "a") as f:
                f.write(f'\n[metrics]\nlisten = "{a.metrics}"\n{insecure}')
        subprocess.run(p4lb_cmd(lab, "apply"), check=True)
        log = RUN_DIR / "controller.log"
        with open(log, "w") as out:
            ctl = subprocess.Popen(p4lb_cmd(lab, "run"), stdout=out, stderr=subprocess.STDOUT)
        lab.pids["controller"] = ctl.pid
        if not a.no_metrics and not metrics_started(log, ctl):
            tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
            print(f"make run: p4lb run did not start: {tail[0]}", file=sys.stderr)
            return 1
        if a.standby_controller:  # its log says when it waits, and when it takes over
            with open(RUN_DIR / "standby.log", "w") as out:
                standby = subprocess.Popen(
                    p4lb_cmd(lab, "run", "--standby"), stdout=out, stderr=subprocess.STDOUT
                )
            lab.pids["standby"] = standby.pid
        start_servers(lab, a.threaded)
        lab.save_state()
        write_pointer(lab.config_path)  # `sudo p4lb stats` from anywhere finds this config
        client = lab.clients[0]
        if a.no_cli:
            urls = [f"http://{VIP_ADDR}:{VIP_PORT}/"]
            urls += [f"http://[{VIP6_ADDR}]:{VIP_PORT}/"] if lab.options.ipv6 else []
            outs = [client.cmd(f"curl -s -m 5 {url}") for url in urls]
            for out in outs:
                print(out[:200])
            return 0 if all("p4lb backend" in out for out in outs) else 1
        print(
            BANNER.format(
                vip=VIP_ADDR,
                port=VIP_PORT,
                algorithm=a.algorithm,
                servers=", ".join(s.name for s in lab.servers),
                vip6=f"\n{' ' * 17}VIP [{VIP6_ADDR}]:{VIP_PORT} over them too ({a.algorithm})."
                if lab.options.ipv6
                else "",
                curl6=f"\n  mininet> h1 curl -s http://[{VIP6_ADDR}]/ | head -c 80"
                "         # over IPv6"
                if lab.options.ipv6
                else "",
                pointer=pointer_path(),
                log=log,
                metrics=""
                if a.no_metrics
                else f"  curl -s {a.metrics}/metrics | grep ^p4lb_backend   # Prometheus metrics\n"
                f"  stats page: http://{a.metrics}/ (e.g. chromium http://{a.metrics}/)\n",
            )
        )
        LabCLI(lab)
        return 0
    finally:
        clear_pointer(lab.config_path)
        stop(lab)


if __name__ == "__main__":
    sys.exit(main())
