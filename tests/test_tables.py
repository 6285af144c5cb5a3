"""Tests of ropekit.tables: cos/sin tables from positions and frequencies.

Oracles: e^{imθ} in complex128 built independently of the formula under test, and the attention factor as an exact
multiple of the plain tables.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ropekit.functional import apply_rope
from ropekit.scaling.registry import Frequencies, inv_freq
from ropekit.tables import cos_sin

BASE = 10000.0


def tables(positions: torch.Tensor, rotary_dim: int, dtype: torch.dtype = torch.float32):
    return cos_sin(positions, inv_freq(rotary_dim, BASE), dtype=dtype)


def test_attention_factor_scales_norms_and_tables(seed):
    positions = torch.arange(50)
    x = torch.randn(1, 50, 2, 16, dtype=torch.float64)
    cos1, sin1 = tables(positions, 16, dtype=torch.float64)
    cos2, sin2 = cos_sin(positions, inv_freq(16, BASE), attention_factor=1.25, dtype=torch.float64)
    torch.testing.assert_close(cos2, 1.25 * cos1, rtol=1e-15, atol=0)
    torch.testing.assert_close(sin2, 1.25 * sin1, rtol=1e-15, atol=0)
    y = apply_rope(x, cos2, sin2)
    torch.testing.assert_close(y.norm(dim=-1), 1.25 * x.norm(dim=-1), rtol=1e-13, atol=0)
    # A Frequencies' own factor multiplies the one passed.
    cos3, _ = cos_sin(positions, Frequencies(inv_freq(16, BASE), 2.0), attention_factor=1.25, dtype=torch.float64)
    torch.testing.assert_close(cos3, 2.5 * cos1, rtol=1e-15, atol=0)


def test_cos_sin_within_1e7_at_every_position_up_to_2_pow_20():
    """All 2**20 + 1 positions (some 67M values per table) for d = 128, b = 1e4.

    The oracle is independent of the formula under test: e^{i(m0+k)θ} = e^{im0θ}·e^{ikθ} in complex128, from
    a 1024-entry table of e^{ikθ} and one e^{im0θ} per block (error ~1e-15).
    """
    d, block, n = 128, 1024, 2**20 + 1
    theta = BASE ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    inner = np.exp(1j * np.outer(np.arange(block, dtype=np.float64), theta))  # (block, d/2)
    freqs = inv_freq(d, BASE)
    worst_cos = worst_sin = 0.0
    blocks_per_chunk = 64
    n_blocks = -(-n // block)
    for b0 in range(0, n_blocks, blocks_per_chunk):
        starts = np.arange(b0, min(b0 + blocks_per_chunk, n_blocks), dtype=np.float64) * block
        ref = (np.exp(1j * np.outer(starts, theta))[:, None, :] * inner[None]).reshape(-1, d // 2)
        cos, sin = cos_sin(torch.arange(int(starts[0]), int(starts[-1]) + block), freqs)
        assert cos.dtype == sin.dtype == torch.float32
        worst_cos = max(worst_cos, float(np.abs(cos.numpy() - ref.real).max()))
        worst_sin = max(worst_sin, float(np.abs(sin.numpy() - ref.imag).max()))
    assert worst_cos <= 1e-7 and worst_sin <= 1e-7, (worst_cos, worst_sin)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: inv_freq(15, BASE), ValueError, r"rotary_dim must be even.*got 15"),
        (lambda: inv_freq(0, BASE), ValueError, r"rotary_dim must be an integer >= 2, got 0"),
        # base
        (lambda: inv_freq(16, 1.0), ValueError, r"base must be > 1.0, got 1.0"),
        (lambda: inv_freq(16, 0.5), ValueError, r"base must be > 1.0, got 0.5"),
        (lambda: inv_freq(16, -3), ValueError, r"base must be > 1.0, got -3"),
        (lambda: inv_freq(16, float("nan")), ValueError, r"base must be finite, got nan"),
        (lambda: inv_freq(16, float("inf")), ValueError, r"base must be finite, got inf"),
        (lambda: inv_freq(16, "1e4"), TypeError, r"base must be a real number, got '1e4'"),
        # positions
        (
            lambda: cos_sin(torch.tensor([0, -3]), inv_freq(16, BASE)),
            ValueError,
            r"positions must be >= 0, got minimum -3",
        ),
        (
            lambda: cos_sin(torch.tensor([0.0, 1.5]), inv_freq(16, BASE)),
            TypeError,
            r"positions must have an integer dtype, got torch.float32",
        ),
        (
            lambda: cos_sin(torch.tensor([True]), inv_freq(16, BASE)),
            TypeError,
            r"positions must have an integer dtype, got torch.bool",
        ),
        (
            lambda: cos_sin([0, 1], inv_freq(16, BASE)),
            TypeError,
            r"positions must be an integer torch.Tensor, got list",
        ),
        (
            lambda: cos_sin(torch.zeros(1, 2, 3, dtype=torch.long), inv_freq(16, BASE)),
            ValueError,
            r"positions must be 1-D .*got shape \(1, 2, 3\)",
        ),
        # attention factor and table dtype
        (
            lambda: cos_sin(torch.arange(3), inv_freq(16, BASE), attention_factor=float("nan")),
            ValueError,
            r"attention_factor must be finite, got nan",
        ),
        (
            lambda: cos_sin(torch.arange(3), inv_freq(16, BASE), attention_factor=0.0),
            ValueError,
            r"attention_factor must be > 0.0, got 0.0",
        ),
        (
            lambda: cos_sin(torch.arange(3), inv_freq(16, BASE), dtype=torch.int32),
            TypeError,
            r"dtype must be a floating dtype, got torch.int32",
        ),
    ],
)
def test_bad_input_raises_error_naming_argument_and_value(call, error, match):
    with pytest.raises(error, match=match):
        call()
