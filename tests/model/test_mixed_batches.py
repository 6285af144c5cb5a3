"""The tiny model's mixed windows: packed rows, the document mask against separate forwards, and a short run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ropekit.model.checkpoint import load
from ropekit.model.mixed_batches import mixed_batch, use_mixed_window
from ropekit.model.tiny import TinyConfig, TinyLM
from ropekit.model.train import TrainConfig, make_batch, train, training_loss
from ropekit.scaling.longrope import LongRopeScaling

L0 = 16
SPEC = LongRopeScaling(
    short_factor=(1.0,) * 4, long_factor=(1.0, 2.0, 4.0, 4.0), original_max_position_embeddings=L0, factor=4.0
)


def _config(**changes) -> TinyConfig:
    options = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, train_length=64, scaling=SPEC)
    return TinyConfig(**(options | changes))


def _corpus() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, 5000).astype(np.uint8)


def test_mixed_batches_pack_short_rows_below_l0_and_are_a_function_of_seed_and_step():
    settings = TrainConfig(batch_size=16, task_fraction=0.0, seed=3)

    def batch():
        ids, answers = make_batch(_corpus(), _config(), settings, 5, with_answers=True)
        return mixed_batch(ids, answers, _corpus(), _config(), settings.seed, 5)

    ids, answers, positions, documents = batch()
    assert ids.shape == documents.shape == (16, 65) and positions.shape == (16, 64)
    short = documents.amax(-1) > 0  # packed rows hold several pieces; full-length rows one document
    assert 0 < int(short.sum()) < 16
    assert int(positions[short].max()) < L0 and bool((positions[~short] == torch.arange(64)).all())
    for row in range(16):
        starts = torch.cat([torch.tensor([True]), documents[row, 1:-1] != documents[row, :-2]])
        assert torch.equal(positions[row] == 0, starts)
    again = batch()
    assert all(torch.equal(a, b) for a, b in zip((ids, answers, positions, documents), again, strict=True))


def test_packed_forward_equals_separate_forwards_of_each_piece():
    """The model's own plain forward of each piece alone (positions 0…n−1, within L0: the short list) is the oracle."""
    torch.manual_seed(0)
    model = use_mixed_window(TinyLM(_config())).eval()
    plain = TinyLM(_config()).eval()
    plain.load_state_dict(model.state_dict())
    pieces = [torch.randint(0, 256, (n,)) for n in (9, 16, 7)]
    ids = torch.cat(pieces)[None]
    positions = torch.cat([torch.arange(len(p)) for p in pieces])[None]
    numbers = torch.cat([torch.full((len(p),), i) for i, p in enumerate(pieces)])[None]
    with torch.no_grad():
        packed = model(ids, positions, documents=numbers)[0]
        alone = torch.cat([plain(p[None])[0] for p in pieces])
        torch.testing.assert_close(packed, alone, atol=1e-5, rtol=1e-5)
        long_ids = torch.randint(0, 256, (1, 40))  # one document past L0: the long list, as the plain model's switch
        torch.testing.assert_close(model(long_ids, torch.arange(40)[None]), plain(long_ids), atol=1e-5, rtol=1e-5)
    batch = torch.cat([ids, ids[:, :1]], dim=1)  # (1, 33): the last target closes the row
    documents = torch.cat([numbers, numbers[:, -1:]], dim=1)
    loss = training_loss(model(ids, positions, documents=numbers), batch, torch.zeros(1), 1.0, documents)
    sums = [torch.nn.functional.cross_entropy(plain(p[None, :-1])[0], p[1:], reduction="sum") for p in pieces]
    inside = sum(len(p) - 1 for p in pieces) + 1  # the closing target is inside the last piece
    last = torch.nn.functional.cross_entropy(plain(pieces[-1][None])[0, -1:], ids[0, :1], reduction="sum")
    torch.testing.assert_close(loss, (sum(sums) + last) / inside, atol=1e-5, rtol=1e-5)


def test_a_mixed_window_run_writes_a_longrope_checkpoint_that_loads_plainly(tmp_path):
    settings = TrainConfig(steps=2, batch_size=4, warmup_steps=1, task_fraction=0.0, mixed_window=True)
    equal = LongRopeScaling(
        short_factor=SPEC.long_factor, long_factor=SPEC.long_factor, original_max_position_embeddings=L0
    )
    train(_config(scaling=equal), settings, tmp_path / "run", corpus=_corpus(), progress=False)
    model = load(tmp_path / "run")
    assert model.config.scaling.short_factor == (1.0,) * 4  # equal lists became the original RoPE
    assert model.config.scaling.long_factor == SPEC.long_factor
    assert type(model.rotary).__name__ == "RotaryEmbedding"


def test_mixed_window_needs_longrope(tmp_path):
    with pytest.raises(ValueError, match="mixed_window needs a longrope scaling"):
        train(_config(scaling=None), TrainConfig(steps=1, mixed_window=True), tmp_path / "run", corpus=_corpus())
    assert not (tmp_path / "run").exists()
