"""Tests of ropekit.tables: cos/sin tables from positions and frequencies.

Oracles: e^{imθ} in complex128 built independently of the formula under test, the attention factor as an exact
multiple of the plain tables, and mpmath at 60 digits for the tables at huge positions.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from ropekit import RopeConfig, RotaryEmbedding
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


# ---------------------------------------------------------------- precision at huge positions


def _exact_cos_sin(position: int, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of position · f for the float64 frequencies f, at 60 significant digits."""
    with mpmath.workdps(60):
        angles = [mpmath.mpf(position) * mpmath.mpf(float(f)) for f in freqs]
        return (
            np.array([float(mpmath.cos(a)) for a in angles]),
            np.array([float(mpmath.sin(a)) for a in angles]),
        )


@pytest.mark.parametrize("position", [3, 2**24 - 1, 2**24, 2**31 + 12345, 2**40, 3 * 10**13, 2**52, 2**53 + 1, 2**62])
def test_tables_within_one_rounding_of_exact_at_any_int64_position(position):
    freqs = inv_freq(128, 10000.0)
    positions = torch.tensor([position])
    exact_cos, exact_sin = _exact_cos_sin(position, freqs)
    cos64, sin64 = cos_sin(positions, freqs, dtype=torch.float64)
    assert np.abs(cos64.numpy()[0] - exact_cos).max() <= 2e-9
    assert np.abs(sin64.numpy()[0] - exact_sin).max() <= 2e-9
    cos32, sin32 = cos_sin(positions, freqs)
    # One fp32 rounding: at most half an fp32 ulp of the exact value, plus the 2e-9 of the angle.
    for table, exact in ((cos32, exact_cos), (sin32, exact_sin)):
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        assert np.all(np.abs(table.numpy()[0].astype(np.float64) - exact) <= ulp / 2 + 2e-9)


def test_below_2_pow_24_tables_are_the_plain_float64_product():
    freqs = inv_freq(64, 500000.0)
    positions = torch.tensor([0, 1, 65535, 65536, 2**24 - 1])
    cos, sin = cos_sin(positions, freqs, dtype=torch.float64)
    angles = positions.double()[:, None] * torch.from_numpy(freqs)
    assert torch.equal(cos, torch.cos(angles)) and torch.equal(sin, torch.sin(angles))


def test_far_positions_keep_relative_rotation():
    """q·k depends only on n − m, also near 2**62 (the property RoPE exists for)."""
    freqs = inv_freq(32, 10000.0)
    m, n = 2**62 - 1000, 2**62 - 1000 + 77
    cos, sin = cos_sin(torch.tensor([m, n, 0, 77]), freqs, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, 32, dtype=torch.float64, generator=g)
    k = torch.randn(1, 1, 1, 32, dtype=torch.float64, generator=g)
    far = (apply_rope(q, cos[0:1], sin[0:1]) * apply_rope(k, cos[1:2], sin[1:2])).sum()
    near = (apply_rope(q, cos[2:3], sin[2:3]) * apply_rope(k, cos[3:4], sin[3:4])).sum()
    assert abs(float(far - near)) <= 1e-7 * float(q.norm() * k.norm())


# ---------------------------------------------------------------- bad frequencies and attention factors


@pytest.mark.parametrize(
    ("freqs", "error", "match"),
    [
        (np.array([1.0, np.nan]), ValueError, r"inv_freq must be finite and >= 0.*nan"),
        (np.array([1.0, np.inf]), ValueError, r"inv_freq must be finite and >= 0.*inf"),
        (np.array([1.0, -0.5]), ValueError, r"inv_freq must be finite and >= 0.*-0.5"),
        (np.array([1.0 + 1j]), TypeError, r"inv_freq must hold real numbers"),
        (torch.tensor([True, False]), TypeError, r"inv_freq must hold real numbers, got dtype torch.bool"),
        (torch.tensor([1.0 + 0j]), TypeError, r"inv_freq must hold real numbers"),
        (np.array([True]), TypeError, r"inv_freq must hold real numbers"),
        (torch.zeros(0), ValueError, r"inv_freq must be 1-D with one entry per rotating pair, got shape \(0,\)"),
        ([1.0, 0.5], TypeError, r"inv_freq must be a 1-D tensor, a numpy array or a Frequencies, got list"),
    ],
)
def test_bad_inv_freq_is_refused(freqs, error, match):
    with pytest.raises(error, match=match):
        cos_sin(torch.arange(3), freqs)


@pytest.mark.parametrize("factor", [-1.0, 0.0, math.nan, math.inf])
def test_bad_frequencies_attention_factor_is_refused(factor):
    with pytest.raises(ValueError, match=r"Frequencies\.attention_factor must"):
        cos_sin(torch.arange(3), Frequencies(inv_freq(8, 10000.0), factor))


def test_zero_frequency_is_a_pair_that_does_not_rotate():
    cos, sin = cos_sin(torch.arange(5), np.array([0.0, 1.0]), dtype=torch.float64)
    assert torch.equal(cos[:, 0], torch.ones(5, dtype=torch.float64))
    assert torch.equal(sin[:, 0], torch.zeros(5, dtype=torch.float64))


# ---------------------------------------------------------------- odd positions and dtypes


def test_meta_positions_give_meta_tables():
    cos, sin = cos_sin(torch.arange(6, device="meta"), inv_freq(8, 10000.0))
    assert cos.is_meta and sin.is_meta and cos.shape == (6, 4)
    rope = RotaryEmbedding(RopeConfig(8))
    cos, _ = rope.cos_sin(torch.arange(6, device="meta"))
    assert cos.is_meta and cos.shape == (6, 4)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_wide_unsigned_positions_are_accepted(dtype):
    positions = torch.tensor([0, 7, 1000], dtype=dtype)
    cos, sin = cos_sin(positions, inv_freq(8, 10000.0))
    ref = cos_sin(torch.tensor([0, 7, 1000]), inv_freq(8, 10000.0))
    assert torch.equal(cos, ref[0]) and torch.equal(sin, ref[1])


def test_dtype_must_be_a_torch_dtype():
    with pytest.raises(TypeError, match=r"dtype must be a floating dtype, got 'float32' \(a torch.dtype"):
        cos_sin(torch.arange(3), inv_freq(8, 10000.0), dtype="float32")
