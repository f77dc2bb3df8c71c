"""The commands README.md and docs/*.md show, for the tests that run them.

A fenced block tagged ```sh or ```console carries a marker on the line just above its fence:
`<!-- run: ID -->` (a test calls `doc_block("ID")` and runs those commands) or
`<!-- not run: reason -->`. tests/unit/test_docs.py checks that every such block has one.

In a ```sh block every line that is not blank or a comment is a command (a trailing
`# comment` dropped, `\\` continuations joined), with prompt "". In a ```console block a line
starting with `$ ` (prompt "$") or `mininet> ` (prompt "mininet>") is a command, and the
lines after it, up to the next command, are the output the docs show for it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHELL_TAGS = ("sh", "console")
MARKER = re.compile(r"^<!--\s*(run|not run):\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
PROMPTS = (("$ ", "$"), ("mininet> ", "mininet>"))


@dataclass(frozen=True)
class DocCommand:
    """One command a doc shows: its prompt ("" in a ```sh block), the command line, and the
    output lines shown under it (```console blocks only)."""

    prompt: str
    command: str
    output: list[str]


@dataclass(frozen=True)
class Block:
    """A fenced block of a doc: where it is, its tag, its body, and the marker above it
    (kind "run" or "not run" with the ID or reason; kind "" when there is none)."""

    path: Path
    line: int  # the fence's line, 1-based
    tag: str
    body: list[str]
    marker_kind: str
    marker_value: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of one Markdown file, in order."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(2), m.group(3)
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        above = lines[start - 1].strip() if start > 0 else ""
        mm = MARKER.match(above)
        yield Block(
            path=path,
            line=start + 1,
            tag=tag,
            body=body,
            marker_kind=mm.group(1) if mm else "",
            marker_value=mm.group(2) if mm else "",
        )


def shell_blocks(root: Path = ROOT) -> list[Block]:
    """Every ```sh and ```console block of README.md and docs/*.md."""
    return [b for p in doc_files(root) for b in blocks(p) if b.tag in SHELL_TAGS]


def strip_comment(line: str) -> str:
    """`line` without a trailing `# comment` (a # outside quotes, after a space)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _join_continuations(lines: list[str]) -> list[str]:
    out: list[str] = []
    pending = ""
    for line in lines:
        text = pending + (line.strip() if pending else line)
        if text.endswith("\\"):
            pending = text[:-1].rstrip() + " "
            continue
        pending = ""
        out.append(text)
    if pending:
        out.append(pending.rstrip())
    return out


def parse_commands(block: Block) -> list[DocCommand]:
    """The commands of one block (see the module's docstring)."""
    if block.tag == "sh":
        kept = [strip_comment(ln) for ln in block.body if ln.strip()]
        kept = [ln for ln in kept if ln.strip()]
        return [DocCommand("", c.strip(), []) for c in _join_continuations(kept)]
    commands: list[DocCommand] = []
    body = list(block.body)
    i = 0
    while i < len(body):
        line = body[i]
        prompt = next((p for p in PROMPTS if line.startswith(p[0])), None)
        if prompt is None:
            if commands:
                commands[-1].output.append(line)
            i += 1
            continue
        text = line[len(prompt[0]) :]
        while text.rstrip().endswith("\\") and i + 1 < len(body):
            i += 1
            text = text.rstrip()[:-1].rstrip() + " " + body[i].strip().removeprefix("> ")
        commands.append(DocCommand(prompt[1], text.strip(), []))
        i += 1
    return commands


def doc_block(block_id: str, root: Path = ROOT) -> list[DocCommand]:
    """The commands of the one block marked `<!-- run: block_id -->` in README.md or
    docs/*.md; ValueError when no block or several carry that ID."""
    found = [
        b
        for p in doc_files(root)
        for b in blocks(p)
        if b.marker_kind == "run" and b.marker_value == block_id
    ]
    if not found:
        raise ValueError(f"no block in README.md or docs/*.md is marked <!-- run: {block_id} -->")
    if len(found) > 1:
        raise ValueError(
            f"several blocks are marked <!-- run: {block_id} -->: "
            + ", ".join(b.where for b in found)
        )
    return parse_commands(found[0])
