"""Runtime commands serialise on the config file: an exclusive fcntl lock on a sidecar
file (`lb.toml` -> `.lb.toml.lock`), held across read, switch write and file write, so two
operators' changes are applied one after the other and neither is lost."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from p4lb.intent.model import ConfigError
from p4lb.intent.private import open_private

LOCK_WAIT_S = 60.0


def lock_path(config_path: str | os.PathLike[str]) -> Path:
    p = Path(config_path)
    return p.with_name(f".{p.name}.lock")


@contextmanager
def config_lock(config_path: str | os.PathLike[str], wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the config's lock; wait for it at most `wait_s` seconds (0: try once), then
    fail with one line. The lock goes with the process, so a killed command frees it."""
    path = lock_path(config_path)
    try:
        fd = open_private(path)
    except PermissionError:
        raise  # the CLI says whose it is and to use sudo
    except OSError as e:
        raise ConfigError(f"{config_path}: cannot open lock file {path}: {e.strerror}") from None
    try:
        deadline = time.monotonic() + wait_s
        pause = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConfigLocked(
                        f"{config_path}: another p4lb command has held {path} for over "
                        f"{wait_s:.0f} s; giving up"
                    ) from None
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 0.25)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class ConfigLocked(ConfigError):
    """The config lock stayed held by someone else for the whole wait."""
