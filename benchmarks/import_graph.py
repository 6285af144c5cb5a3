"""ropekit's import graph, read statically: cycles among its modules and its packages, imports from the core into
the upper packages, and imports among the upper packages against their order (:data:`ORDER`, lowest first).

Every import statement counts wherever it stands, so a lazy import inside a function ties two modules as much as
one at the top of the file (it runs the other module the first time the function is called); imports under
``if TYPE_CHECKING:`` never run and do not count. ``from ropekit.a import b`` ties the importer to ``ropekit.a.b``
when that is a module and to ``ropekit.a`` otherwise; a package's ``__init__`` importing its own submodules and
imports of the top-level ``ropekit`` (lazy re-exports only) are left out, as in ``/work/shared/tools/import-graph``.

Run ``python benchmarks/import_graph.py [src/ropekit]`` to print the cycles and upward imports (exit status 1 if there
are any); ``tests/test_imports.py`` asserts there are none.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

#: the package's source folder
PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ropekit"

#: the core: frequencies and rotation (DESIGN.md, "Dependencies point down this list")
CORE = (
    "config",
    "hf_format",
    "hf_model_keys",
    "scaling",
    "tables",
    "permute",
    "functional",
    "module",
    "kernels",
    "theory",
    "_validate",
)
#: the upper packages, lowest first: each may import the core and the packages before it, never one after it
#: (DESIGN.md: synthetic < model < eval < search < finetune < engines < cli; the attention methods, the mixed window
#: and the transformers/GGUF layer below them, the experiments and the short API just below the CLI)
ORDER = (
    "attention",
    "mixed_window",
    "integrations",
    "synthetic",
    "model",
    "eval",
    "search",
    "finetune",
    "engines",
    "experiments",
    "api",
    "cli",
)
#: what the core must never import
UPPER = ORDER


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``path`` (relative to the repository)."""

    source: str
    target: str
    path: str
    line: int


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }


def edges(package: Path = PACKAGE) -> list[Edge]:
    """Every import of one of the package's modules by another, with where it stands."""
    mods = modules(package)
    top = package.name

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    found: dict[Edge, None] = {}  # ordered set: ``from a import b, c`` names a once
    for source, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        here = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: climb from this module's package
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name == top or name.startswith(top + ".") else None
                if target is None or target in (source, top):
                    continue
                if path.name == "__init__.py" and target.startswith(source + "."):
                    continue
                found[Edge(source, target, path.relative_to(package.parents[1]).as_posix(), node.lineno)] = None
    return list(found)


def graph(found: list[Edge]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for edge in found:
        out.setdefault(edge.source, set()).add(edge.target)
        out.setdefault(edge.target, set())
    return out


def cycles(found: list[Edge]) -> list[list[str]]:
    """The import cycles: strongly connected groups of two or more modules (Tarjan), each sorted, sorted."""
    g = graph(found)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(groups)


def layer(module: str) -> str:
    """``ropekit.eval.sweep`` -> ``eval``."""
    return module.split(".")[1] if "." in module else ""


def upward(found: list[Edge]) -> list[Edge]:
    """Imports from a core module into an upper layer."""
    return [e for e in found if layer(e.source) in CORE and layer(e.target) in UPPER]


def upward_in_order(found: list[Edge], order: tuple[str, ...] = ORDER) -> list[Edge]:
    """Imports from a package of ``order`` into one after it (a package may import only those before it)."""
    rank = {name: i for i, name in enumerate(order)}
    return [
        e
        for e in found
        if layer(e.source) in rank and layer(e.target) in rank and rank[layer(e.source)] < rank[layer(e.target)]
    ]


def package_edges(found: list[Edge]) -> list[Edge]:
    """The imports between packages: each module named by its package (``ropekit.eval.sweep`` -> ``eval``, a module
    at the top by its own name), the core as one package (``core``, whose modules are checked one by one), imports
    within a package left out. :func:`cycles` of these are the package-level cycles."""

    def package(module: str) -> str:
        return "core" if layer(module) in CORE else layer(module)

    return [
        Edge(package(e.source), package(e.target), e.path, e.line)
        for e in found
        if package(e.source) != package(e.target)
    ]


def where(found: list[Edge], group: list[str]) -> list[str]:
    """The import statements that tie ``group`` together, as ``path:line source -> target``."""
    members = set(group)
    return [f"{e.path}:{e.line} {e.source} -> {e.target}" for e in found if e.source in members and e.target in members]


def main(argv: list[str]) -> int:
    """Print the cycles and upward imports of the package at ``argv[1]`` (default: this checkout's)."""
    package = Path(argv[1]) if len(argv) > 1 else PACKAGE
    found = edges(package)
    looped = 0
    for kind, graph_edges in (("cycle", found), ("package cycle", package_edges(found))):
        for group in cycles(graph_edges):
            looped += 1
            print(f"{kind}:", " <-> ".join(group))
            for line in where(graph_edges, group):
                print("   ", line)
    wrong = upward(found) + upward_in_order(found)
    for e in wrong:
        print(f"upward import: {e.source} -> {e.target} ({e.path}:{e.line})")
    if looped or wrong:
        return 1
    print(f"no cycles, no upward imports among {len(modules(package))} modules ({len(found)} imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
