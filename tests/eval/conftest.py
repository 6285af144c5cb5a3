"""Fixtures for the evaluation tests: a tiny random checkpoint (no download, no training)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ropekit.model import TinyConfig, TinyLM, save

#: long enough for a passkey episode (>= 109 byte tokens) at 1× the training length; tests repeat this number
TRAIN_LENGTH = 128


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer random TinyLM saved to a temporary directory."""
    torch.manual_seed(0)
    config = TinyConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64, train_length=TRAIN_LENGTH)
    return save(TinyLM(config), tmp_path_factory.mktemp("tiny") / "m")
