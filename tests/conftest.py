"""Shared fixtures and marker handling: ``gpu`` tests skip without CUDA, ``hf`` tests without transformers."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_cuda = torch.cuda.is_available()
    has_hf = importlib.util.find_spec("transformers") is not None
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if "hf" in item.keywords and not has_hf:
            item.add_marker(pytest.mark.skip(reason="needs transformers (pip install ropekit[hf])"))


@pytest.fixture
def seed() -> int:
    """Seed torch and numpy; tests that draw random tensors use it so they are deterministic."""
    torch.manual_seed(0)
    np.random.seed(0)
    return 0
