"""The engine versions ropekit is checked against are written once (``ropekit._versions.CHECKED``). pyproject.toml's
extras declare a range for each from that version up (a user's newer transformers stays), the ``dev`` extra,
``constraints.txt`` and the Makefile pin exactly it (what CI installs), and every engine installed here lies in the
range its extras declare (so a run with the newest transformers in range passes this too).

Oracle: the build files as text, read with ``packaging`` (pip's own reading of a requirement)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ropekit._versions import CHECKED, ENGINE_PACKAGES, unchecked

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
#: the extra that pins what CI tests (the others declare ranges)
PINNED_EXTRA = "dev"


def _declared(package: str, *, pinned: bool) -> list[tuple[str, Requirement]]:
    """``(extra, requirement)`` for every requirement of ``package`` in the pinned extra or in the others."""
    return [
        (extra, requirement)
        for extra, lines in EXTRAS.items()
        if (extra == PINNED_EXTRA) == pinned
        for requirement in map(Requirement, lines)
        if canonicalize_name(requirement.name) == canonicalize_name(package)
    ]


RANGED = sorted(package for package in CHECKED if _declared(package, pinned=False))


def test_the_engine_extras_declare_ranges():
    assert RANGED == ["deepspeed", "llama-cpp-python", "lm-eval", "mlx-lm", "transformers"]


@pytest.mark.parametrize("package", RANGED)
def test_each_range_starts_at_the_checked_version(package: str) -> None:
    for extra, requirement in _declared(package, pinned=False):
        operators = {spec.operator for spec in requirement.specifier}
        assert not operators & {"==", "===", "~="}, (extra, str(requirement))
        assert Version(CHECKED[package]) in requirement.specifier, (extra, str(requirement))
        lows = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        assert lows == [Version(CHECKED[package])], (extra, str(requirement))
        assert any(s.operator == "<" for s in requirement.specifier), (extra, str(requirement))  # an upper end


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_ci_pins_the_checked_version(package: str) -> None:
    constraints = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert constraints == CHECKED
    for extra, requirement in _declared(package, pinned=True):
        assert str(requirement.specifier) == f"=={CHECKED[package]}", (extra, str(requirement))
    makefile = set(
        re.findall(rf"{re.escape(package)}(?:\[[a-z,]+\])?==([0-9][0-9a-z.]*)", (ROOT / "Makefile").read_text())
    )
    assert makefile <= {CHECKED[package]}, makefile


@pytest.mark.parametrize("package", RANGED)
def test_an_installed_engine_lies_in_its_declared_range(package: str) -> None:
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed here")
    for extra, requirement in _declared(package, pinned=False):
        assert Version(installed) in requirement.specifier, (extra, str(requirement), installed)


def test_engines_names_every_engine_that_is_not_the_checked_version():
    checked = {name: CHECKED[package] for name, package in ENGINE_PACKAGES.items()}
    assert unchecked(checked) is None
    assert unchecked({**checked, "SGLang": "0.5.23", "Ollama": None, "vLLM": "unknown"}) is None
    newer = {**checked, "transformers": "5.24.0", "MLX-LM": "0.32.3"}
    assert unchecked(newer) == (
        f"transformers 5.24.0 (checked: {CHECKED['transformers']}), MLX-LM 0.32.3 (checked: {CHECKED['mlx-lm']})"
    )
