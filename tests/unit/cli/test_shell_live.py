"""`p4lb shell`'s command line works with the real p4runtime-shell (from `make shell`'s
.venv-shell): as a reader it reads the tables while `p4lb run`'s session stays primary."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.cli.shell import shell_command, shell_python
from p4lb.intent import reader
from p4lb.service import operations
from tests.unit.fake_switch import FakeSwitch

READ_TABLES = """
import sys
import p4runtime_sh.shell as sh
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
high, low = (int(x) for x in args["--election-id"].split(","))
sh.setup(device_id=int(args["--device-id"]), grpc_addr=args["--grpc-addr"],
         election_id=(high, low))
print(*(sum(1 for _ in sh.TableEntry(t).read()) for t in ("vip_table", "slot_table")))
sh.teardown()
"""


def test_p4runtime_shell_reads_as_a_reader_while_p4lb_run_is_primary(
    fake: FakeSwitch, fake_cfg: Path
) -> None:
    python = shell_python()
    if not python.exists():
        pytest.skip(f"p4runtime-shell missing: {python} (make shell creates it)")
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    cfg = reader.load(fake_cfg)
    with operations.connect(cfg) as run:  # p4lb run's session
        assert run.is_primary
        cmd = shell_command(cfg, primary=False, election_id=None)
        assert cmd[1:3] == ["-m", "p4runtime_sh"]
        got = subprocess.run(
            [str(python), "-c", READ_TABLES, *cmd[3:]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout.split()[-2:] == ["1", "3"]
        assert "not the primary client" in got.stdout
        assert run.is_primary
