"""Training batches with the RULER-style task mixture (``task_mix="suite"``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ropekit.model.tiny import TinyConfig
from ropekit.model.tokenizer import byte_ids
from ropekit.model.train import TrainConfig, make_batch

CORPUS = byte_ids(b"def f(x):\n    return x + 1\n" * 2000)


def test_suite_batches_are_exact_and_deterministic():
    config, train = TinyConfig(), TrainConfig(task_fraction=1.0, task_mix="suite", batch_size=32)
    batch = make_batch(CORPUS, config, train, 3)
    assert batch.shape == (32, config.train_length + 1)
    assert torch.equal(batch, make_batch(CORPUS, config, train, 3))
    texts = [bytes(row.numpy().astype(np.uint8)).decode() for row in batch]
    assert any("The pass key is" in t for t in texts)  # a quarter stay passkey episodes
    assert any("magic" in t for t in texts) and any("List:" in t or "VAR " in t for t in texts)


def test_passkey_mix_unchanged():
    config = TinyConfig()
    old = make_batch(CORPUS, config, TrainConfig(), 5)
    assert torch.equal(old, make_batch(CORPUS, config, TrainConfig(task_mix="passkey"), 5))


def test_bad_task_mix():
    with pytest.raises(ValueError, match="task_mix"):
        TrainConfig(task_mix="ruler")
