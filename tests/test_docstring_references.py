"""Every Sphinx cross-reference in src (``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:data:``, ``:attr:``,
``:exc:``) names something that exists, so a renamed or removed object cannot stay named in a docstring.

A reference resolves as Sphinx would look for it: as an absolute dotted name, relative to the module (or its
package) it is written in, or, for a bare method or attribute, on a class of that module. Each referenced name is
imported for real; a module whose optional dependency is missing here is skipped.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?([^`<]+?)(?:\s*<[^>]*>)?`")


def _references() -> list[tuple[str, str]]:
    found = []
    for path in sorted((SRC / "ropekit").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for name in dict.fromkeys(ROLE.findall(path.read_text(encoding="utf-8"))):
            found.append((module, name.strip().removesuffix("()")))
    return found


def _lookup(dotted: list[str]) -> bool:
    """Whether ``dotted`` is an importable module followed by attributes (annotated dataclass fields count)."""
    for split in range(len(dotted), 0, -1):
        attempt = ".".join(dotted[:split])
        try:
            obj = importlib.import_module(attempt)
        except ModuleNotFoundError as error:
            if error.name and not (attempt == error.name or attempt.startswith(error.name + ".")):
                pytest.skip(f"{attempt} needs {error.name}, which is not installed")
            continue  # not a module: the rest are attributes
        for attribute in dotted[split:]:
            if hasattr(obj, attribute):
                obj = getattr(obj, attribute)
            elif attribute in getattr(obj, "__annotations__", {}):
                obj = None
            else:
                return False
        return True
    return False


def _resolves(module: str, name: str) -> bool:
    parts = name.split(".")
    package = module.rsplit(".", 1)[0]
    if any(_lookup(base + parts) for base in ([], module.split("."), package.split("."))):
        return True
    own = importlib.import_module(module)
    classes = [c for _, c in inspect.getmembers(own, inspect.isclass) if c.__module__ == module]
    return any(hasattr(c, parts[0]) or parts[0] in getattr(c, "__annotations__", {}) for c in classes)


REFERENCES = _references()


def test_references_are_found() -> None:
    assert len(REFERENCES) > 300  # the scan sees the docstrings at all


@pytest.mark.parametrize(("module", "name"), REFERENCES, ids=[f"{m}:{n}" for m, n in REFERENCES])
def test_reference_resolves(module: str, name: str) -> None:
    assert _resolves(module, name), f"{module} names {name!r}, which does not exist"
