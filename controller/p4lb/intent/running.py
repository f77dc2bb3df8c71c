"""The pointer to the running balancer's config: `make run` (and the tier's run) write the
absolute path of that run's config into /run/p4lb/config, `make stop` removes it, so `p4lb`
without `-c` reaches what runs. /run is a tmpfs: a reboot clears it with everything it named.
P4LB_RUN_POINTER moves the pointer (tests)."""

from __future__ import annotations

import os
from pathlib import Path

RUN_POINTER = "/run/p4lb/config"


def pointer_path() -> Path:
    return Path(os.environ.get("P4LB_RUN_POINTER") or RUN_POINTER)


def running_config() -> Path | None:
    """The config the pointer names, if the pointer and that file both exist."""
    try:
        named = pointer_path().read_text().strip()
    except OSError:
        return None
    return Path(named) if named and Path(named).exists() else None


def write_pointer(config: str | os.PathLike[str]) -> Path:
    """Point at `config` (made absolute); readable by everyone, so `p4lb` run without sudo
    finds the config and can say that it needs sudo to read it."""
    pointer = pointer_path()
    pointer.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = pointer.with_name(f".{pointer.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{Path(config).resolve()}\n")
    tmp.chmod(0o644)
    os.replace(tmp, pointer)
    return pointer


def clear_pointer(config: str | os.PathLike[str] | None = None) -> bool:
    """Remove the pointer (only if it names `config`, when given); whether it was removed."""
    pointer = pointer_path()
    if config is not None:
        try:
            named = pointer.read_text().strip()
        except OSError:
            return False
        if named != str(Path(config).resolve()):
            return False
    try:
        pointer.unlink()
    except FileNotFoundError:
        return False
    return True
