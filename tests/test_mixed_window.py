"""Mixed-window training's rules: the per-sequence longrope choice (hand-computed float64 tables) and the mask."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ropekit.config import RopeConfig
from ropekit.mixed_window import MixedWindowRotary, document_mask, mixed_window_scaling
from ropekit.scaling import YarnScaling
from ropekit.scaling.longrope import LongRopeScaling

L0, BASE, DIM = 16, 10000.0, 8
LONG = (1.0, 2.5, 6.0, 9.0)


def _tables(positions: np.ndarray, factors, attention: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin in float64 from the LongRoPE formula written out: θ_i = 1 / (f_i · b^(2i/d)), times A."""
    theta = np.array([1.0 / (factors[i] * BASE ** (2 * i / DIM)) for i in range(DIM // 2)])
    angles = positions[..., None].astype(np.float64) * theta
    return attention * np.cos(angles), attention * np.sin(angles)


def _rope(**changes) -> RopeConfig:
    spec = dict(short_factor=(1.0,) * 4, long_factor=LONG, original_max_position_embeddings=L0, factor=4.0)
    return RopeConfig(DIM, base=BASE, scaling=LongRopeScaling(**(spec | changes)))


def test_packed_short_documents_take_the_original_frequencies_and_long_ones_the_long_list():
    rope = _rope()
    attention = math.sqrt(1 + math.log(4.0) / math.log(L0))  # the config's own A, for both lists
    short_row = np.concatenate([np.arange(10), np.arange(16), np.arange(6)])  # packed: max + 1 = 16 = L0
    long_row = np.arange(32)  # one document: max + 1 = 32 > L0
    positions = torch.from_numpy(np.stack([short_row, long_row]))
    cos, sin = MixedWindowRotary(rope).cos_sin(positions, dtype=torch.float64)
    for row, factors in ((0, (1.0,) * 4), (1, LONG)):
        want_cos, want_sin = _tables(positions[row].numpy(), factors, attention)
        np.testing.assert_allclose(cos[row].numpy(), want_cos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sin[row].numpy(), want_sin, rtol=0, atol=1e-12)


def test_the_switch_is_max_position_plus_one_above_l0_per_row():
    rotary = MixedWindowRotary(_rope())
    positions = torch.tensor([[0, 1, L0 - 1], [0, L0, 1], [5, 4, 3]])  # max + 1: L0, L0 + 1, 6
    assert rotary.long_rows(positions).tolist() == [False, True, False]
    cos32, _ = rotary.cos_sin(positions)  # the fp32 path: the same choice
    cos64, _ = rotary.cos_sin(positions, dtype=torch.float64)
    np.testing.assert_allclose(cos32.numpy(), cos64.numpy(), atol=1e-6)


def test_rotating_q_and_k_equals_the_explicit_rotation_of_each_pair():
    rope = _rope(attention_factor=1.0)
    positions = torch.tensor([[0, 1, 2, 0, 1], [0, 7, 19, 30, 31]])
    q, k = torch.randn(2, 5, 2, DIM, dtype=torch.float64), torch.randn(2, 5, 1, DIM, dtype=torch.float64)
    rq, _ = MixedWindowRotary(rope)(q, k, positions)
    for row, factors in ((0, (1.0,) * 4), (1, LONG)):
        cos, sin = _tables(positions[row].numpy(), factors, 1.0)  # (seq, pairs)
        x1, x2 = q[row, ..., : DIM // 2].numpy(), q[row, ..., DIM // 2 :].numpy()  # half-split pairs (i, i + d/2)
        want = np.concatenate([x1 * cos[:, None] - x2 * sin[:, None], x2 * cos[:, None] + x1 * sin[:, None]], axis=-1)
        np.testing.assert_allclose(rq[row].numpy(), want, atol=1e-12)


def test_document_mask_equals_the_naive_rule():
    documents = torch.tensor([[0, 0, 1, 1, 1, 2], [3, 3, 3, 3, 3, 3]])
    mask = document_mask(documents)
    assert mask.shape == (2, 1, 6, 6)
    for b in range(2):
        for i in range(6):
            for j in range(6):
                assert bool(mask[b, 0, i, j]) == (j <= i and documents[b, i] == documents[b, j])


def test_mixed_window_scaling_makes_equal_lists_the_original_rope_and_refuses_other_methods():
    equal = LongRopeScaling(short_factor=LONG, long_factor=LONG, original_max_position_embeddings=L0)
    assert mixed_window_scaling(equal).short_factor == (1.0,) * 4
    assert mixed_window_scaling(equal).long_factor == LONG
    given = _rope(short_factor=(1.0, 1.1, 1.2, 1.3)).scaling
    assert mixed_window_scaling(given) is given
    with pytest.raises(ValueError, match=r"needs a longrope scaling .* got yarn"):
        mixed_window_scaling(YarnScaling(factor=2.0, original_max_position_embeddings=L0))
    with pytest.raises(ValueError, match="got plain RoPE"):
        mixed_window_scaling(None)
    with pytest.raises(ValueError, match="fixed_seq_len"):
        mixed_window_scaling(_rope(fixed_seq_len=64).scaling)
