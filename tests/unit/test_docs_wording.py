"""The documents a reader sees speak to users: no issue numbers and no papers named by their
file numbers ("seed 002"); the papers are cited by their authors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# "issue 33", "Issue #15"; "seed 002", "Seeds 002, 003", "seed 001's". A random generator's
# seed given as an option ("--order-seed 727077") is a fact the reader can reuse: not matched.
SHORTHAND = re.compile(r"\bissues?\s*#?\d+|(?<![-\w])seeds?\s+\d+", re.I)


def documents() -> list[Path]:
    """README.md, docs/*.md, results/README.md and every results page outside raw/."""
    found = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted(ROOT.glob("docs/*.md"))]
    found += [
        p
        for p in sorted((ROOT / "results").rglob("*.md"))
        if "raw" not in p.relative_to(ROOT / "results").parts[:-1] and p not in found
    ]
    return found


def shorthand(text: str) -> list[str]:
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in SHORTHAND.finditer(text)
    ]


def test_the_pattern_finds_the_shorthand_and_spares_the_rest() -> None:
    assert shorthand("was regenerated (issue 33).\n# Experiments (Issue #15)") == [
        "line 1: 'issue 33'",
        "line 2: 'Issue #15'",
    ]
    assert len(shorthand("### Seed 002: WRR\nseeds 002, 003; seed 001's pair")) == 3
    assert shorthand("Usman et al.'s ratio; `--order-seed 727077`; seeded with 7") == []


def test_the_documents_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in documents()}
    assert {"README.md", "results/README.md", "docs/benchmarks.md"} <= names
    assert "results/experiments/summary.md" in names
    assert not any("/raw/" in n for n in names)


@pytest.mark.parametrize("doc", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers_or_numbered_papers(doc: Path) -> None:
    assert shorthand(doc.read_text()) == [], (
        f"{doc.relative_to(ROOT)} names an issue or a paper by number: say what it stands for, "
        "cite the paper by its authors"
    )
