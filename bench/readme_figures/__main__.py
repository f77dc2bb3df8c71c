"""`python -m bench.readme_figures`: regenerate or check the documents' regions (see the
package's docstring)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bench.readme_figures as rf
from bench import outdir


def copy_name(rel: str) -> str:
    """Where a partial run's regenerated copy of `rel` goes, under its results directory."""
    return {"results/README.md": "README.md", "README.md": "README.top.md"}.get(rel, rel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.readme_figures", description=rf.__doc__)
    ap.add_argument("--results", type=Path, default=outdir.RESULTS)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 on a difference")
    a = ap.parse_args(argv)
    root = a.results if a.results.is_absolute() else rf.ROOT / a.results
    in_place = root.resolve() == outdir.RESULTS.resolve()
    kept = "left as it was" if in_place or a.check else "marked not measured"
    bad = 0
    for rel, path in rf.READMES.items():
        text = path.read_text()
        if a.check:
            differ, missing = rf.differing(text, root, rel)
            for name in differ:
                print(f"readme-figures: {rel}: region {name} differs from {root}")
            bad += len(differ)
        else:
            new, missing = rf.regenerate(text, root, rel, placeholder=not in_place)
        for m in missing:
            print(f"readme-figures: {rel}: region {m} in {root}: {kept}", file=sys.stderr)
        if a.check:
            continue
        target = path if in_place else root / copy_name(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
        note = "" if in_place else " (a copy; the committed README is untouched)"
        print(f"readme-figures: {target}{note}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
