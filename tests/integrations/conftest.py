"""Shared fixture of the transformers integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def quiet_transformers() -> Iterator[None]:
    """transformers logs advice about the deliberately small configs; the tests only compare numbers. Used with
    ``pytestmark = pytest.mark.usefixtures("quiet_transformers")`` (not autouse: some tests here capture warnings)."""
    transformers = pytest.importorskip("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)
