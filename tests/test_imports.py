"""The import graph: the core never imports the upper layers, the upper packages import only downward in their
order, and no ropekit modules (nor packages) import each other in a loop.

Read statically by ``benchmarks/import_graph.py`` (every import counts, lazy ones inside functions included), so
a cycle that only closes when some function runs is caught too. The analysis itself is checked on a small
package built here, and against what Python really loads when the core is imported.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "import_graph.py"


@pytest.fixture(scope="module")
def graph():
    spec = importlib.util.spec_from_file_location("ropekit_import_graph", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_core_never_imports_eval_cli_integrations_model_or_experiments(graph) -> None:
    found = graph.upward(graph.edges())
    assert not found, "core modules import upper layers:\n" + "\n".join(
        f"{e.path}:{e.line} {e.source} -> {e.target}" for e in found
    )
    # the list the check covers is the one DESIGN.md gives
    assert {"config", "hf_format", "scaling", "functional", "module", "kernels", "theory", "_validate"} <= set(
        graph.CORE
    )
    assert {"eval", "cli", "integrations", "model", "experiments"} <= set(graph.UPPER)


def test_no_import_cycles_among_ropekit_modules(graph) -> None:
    found = graph.edges()
    groups = graph.cycles(found)
    assert not groups, "import cycles (each with the imports that close it):\n" + "\n".join(
        " <-> ".join(group) + "\n    " + "\n    ".join(graph.where(found, group)) for group in groups
    )


def test_upper_packages_import_only_packages_below_them(graph) -> None:
    found = graph.upward_in_order(graph.edges())
    lines = "\n".join(f"{e.path}:{e.line} {e.source} -> {e.target}" for e in found)
    assert not found, f"imports into a package above the importer ({' < '.join(graph.ORDER)}):\n{lines}"
    # DESIGN.md's order, with the other upper packages placed around it
    design = ["synthetic", "model", "eval", "search", "finetune", "engines", "cli"]
    assert [name for name in graph.ORDER if name in design] == design
    rank = graph.ORDER.index
    assert max(rank("integrations"), rank("attention")) < rank("synthetic")
    assert rank("engines") < min(rank("experiments"), rank("api")) and rank("cli") == len(graph.ORDER) - 1


def test_every_package_is_core_or_placed_in_the_order(graph) -> None:
    packages = {path.parent.name for path in graph.PACKAGE.glob("*/__init__.py")}
    assert packages <= set(graph.CORE) | set(graph.ORDER), sorted(packages - set(graph.CORE) - set(graph.ORDER))


def test_no_import_cycles_among_packages(graph) -> None:
    found = graph.package_edges(graph.edges())
    groups = graph.cycles(found)
    assert not groups, "package-level import cycles:\n" + "\n".join(
        " <-> ".join(group) + "\n    " + "\n    ".join(graph.where(found, group)) for group in groups
    )


def test_importing_the_core_loads_no_upper_layer(graph) -> None:
    """What Python really loads (import time only; the static check above also sees lazy imports)."""
    core = [
        "ropekit.config",
        "ropekit.hf_format",
        "ropekit.scaling",
        "ropekit.tables",
        "ropekit.permute",
        "ropekit.functional",
        "ropekit.module",
        "ropekit.kernels",
        "ropekit.theory",
        "ropekit._validate",
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {core!r}:\n"
        "    importlib.import_module(name)\n"
        f"upper = {graph.UPPER!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2][-1] in upper and m.startswith('ropekit.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "[]"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "pkg"


def test_the_analysis_sees_lazy_and_relative_imports_and_skips_type_checking(graph, tmp_path: Path) -> None:
    package = _write(
        tmp_path / "src",  # paths are reported from the repository root, the folder above src/
        {
            "pkg/__init__.py": "from pkg.a import f\n",  # the top-level package: re-exports, left out
            "pkg/a.py": "def f():\n    from pkg.sub import b\n",  # lazy: counts
            "pkg/sub/__init__.py": "from . import b\n",  # a package importing its own module: left out
            "pkg/sub/b.py": "from ..c import g\n",  # relative: pkg.c
            "pkg/c.py": "import pkg.a\ng = 1\n",  # closes a -> sub.b -> c -> a
            "pkg/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.e import h\n",
            "pkg/e.py": "from pkg.d import TYPE_CHECKING\n",  # e -> d only: d's import never runs
        },
    )
    found = graph.edges(package)
    # the expected edges, written out by hand from the files above
    assert {(e.source, e.target) for e in found} == {
        ("pkg.a", "pkg.sub"),
        ("pkg.a", "pkg.sub.b"),
        ("pkg.sub.b", "pkg.c"),
        ("pkg.c", "pkg.a"),
        ("pkg.e", "pkg.d"),
    }
    assert graph.cycles(found) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert graph.where(found, ["pkg.a", "pkg.c", "pkg.sub.b"]) == [
        "src/pkg/a.py:2 pkg.a -> pkg.sub.b",
        "src/pkg/c.py:1 pkg.c -> pkg.a",
        "src/pkg/sub/b.py:1 pkg.sub.b -> pkg.c",
    ]


def test_the_order_catches_an_upward_import_and_a_package_cycle(graph, tmp_path: Path) -> None:
    package = _write(
        tmp_path / "src",
        {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/a.py": "def f():\n    from pkg.high.b import g\n",  # lazy, and up: low is below high
            "pkg/low/d.py": "h = 1\n",
            "pkg/high/__init__.py": "",
            "pkg/high/b.py": "g = 1\n",
            "pkg/high/c.py": "from pkg.low.d import h\n",  # down: allowed
        },
    )
    found = graph.edges(package)
    assert graph.cycles(found) == []  # no module imports itself through others
    assert [(e.source, e.target, e.path, e.line) for e in graph.upward_in_order(found, ("low", "high"))] == [
        ("pkg.low.a", "pkg.high.b", "src/pkg/low/a.py", 2)
    ]
    assert [(e.source, e.target) for e in graph.upward_in_order(found, ("high", "low"))] == [
        ("pkg.high.c", "pkg.low.d")
    ]
    assert graph.upward_in_order(found, ("low",)) == []  # a package outside the order is not judged
    assert graph.cycles(graph.package_edges(found)) == [["high", "low"]]
