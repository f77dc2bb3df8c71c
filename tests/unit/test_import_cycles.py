"""No import circles among the project's Python modules: the controller package (p4lb), the
labs (topology) and the benchmarks (bench), read from their source with `ast`. Every import
counts, a lazy one inside a function as much as one at the top: a circle hidden in a
function still means neither module can be understood, or loaded, without the other."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Each top-level package and the folder it lives in.
PACKAGES = {
    "p4lb": REPO / "controller" / "p4lb",
    "topology": REPO / "topology",
    "bench": REPO / "bench",
}


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    """Every module by its dotted name (a package by its own: `p4lb.service`)."""
    found = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((name, *parts))] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules `name` imports, anywhere in it: `from a import b` is module a.b
    where there is one, else a; relative imports are resolved from `name`'s package."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        out |= {t for t in targets if t in known and t != name}
    return out


def circle(packages: dict[str, Path]) -> list[str]:
    """One circle of imports (the modules along it, the first repeated at the end), or []."""
    known = modules(packages)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(reversed(e.args[1]))  # graphlib lists it against the arrows
    return []


def test_no_module_imports_itself_through_others() -> None:
    found = circle(PACKAGES)
    assert found == [], "import circle: " + " -> ".join(found)


def test_the_graph_sees_all_three_packages_and_lazy_imports() -> None:
    """Not vacuous: the graph holds the edges the test is about, a lazy one included."""
    known = modules(PACKAGES)
    assert {n.partition(".")[0] for n in known} == set(PACKAGES)
    edges = {(n, t) for n, p in known.items() for t in imported(n, p, known)}
    assert ("topology.tier", "topology.tier_load") in edges  # top-level
    assert ("bench.tier", "topology.tier_load") in edges  # inside a function


def test_a_circle_through_a_lazy_import_is_named(tmp_path: Path) -> None:
    files = {
        "lab/__init__.py": "",
        "lab/plan.py": "from lab import procs\n",
        "lab/procs.py": "def run():\n    from .cli import main\n",
        "lab/cli.py": "import lab.plan\n",
        "lab/free.py": "from lab.plan import x\n",
        "tools/__init__.py": "",
        "tools/use.py": "from lab import free\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    packages = {"lab": tmp_path / "lab", "tools": tmp_path / "tools"}
    found = circle(packages)
    assert found[0] == found[-1] and len(found) == 4
    assert set(found) == {"lab.plan", "lab.procs", "lab.cli"}
    # Each step is an import: plan -> procs -> cli -> plan.
    order = ["lab.plan", "lab.procs", "lab.cli"]
    start = order.index(found[0])
    assert found[:-1] == order[start:] + order[:start]
    (tmp_path / "lab" / "cli.py").write_text("")
    assert circle(packages) == []
