"""The package's layers, read from its source with `ast`: every module belongs to a declared
layer, imports go only downward in the order data flows, no two modules import each other in
a circle, and only the switch layer touches gRPC and the P4Runtime protos. Lazy imports
(inside functions, under TYPE_CHECKING) count like any other."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "controller" / "p4lb"

# Lower ranks first. A module may import its own layer and layers of a lower rank; layers of
# the same rank (switch, stats) may not import each other. `models` is outside the controller:
# it may use the layers, and no layer may import it.
RANKS = {
    "intent": 0,  # what the user asks for; knows nothing of P4
    "pipeline": 1,  # what the switch should hold; pure
    "switch": 2,  # the P4Runtime client
    "stats": 2,  # counters -> shares; pure, never talks to the switch itself
    "service": 3,  # one-shot operations, `p4lb run`, health checks
    "cli": 4,  # the command line
    "models": 5,  # reference models for tests, bench and scripts
}
ROOT_MODULE = "p4lb"  # the package's __init__: a docstring and the version, no imports
P4RUNTIME_LAYER = "switch"
# The P4Info (p4.config.v1) is the contract the pipeline reads; the runtime protocol is not.
ALLOWED_PROTOS = ("finsy.proto.p4i",)


@dataclass(frozen=True)
class Import:
    importer: str  # module name, e.g. p4lb.intent.reader
    target: str  # the module (or external name) imported
    line: int

    def where(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.target}"


def module_name(path: Path, package: Path) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules(package: Path) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def imports(package: Path) -> list[Import]:
    """Every import statement of every module, resolved to the module it names where the
    name is one of the package's modules (`from p4lb.cli import changes` -> p4lb.cli.changes)."""
    known = modules(package)
    found = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [Import(name, a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package upward
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in known or not base.startswith(ROOT_MODULE):
                        found.append(Import(name, full, node.lineno))
                    else:
                        found.append(Import(name, base, node.lineno))
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != ROOT_MODULE:
        return None
    return parts[1] if len(parts) > 1 else ROOT_MODULE


def is_p4runtime(target: str) -> bool:
    if target in ALLOWED_PROTOS:
        return False
    return any(
        target == p or target.startswith(p + ".") for p in ("grpc", "p4", "google.rpc", "finsy")
    )


def layer_violations(found: list[Import]) -> list[str]:
    out = []
    for imp in found:
        here, there = layer_of(imp.importer), layer_of(imp.target)
        if here is None or there is None:
            continue
        if here == ROOT_MODULE:
            out.append(f"{imp.where()}: the package's __init__ imports nothing")
            continue
        if here not in RANKS:
            out.append(f"{imp.importer} is in no declared layer ({here!r}); add it to RANKS")
            continue
        if there in (here, ROOT_MODULE):
            continue
        if there not in RANKS:
            out.append(f"{imp.where()}: {there!r} is in no declared layer")
        elif RANKS[there] >= RANKS[here]:
            out.append(
                f"{imp.where()}: layer {here!r} (rank {RANKS[here]}) may only import lower "
                f"layers, not {there!r} (rank {RANKS[there]})"
            )
    return list(dict.fromkeys(out))  # a module outside every layer is named once


def cycles(found: list[Import]) -> list[list[str]]:
    """Each circle of imports between the package's modules (one per strongly connected
    component), as the modules along it, the first repeated at the end."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if layer_of(imp.target) is not None and imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the package is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, set(c)) for c in components]


def _circle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """One circle through a strongly connected component, for the message."""
    start = min(comp)
    path, seen, v = [start], {start}, start
    while True:
        v = min(w for w in graph[v] if w in comp)
        path.append(v)
        if v in seen:
            return path[path.index(v) :]
        seen.add(v)


def p4runtime_violations(found: list[Import]) -> list[str]:
    return [
        f"{imp.where()}: only the {P4RUNTIME_LAYER} layer talks gRPC / P4Runtime"
        for imp in found
        if is_p4runtime(imp.target) and layer_of(imp.importer) != P4RUNTIME_LAYER
    ]


# ---------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def package_imports() -> list[Import]:
    return imports(PACKAGE)


def test_every_module_is_in_a_declared_layer() -> None:
    unplaced = [m for m in modules(PACKAGE) if layer_of(m) not in (*RANKS, ROOT_MODULE)]
    assert unplaced == [], f"modules outside every layer: {unplaced}"
    assert {layer_of(m) for m in modules(PACKAGE)} == {*RANKS, ROOT_MODULE}


def test_imports_go_only_downward(package_imports: list[Import]) -> None:
    assert layer_violations(package_imports) == []


def test_no_import_cycles_between_modules(package_imports: list[Import]) -> None:
    assert cycles(package_imports) == []


def test_only_the_switch_layer_imports_grpc_or_the_p4runtime_protos(
    package_imports: list[Import],
) -> None:
    assert p4runtime_violations(package_imports) == []
    # ... and the switch layer does: the rule is not vacuous.
    assert any(
        is_p4runtime(i.target) and layer_of(i.importer) == P4RUNTIME_LAYER for i in package_imports
    )


def test_every_package_says_in_one_line_what_its_layer_is() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "\n" not in doc.strip(), f"{init}: a one-line docstring"


# ---------------------------------------------------------------- the checks can fail


def write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "p4lb"
    for rel, text in {"__init__.py": "", **files}.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for parent in p.relative_to(pkg).parents:
            (pkg / parent / "__init__.py").touch()
        p.write_text(text)
    return pkg


def each(found: list[Import]) -> Iterator[str]:
    yield from layer_violations(found)
    yield from p4runtime_violations(found)


def test_an_upward_import_is_named(tmp_path: Path) -> None:
    pkg = write_package(
        tmp_path,
        {
            "intent/model.py": "def f():\n    from p4lb.pipeline import p4info\n",
            "pipeline/p4info.py": "",
            "stats/counters.py": "from p4lb.switch.client import Switch\n",
            "switch/client.py": "",
        },
    )
    got = list(each(imports(pkg)))
    assert got == [
        "p4lb.intent.model (line 2) imports p4lb.pipeline.p4info: layer 'intent' (rank 0) may "
        "only import lower layers, not 'pipeline' (rank 1)",
        "p4lb.stats.counters (line 1) imports p4lb.switch.client: layer 'stats' (rank 2) may "
        "only import lower layers, not 'switch' (rank 2)",
    ]


def test_a_circle_of_imports_is_named(tmp_path: Path) -> None:
    pkg = write_package(
        tmp_path,
        {
            "intent/a.py": "from p4lb.intent import b\n",
            "intent/b.py": "from p4lb.intent.c import x\n",
            "intent/c.py": "if False:\n    import p4lb.intent.a\n",
        },
    )
    assert cycles(imports(pkg)) == [
        ["p4lb.intent.a", "p4lb.intent.b", "p4lb.intent.c", "p4lb.intent.a"]
    ]


def test_grpc_outside_the_switch_layer_is_named(tmp_path: Path) -> None:
    pkg = write_package(
        tmp_path,
        {
            "service/ops.py": "import grpc\n",
            "pipeline/codec.py": "from finsy.proto import p4i, p4r\n",
            "switch/client.py": "import grpc\nfrom finsy.proto import p4r_grpc\n",
        },
    )
    assert p4runtime_violations(imports(pkg)) == [
        "p4lb.pipeline.codec (line 1) imports finsy.proto.p4r: only the switch layer talks "
        "gRPC / P4Runtime",
        "p4lb.service.ops (line 1) imports grpc: only the switch layer talks gRPC / P4Runtime",
    ]


def test_a_module_outside_every_layer_is_named(tmp_path: Path) -> None:
    pkg = write_package(tmp_path, {"helpers.py": "from p4lb.intent import model\n"})
    (pkg / "intent").mkdir()
    (pkg / "intent" / "model.py").write_text("")
    assert layer_violations(imports(pkg)) == [
        "p4lb.helpers is in no declared layer ('helpers'); add it to RANKS"
    ]
