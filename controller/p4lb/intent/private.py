"""Files p4lb keeps beside the config (the lock, the stats baselines, the health state):
readable and writable by their owner only, whatever the umask."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

MODE = 0o600


def write_private(target: Path, text: str, tmp_name: str) -> None:
    """Replace `target` atomically with `text`, through `tmp_name` beside it, owner-only."""
    tmp = target.with_name(tmp_name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, MODE)
    try:
        os.fchmod(fd, MODE)  # an older temp file may have been made with another mode
        with os.fdopen(fd, "w") as f:
            fd = -1
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


def open_private(path: Path) -> int:
    """Open (creating) `path` read-write, owner-only: its descriptor. A file made earlier
    with a wider mode is narrowed when we own it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, MODE)
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, MODE)
    return fd
