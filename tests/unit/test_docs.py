"""The docs cannot drift from the code: every shell block of README.md and docs/*.md is run by
a test or marked not run, every `run:` ID is used by a test, docs/configuration.md names
exactly the keys the config reader accepts, every path and module the docs name exists, and
README.md stays a front door. Each failure names the file, the line and what is wrong."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4lb.intent import reader
from tests.docs import ROOT, Block, doc_block, doc_files, shell_blocks

README_MAX_LINES = 260
CALL = re.compile(r"""doc_block\(\s*["']([^"']+)["']""")
# Top-level folders of the repository whose files the docs may name.
TOP = ("controller", "topology", "tests", "bench", "p4src", "scripts", "configs", "results")
TOP += ("docs", "dashboards", "vagrant", ".ci")
PATH = re.compile(r"^(?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./*{}-]*$")
MODULE = re.compile(r"^(?:p4lb|topology|bench|tests)(?:\.\w+)+$")
FILE_SUFFIXES = (".toml", ".json", ".md", ".py", ".txt", ".p4", ".sh")
TICKS = re.compile(r"`([^`\n]+)`")


def marker_problems(blocks: list[Block]) -> list[str]:
    return [
        f"{b.where}: ```{b.tag} block has no <!-- run: ID --> or <!-- not run: reason --> "
        "marker on the line above its fence"
        for b in blocks
        if not b.marker_kind or not b.marker_value
    ]


def ids_used_by_tests(root: Path = ROOT) -> dict[str, str]:
    """ID -> the first test file calling doc_block("ID") (tests/docs.py and this file aside)."""
    used: dict[str, str] = {}
    for p in sorted((root / "tests").rglob("*.py")):
        if p.name in ("docs.py", "test_docs.py") and p.parent.name in ("tests", "unit"):
            continue
        for m in CALL.finditer(p.read_text()):
            used.setdefault(m.group(1), str(p.relative_to(root)))
    return used


def id_problems(blocks: list[Block], used: dict[str, str]) -> list[str]:
    out = []
    seen: dict[str, str] = {}
    for b in blocks:
        if b.marker_kind != "run":
            continue
        if b.marker_value in seen:
            out.append(f"{b.where}: run ID {b.marker_value!r} also marks {seen[b.marker_value]}")
        seen.setdefault(b.marker_value, b.where)
        if b.marker_value not in used:
            out.append(
                f"{b.where}: run ID {b.marker_value!r}: no test under tests/ calls "
                f'doc_block("{b.marker_value}") (run it in a test, or mark it not run)'
            )
    for block_id, test in sorted(used.items()):
        if block_id not in seen:
            out.append(f"{test}: doc_block({block_id!r}): no block in the docs is marked with it")
    return out


def documented_keys(path: Path) -> dict[str, int]:
    """Key paths docs/configuration.md documents -> their line: each heading's tables
    (`[switch.tls]`, `[[vip.NAME.backend]]`, and their parents), and each table row's first
    cell in backticks under it, prefixed with the heading's tables."""
    keys: dict[str, int] = {}
    prefixes: list[str] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("#"):
            prefixes = re.findall(r"`\[\[?([\w.]+)\]\]?`", line)
            for p in prefixes:
                parts = p.split(".")
                for i in range(1, len(parts) + 1):
                    keys.setdefault(".".join(parts[:i]), n)
            continue
        row = re.match(r"^\|\s*`([\w]+)`\s*\|", line)
        if row and prefixes:
            for p in prefixes:
                keys.setdefault(f"{p}.{row.group(1)}", n)
    return keys


def key_problems(path: Path, accepted: list[str]) -> list[str]:
    documented = documented_keys(path)
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    out = [
        f"{rel}: the config reader accepts `{k}` but no table here documents it"
        for k in accepted
        if k not in documented
    ]
    out += [
        f"{rel}:{line}: documents `{k}`, which the config reader refuses (unknown key)"
        for k, line in documented.items()
        if k not in accepted
    ]
    return out


def named_paths(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every backticked repository path or module a doc names."""
    fence = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        for m in TICKS.finditer(line):
            text = m.group(1).strip()
            if PATH.match(text) or (MODULE.match(text) and not text.endswith(FILE_SUFFIXES)):
                yield n, text


def _module_exists(name: str, root: Path) -> bool:
    parts = name.split(".")
    base = root / "controller" if parts[0] == "p4lb" else root
    for cut in (len(parts), len(parts) - 1):
        stem = base.joinpath(*parts[:cut])
        src = stem.with_suffix(".py") if stem.with_suffix(".py").is_file() else stem / "__init__.py"
        if not src.is_file():
            continue
        if cut == len(parts):
            return True
        attr = parts[-1]  # a function, class or constant of that module
        return bool(re.search(rf"^(def |class )?{attr}\b", src.read_text(), re.M))
    return False


def path_problems(doc: Path, root: Path = ROOT) -> list[str]:
    out = []
    for line, text in named_paths(doc):
        rel = doc.relative_to(root) if doc.is_relative_to(root) else doc
        if MODULE.match(text):
            if not _module_exists(text, root):
                out.append(f"{rel}:{line}: module `{text}` does not exist")
            continue
        clean = re.sub(r":\d+(-\d+)?$", "", text)
        if "{" in clean:
            clean = clean.split("{")[0].rsplit("/", 1)[0]
        if "*" in clean:
            if not list(root.glob(clean)):
                out.append(f"{rel}:{line}: `{text}` matches no file")
        elif not (root / clean).exists():
            out.append(f"{rel}:{line}: `{text}` does not exist")
    return out


def test_every_shell_block_is_run_or_marked_not_run() -> None:
    blocks = shell_blocks()
    assert blocks, "no ```sh or ```console block found in README.md or docs/"
    problems = marker_problems(blocks)
    assert not problems, "\n".join(problems)


def test_every_run_id_is_used_by_a_test_and_every_used_id_marks_a_block() -> None:
    problems = id_problems(shell_blocks(), ids_used_by_tests())
    assert not problems, "\n".join(problems)


def test_configuration_md_documents_exactly_the_keys_the_reader_accepts() -> None:
    problems = key_problems(ROOT / "docs" / "configuration.md", reader.accepted_keys())
    assert not problems, "\n".join(problems)


def test_paths_and_modules_the_docs_name_exist() -> None:
    problems = [p for doc in doc_files() for p in path_problems(doc)]
    assert not problems, "\n".join(problems)


def test_readme_is_a_front_door() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md: {n} lines, more than {README_MAX_LINES}: move the detail into docs/"
    )


def test_docs_name_papers_and_features_not_internal_numbers() -> None:
    bad = re.compile(r"\bseeds? 00\d|\bissues? #?\d+", re.I)
    problems = [
        f"{doc.relative_to(ROOT)}:{n}: {m.group(0)!r}: name the paper or the feature instead"
        for doc in doc_files()
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        for m in bad.finditer(line)
    ]
    assert not problems, "\n".join(problems)


# The checks themselves, on broken input: each must fail, naming file and line.


def test_a_block_without_marker_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(
        "# x\n\n<!-- not run: needs a VM -->\n```sh\nvagrant up\n```\n\n```sh\nls\n```\n"
    )
    (tmp_path / "docs").mkdir()
    assert marker_problems(shell_blocks(tmp_path)) == [
        f"{doc}:8: ```sh block has no <!-- run: ID --> or <!-- not run: reason --> marker "
        "on the line above its fence"
    ]


def test_an_unused_or_duplicate_id_is_named(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "<!-- run: a -->\n```sh\nls\n```\n<!-- run: a -->\n```console\n$ ls\n```\n"
    )
    blocks = shell_blocks(tmp_path)
    problems = id_problems(blocks, {"b": "tests/e2e/test_x.py"})
    assert any(":6: run ID 'a' also marks" in p for p in problems)
    assert any(":2: run ID 'a': no test under tests/ calls" in p for p in problems)
    assert any(p.startswith("tests/e2e/test_x.py: doc_block('b')") for p in problems)
    with pytest.raises(ValueError, match="several blocks"):
        doc_block("a", tmp_path)
    with pytest.raises(ValueError, match="no block"):
        doc_block("zzz", tmp_path)


def test_a_missing_or_refused_key_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "configuration.md"
    text = (ROOT / "docs" / "configuration.md").read_text()
    doc.write_text(text.replace("| `prefix_len` |", "| `prefix_length` |"))
    problems = key_problems(doc, reader.accepted_keys())
    assert any("accepts `host.prefix_len` but no table" in p for p in problems)
    assert any(
        "documents `host.prefix_length`, which the config reader refuses" in p for p in problems
    )
    line = next(n for n, ln in enumerate(doc.read_text().splitlines(), 1) if "prefix_length" in ln)
    assert any(p.startswith(f"{doc}:{line}:") for p in problems)


def test_a_path_or_module_that_does_not_exist_is_named(tmp_path: Path) -> None:
    doc = ROOT / "docs" / "_probe.md"
    lines = [
        "`controller/p4lb/cli/commands.py` and `p4lb.service.observe` exist;",
        "`controller/p4lb/cli/nothing.py`, `p4lb.health.overlay`, `topology/scaleout.py` do not;",
        "`p4lb.intent.reader.accepted_keys` is a function, `p4lb.intent.reader.nope` is not.",
    ]
    try:
        doc.write_text("\n".join(lines) + "\n")
        problems = path_problems(doc)
    finally:
        doc.unlink()
    assert problems == [
        "docs/_probe.md:2: `controller/p4lb/cli/nothing.py` does not exist",
        "docs/_probe.md:2: module `p4lb.health.overlay` does not exist",
        "docs/_probe.md:2: `topology/scaleout.py` does not exist",
        "docs/_probe.md:3: module `p4lb.intent.reader.nope` does not exist",
    ]


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = doc.read_text()
    found = {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)">', text))


def link_problems(doc: Path, root: Path = ROOT) -> list[str]:
    out = []
    rel = doc.relative_to(root) if doc.is_relative_to(root) else doc
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                out.append(f"{rel}:{n}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                out.append(f"{rel}:{n}: link to {target}: no heading #{anchor} there")
    return out


def test_links_between_the_docs_lead_somewhere() -> None:
    problems = [p for doc in doc_files() for p in link_problems(doc)]
    assert not problems, "\n".join(problems)


def test_a_broken_link_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Health checks\n")
    doc.write_text("[ok](b.md#health-checks) [x](b.md#health) [y](c.md)\n")
    assert link_problems(doc, tmp_path) == [
        "a.md:1: link to b.md#health: no heading #health there",
        "a.md:1: link to c.md: no such file",
    ]
