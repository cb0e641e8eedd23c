"""Imports run downward (issues 15, 30): core (``raycrawl``'s ground modules) below storage, policies
and websim; actors above those; tasks (Ray tasks over a crawl's files, which use the actors' pure
parts: the shingler, the summary counts) above the actors; the CLI (``raycrawl.cli``,
``raycrawl.commands``) on top. A module may import its own layer or lower ones, never a higher one
(function-level imports count: a lazy import is still a dependency; ``from package import module``
is an import of that module)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Repository folders; each installs as ``raycrawl.<folder>`` except ``core/``, which is ``raycrawl``.
PACKAGES = ("core", "storage", "policies", "websim", "actors", "tasks")
LAYERS = {"core": 0, "storage": 1, "policies": 1, "websim": 1, "actors": 2, "tasks": 3, "cli": 4}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in PACKAGES[1:]:
        return parts[1]
    cli = module in ("raycrawl.cli", "raycrawl.__main__") or module.startswith("raycrawl.commands")
    return "cli" if cli else "core"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = ("raycrawl", *parts[1:]) if parts[0] == "core" else ("raycrawl", *parts)
    return ".".join(parts).removesuffix(".__init__")


def modules() -> list[str]:
    return [module_name(path) for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


MODULES: set[str] = set()


def imports() -> list[tuple[str, str]]:
    """(importer, imported) for every import between the project's packages."""
    MODULES.update(modules())
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = module_name(path)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    # ``from raycrawl.storage import bv_writer`` imports the module bv_writer
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names
                                            if f"{node.module}.{a.name}" in MODULES)]
                else:
                    continue
                found += [(module, n) for n in names if n.split(".")[0] == "raycrawl"]
    return found


def test_no_module_imports_a_higher_layer() -> None:
    edges = imports()
    assert len(edges) > 100  # the walk sees the project
    upward = sorted({(a, b) for a, b in edges if LAYERS[layer_of(b)] > LAYERS[layer_of(a)]})
    assert not upward, "\n".join(f"{a} ({layer_of(a)}) imports {b} ({layer_of(b)})" for a, b in upward)


def test_no_import_circles() -> None:
    """Between the project's modules (``from a.b import c`` depends on ``a.b``, or on ``a.b.c`` when
    that is a module): no strongly connected component of more than one module."""
    known = set(modules())
    graph: dict[str, set[str]] = {m: set() for m in known}
    for a, b in imports():
        target = b if b in known else b.rsplit(".", 1)[0] if b.rsplit(".", 1)[0] in known else None
        if target and target != a:
            graph[a].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, circles
