"""A very small random tiny model for the search tests: a search of it takes seconds."""

from __future__ import annotations

from pathlib import Path

#: a very small search: two candidates on one sample each, at three times the training length (the held-out kinds
#: need samples of about 160 tokens)
SMALL = ("--target-length", "3x", "--evaluations", "2", "--samples", "1", "--heldout-samples", "1")


def small_tiny(folder: Path, seed: int = 1) -> Path:
    """A random tiny model (one layer, width 32, training length 64) saved to ``folder``; ``seed`` sets its
    weights, so two seeds give two models of one config."""
    import torch

    from ropekit.model import TinyLM, save
    from ropekit.model.tiny import TinyConfig

    torch.manual_seed(seed)
    config = TinyConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64, train_length=64)
    return save(TinyLM(config), folder)
