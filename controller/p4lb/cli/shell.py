"""`p4lb shell`: p4runtime-shell on the switch the config names, for poking at tables by
hand while the controller runs. p4runtime-shell lives in its own environment (`make
shell` creates `.venv-shell` beside `.venv`): its pins (protobuf 3.20, IPython 7) must not
leak into the controller's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from p4lb.intent.model import Config, ConfigError
from p4lb.pipeline.p4info import P4INFO_NAME, compiled_dir, load_p4info
from p4lb.service import operations
from p4lb.switch.errors import SwitchError

READER_ELECTION_ID = 1

# p4runtime-shell 0.0.6 opens its channel with grpc.insecure_channel and has no TLS options:
# with `tls` in the config, this runs it (in its own environment) with that call replaced by
# a TLS channel on the config's CA and client certificate, so the shell connects to the
# switch exactly as p4lb does. argv: CA CERT KEY SERVER_NAME, then p4runtime-shell's own.
TLS_LAUNCHER = """
import sys, grpc
ca, cert, key, name = sys.argv[1:5]
del sys.argv[1:5]
def read(path):
    return open(path, "rb").read() if path else None
creds = grpc.ssl_channel_credentials(read(ca), read(key), read(cert))
extra = [("grpc.ssl_target_name_override", name)] if name else []
def secure(target, options=None, compression=None):
    return grpc.secure_channel(target, creds, list(options or []) + extra, compression)
grpc.insecure_channel = secure
from p4runtime_sh.shell import main
sys.exit(main())
"""


def shell_python() -> Path:
    """The Python of the p4runtime-shell environment: $P4LB_SHELL_PYTHON, else
    .venv-shell beside the environment p4lb runs in."""
    env = os.environ.get("P4LB_SHELL_PYTHON")
    if env:
        return Path(env)
    return Path(sys.prefix).parent / ".venv-shell" / "bin" / "python"


def shell_command(cfg: Config, primary: bool, election_id: int | None) -> list[str]:
    """The command line that starts p4runtime-shell. As a reader it uses a low election id
    (never primary while p4lb runs); --primary takes an id above p4lb's writers (run uses
    the config's id, one-shot commands id + 1), so they wait while the shell is open."""
    eid = cfg.switch.election_id + 2 if primary else (election_id or READER_ELECTION_ID)
    if not primary and eid in (cfg.switch.election_id, cfg.switch.election_id + 1):
        raise ConfigError(
            f"{cfg.source}: election id {eid} is p4lb's own (switch.election_id "
            f"{cfg.switch.election_id} and + 1); open the shell with another --election-id"
        )
    tls = cfg.switch.tls
    start = ["-m", "p4runtime_sh"]
    if tls is not None:
        start = ["-c", TLS_LAUNCHER, tls.ca, tls.cert, tls.key, tls.server_name]
    return [
        str(shell_python()),
        *start,
        "--grpc-addr",
        cfg.switch.address,
        "--device-id",
        str(cfg.switch.device_id),
        "--election-id",
        f"{eid >> 64},{eid & (2**64 - 1)}",
    ]


def open_shell(cfg: Config, primary: bool = False, election_id: int | None = None) -> int:
    """Check the switch runs the committed P4Info (p4runtime-shell takes it from the switch;
    pushing it would need mastership and wipe the tables), then replace this process with
    p4runtime-shell."""
    python = shell_python()
    if not python.exists():
        raise ConfigError(
            f"p4runtime-shell is not installed at {python}: run `make shell` "
            f"(or set P4LB_SHELL_PYTHON)"
        )
    cmd = shell_command(cfg, primary, election_id)
    with operations.connect_reader(cfg) as sw:
        theirs = sw.pipeline_p4info()
    ours = load_p4info(compiled_dir() / P4INFO_NAME)
    if theirs is None:
        raise SwitchError(f"switch at {cfg.switch.address} has no pipeline: run `p4lb apply`")
    if theirs != ours:
        raise SwitchError(
            f"switch at {cfg.switch.address} runs a P4Info other than the committed "
            f"{compiled_dir() / P4INFO_NAME}: run `p4lb apply`"
        )
    os.execv(cmd[0], cmd)
    return 1  # not reached
