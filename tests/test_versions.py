"""The engine versions ropekit is checked against are written once (``ropekit._versions.CHECKED``): pyproject.toml
and the Makefile pin the same ones, and every one that is installed here is that version."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from ropekit._versions import CHECKED

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_the_build_files_pin_the_checked_version(package: str) -> None:
    text = (ROOT / "pyproject.toml").read_text() + (ROOT / "Makefile").read_text()
    pins = set(re.findall(rf"{re.escape(package)}(?:\[[a-z,]+\])?==([0-9][0-9a-z.]*)", text))
    assert pins == {CHECKED[package]}, (package, pins)


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_an_installed_engine_is_the_checked_version(package: str) -> None:
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed here")
    assert installed == CHECKED[package]
