#!/usr/bin/env python3
"""SHA-256 over the P4 sources (paths and contents, sorted), the stamp the committed
compiled artifacts carry. `--check` exits 1 when the stamp is stale."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P4SRC = ROOT / "p4src"
STAMP = P4SRC / "compiled" / "SOURCES.sha256"


def sources_hash(p4src: Path = P4SRC) -> str:
    h = hashlib.sha256()
    for path in sorted(p4src.rglob("*.p4")):
        if "compiled" in path.parts:
            continue
        h.update(path.relative_to(p4src).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def main(argv: list[str]) -> int:
    digest = sources_hash()
    if "--check" in argv:
        stamped = STAMP.read_text().split()[0] if STAMP.exists() else "(none)"
        if stamped != digest:
            print(
                f"p4src changed since the artifacts were compiled (stamp {stamped[:12]}, "
                f"sources {digest[:12]}): run `make artifacts`",
                file=sys.stderr,
            )
            return 1
        return 0
    print(digest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
