"""Tests of ropekit.module.RotaryEmbedding against float64 references built here from closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ropekit.module
from ropekit.config import RopeConfig
from ropekit.module import RotaryEmbedding
from ropekit.scaling import DynamicScaling, YarnScaling, inv_freq
from ropekit.tables import cos_sin

BASE = 10000.0


def ref_tables(positions: torch.Tensor, rotary_dim: int, base: float = BASE, inv_freq: np.ndarray | None = None):
    """float64 cos/sin of m·θ_i with θ_i = b^(−2i/d) (or the given frequencies)."""
    theta = base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim) if inv_freq is None else inv_freq
    angles = positions.numpy().astype(np.float64)[..., None] * theta
    return torch.from_numpy(np.cos(angles)), torch.from_numpy(np.sin(angles))


def complex_rope(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int, interleaved: bool, base: float = BASE):
    """float64 RoPE by complex multiplication; x ``(batch, seq, heads, head_dim)``, positions ``(seq,)``/``(b, seq)``."""
    cos, sin = ref_tables(positions, rotary_dim, base)
    rot = torch.complex(cos, sin)
    rot = rot.unsqueeze(-2) if rot.dim() == 3 else rot[None, :, None]  # broadcast over heads
    r, xd = rotary_dim, x.double()
    if interleaved:
        z = torch.view_as_complex(xd[..., :r].unflatten(-1, (r // 2, 2)).contiguous()) * rot
        head = torch.view_as_real(z).flatten(-2)
    else:
        z = torch.complex(xd[..., : r // 2], xd[..., r // 2 : r]) * rot
        head = torch.cat((z.real, z.imag), dim=-1)
    return torch.cat((head, xd[..., r:]), dim=-1)


LAYOUTS = pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])


@LAYOUTS
@pytest.mark.parametrize("rotary_dim", [None, 16], ids=["full", "partial"])
def test_forward_rotates_q_and_k_with_different_head_counts(seed, interleaved, rotary_dim):
    config = RopeConfig(32, rotary_dim=rotary_dim, interleaved=interleaved)
    rope = RotaryEmbedding(config)
    q, k = torch.randn(2, 9, 8, 32), torch.randn(2, 9, 2, 32)
    positions = torch.arange(100, 109)
    q_rot, k_rot = rope(q, k, positions)
    r = rotary_dim or 32
    torch.testing.assert_close(q_rot.double(), complex_rope(q, positions, r, interleaved), rtol=0, atol=1e-6)
    torch.testing.assert_close(k_rot.double(), complex_rope(k, positions, r, interleaved), rtol=0, atol=1e-6)
    assert torch.equal(q_rot[..., r:], q[..., r:]) and torch.equal(k_rot[..., r:], k[..., r:])


def test_cache_grows_past_initial_size_with_correct_values():
    rope = RotaryEmbedding(RopeConfig(64))
    checks = [torch.arange(10), torch.tensor([255, 256, 257]), torch.tensor([5000, 70_000])]
    for positions in [*checks, torch.arange(10)]:  # and the first positions again, after growing
        cos, sin = rope.cos_sin(positions)
        assert cos.dtype == torch.float32 and cos.shape == (*positions.shape, 32)
        ref_cos, ref_sin = ref_tables(positions, 64)
        torch.testing.assert_close(cos.double(), ref_cos, rtol=0, atol=1e-7)
        torch.testing.assert_close(sin.double(), ref_sin, rtol=0, atol=1e-7)


def test_batched_positions_and_empty_positions():
    rope = RotaryEmbedding(RopeConfig(16))
    positions = torch.tensor([[0, 1, 2], [400, 3, 1000]])  # (batch, seq)
    cos, sin = rope.cos_sin(positions)
    assert cos.shape == (2, 3, 8)
    torch.testing.assert_close(cos.double(), ref_tables(positions, 16)[0], rtol=0, atol=1e-7)
    torch.testing.assert_close(sin.double(), ref_tables(positions, 16)[1], rtol=0, atol=1e-7)
    cos, sin = rope.cos_sin(torch.zeros(2, 0, dtype=torch.long))
    assert cos.shape == sin.shape == (2, 0, 8)


@pytest.mark.parametrize(
    ("scaling", "expected_factor"),
    [
        (YarnScaling(factor=4.0, original_max_position_embeddings=2048), 0.1 * math.log(4.0) + 1.0),
        (YarnScaling(factor=8.0, original_max_position_embeddings=4096, attention_factor=1.5), 1.5),
    ],
    ids=["yarn_default_mscale", "yarn_explicit"],
)
def test_attention_factor_multiplies_cos_and_sin(seed, scaling, expected_factor):
    rope = RotaryEmbedding(RopeConfig(64, scaling=scaling))
    assert rope.frequencies.attention_factor == pytest.approx(expected_factor, rel=1e-12)
    positions = torch.tensor([0, 1, 1000, 30_000])
    cos, sin = rope.cos_sin(positions)
    ref_cos, ref_sin = ref_tables(positions, 64, inv_freq=rope.frequencies.inv_freq)
    torch.testing.assert_close(cos.double(), expected_factor * ref_cos, rtol=0, atol=2e-7)
    torch.testing.assert_close(sin.double(), expected_factor * ref_sin, rtol=0, atol=2e-7)
    # So every rotated q and k is scaled by A (and logits by A²).
    q, k = torch.randn(1, 4, 2, 64), torch.randn(1, 4, 1, 64)
    q_rot, k_rot = rope(q, k, positions)
    torch.testing.assert_close(q_rot.norm(dim=-1), expected_factor * q.norm(dim=-1), rtol=1e-5, atol=0)
    torch.testing.assert_close(k_rot.norm(dim=-1), expected_factor * k.norm(dim=-1), rtol=1e-5, atol=0)


def test_dynamic_ntk_follows_length_and_resets_below_original(seed):
    """b' = b·(s·n/L − (s−1))^(d/(d−2)) for n > L; back to b when a call is shorter than L."""
    d, s, L = 16, 2.0, 64
    rope = RotaryEmbedding(RopeConfig(d, scaling=DynamicScaling(factor=s, original_max_position_embeddings=L)))
    short = torch.arange(10)
    torch.testing.assert_close(rope.cos_sin(short)[0].double(), ref_tables(short, d)[0], rtol=0, atol=1e-7)
    long = torch.arange(100)
    grown_base = BASE * (s * 100 / L - (s - 1)) ** (d / (d - 2))
    torch.testing.assert_close(rope.cos_sin(long)[0].double(), ref_tables(long, d, grown_base)[0], rtol=0, atol=1e-7)
    torch.testing.assert_close(rope.cos_sin(short)[1].double(), ref_tables(short, d)[1], rtol=0, atol=1e-7)


def test_fixed_length_dynamic_keeps_its_cache_while_decoding(monkeypatch):
    """With fixed_seq_len the frequencies never change, so decoding token by token never rebuilds the tables."""
    d, L, fixed = 16, 64, 4096
    scaling = DynamicScaling(factor=4.0, original_max_position_embeddings=L, fixed_seq_len=fixed)
    rope = RotaryEmbedding(RopeConfig(d, scaling=scaling))
    builds = []
    real_cos_sin = ropekit.module.cos_sin
    monkeypatch.setattr(
        ropekit.module, "cos_sin", lambda *a, **kw: builds.append(a[0].numel()) or real_cos_sin(*a, **kw)
    )
    rope.cos_sin(torch.arange(300))
    for p in range(300, 340):  # decode past L0 one position at a time
        cos, _ = rope.cos_sin(torch.tensor([p]))
    assert len(builds) == 1, builds
    fixed_base = BASE * (4.0 * fixed / L - 3.0) ** (d / (d - 2))
    torch.testing.assert_close(cos.double(), ref_tables(torch.tensor([339]), d, fixed_base)[0], rtol=0, atol=1e-7)


def test_forward_offset_equals_explicit_positions(seed):
    rope = RotaryEmbedding(RopeConfig(32, interleaved=True))
    q, k = torch.randn(2, 5, 4, 32), torch.randn(2, 5, 4, 32)
    by_offset = rope(q, k, offset=1234)
    explicit = rope(q, k, torch.arange(1234, 1239))
    assert torch.equal(by_offset[0], explicit[0]) and torch.equal(by_offset[1], explicit[1])
    torch.testing.assert_close(
        by_offset[0].double(), complex_rope(q, torch.arange(1234, 1239), 32, True), rtol=0, atol=1e-6
    )
    # Default offset 0 is positions 0..seq−1.
    assert torch.equal(rope(q, k)[0], rope(q, k, torch.arange(5))[0])


def test_decode_step_with_offset_equals_row_of_full_sequence(seed):
    rope = RotaryEmbedding(RopeConfig(32))
    q, k = torch.randn(1, 20, 2, 32), torch.randn(1, 20, 1, 32)
    full_q, full_k = rope(q, k)
    for p in (0, 7, 19):
        step_q, step_k = rope(q[:, p : p + 1], k[:, p : p + 1], offset=p)
        assert torch.equal(step_q, full_q[:, p : p + 1]) and torch.equal(step_k, full_k[:, p : p + 1])


def test_seq_dim_2(seed):
    rope = RotaryEmbedding(RopeConfig(16))
    q, k = torch.randn(2, 3, 7, 16), torch.randn(2, 1, 7, 16)  # (batch, heads, seq, head_dim)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [9, 8, 7, 6, 5, 4, 3]])
    q_rot, k_rot = rope(q, k, positions, seq_dim=2)
    for x, y in ((q, q_rot), (k, k_rot)):
        ref = complex_rope(x.transpose(1, 2), positions, 16, False).transpose(1, 2)
        torch.testing.assert_close(y.double(), ref, rtol=0, atol=1e-6)
    assert torch.equal(rope(q, k, offset=3, seq_dim=2)[1], rope(q, k, torch.arange(3, 10), seq_dim=2)[1])


def test_max_positions_limit():
    rope = RotaryEmbedding(RopeConfig(16), max_positions=100)
    q = torch.zeros(1, 1, 1, 16)
    rope(q, q, torch.tensor([99]))
    with pytest.raises(ValueError, match=r"position 100 is beyond max_positions=100"):
        rope(q, q, torch.tensor([100]))
    with pytest.raises(ValueError, match=r"position 101 is beyond max_positions=100"):
        rope(torch.zeros(1, 2, 1, 16), torch.zeros(1, 2, 1, 16), offset=100)
    with pytest.raises(ValueError, match=r"max_positions must be an integer >= 1, got 0"):
        RotaryEmbedding(RopeConfig(16), max_positions=0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda r, q: r(q, q, torch.tensor([0.0, 1.0, 2.0])),
            TypeError,
            r"positions must have an integer dtype, got torch.float32",
        ),
        (lambda r, q: r(q, q, torch.tensor([0, -1, 2])), ValueError, r"positions must be >= 0, got minimum -1"),
        (lambda r, q: r(q, q, offset=-5), ValueError, r"offset must be an integer >= 0, got -5"),
        (lambda r, q: r(q, q, offset=1.5), TypeError, r"offset must be an integer, got 1.5"),
        (lambda r, q: r(q, q, torch.arange(3), offset=2), ValueError, r"either positions or offset.*offset=2"),
        (lambda r, q: r(q, q, seq_dim=3), ValueError, r"seq_dim must be 1 or 2, got 3"),
        (lambda r, q: r(q, q, torch.arange(4)), ValueError, r"cos/sin cover 4 positions but x has 3"),
        (lambda r, q: r(q.long(), q, torch.arange(3)), TypeError, r"x must be a floating-point tensor .*torch.int64"),
        (lambda r, q: r(q[0], q[0]), ValueError, r"q must be 4-D .*got shape \(3, 2, 16\)"),
        (
            lambda r, q: r.cos_sin(torch.arange(3), dtype=torch.bfloat16),
            TypeError,
            r"dtype must be torch.float32 or torch.float64, got torch.bfloat16",
        ),
        (lambda r, q: RotaryEmbedding({"head_dim": 16}), TypeError, r"config must be a RopeConfig, got dict"),
    ],
)
def test_bad_input_names_argument_and_value(call, error, match):
    rope = RotaryEmbedding(RopeConfig(16))
    with pytest.raises(error, match=match):
        call(rope, torch.zeros(1, 3, 2, 16))


def test_low_precision_inputs_use_fp32_tables_and_keep_dtype(seed):
    rope = RotaryEmbedding(RopeConfig(32)).to(torch.bfloat16)  # must not degrade the tables
    q = torch.randn(1, 6, 2, 32).to(torch.bfloat16)
    positions = torch.tensor([0, 1, 2, 9000, 2**16 - 1, 2**16])
    q_rot, _ = rope(q, q, positions)
    assert q_rot.dtype == torch.bfloat16
    exact = complex_rope(q, positions, 32, False)
    assert (q_rot == exact.to(torch.bfloat16)).double().mean() >= 0.99
    torch.testing.assert_close(q_rot.double(), exact, rtol=2**-8, atol=1e-6)


def test_float64_inputs_get_float64_accuracy(seed):
    rope = RotaryEmbedding(RopeConfig(64))
    q = torch.randn(1, 3, 2, 64, dtype=torch.float64)
    positions = torch.tensor([1, 2**19 + 1, 2**20])
    q_rot, _ = rope(q, q, positions)
    assert q_rot.dtype == torch.float64
    torch.testing.assert_close(q_rot, complex_rope(q, positions, 64, False), rtol=0, atol=1e-12)


def test_gradcheck_through_module(seed):
    rope = RotaryEmbedding(RopeConfig(8, rotary_dim=6, interleaved=True))
    q = torch.randn(2, 3, 2, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 1, 8, dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([5, 500, 50_000])
    assert torch.autograd.gradcheck(lambda q, k: rope(q, k, positions), (q, k))


def test_tables_follow_the_input_device_cpu():
    rope = RotaryEmbedding(RopeConfig(16))
    q = torch.zeros(1, 2, 1, 16)
    q_rot, _ = rope(q, q)
    assert q_rot.device == q.device
    cos, _ = rope.cos_sin(torch.arange(2), device=torch.device("cpu"))
    assert cos.device.type == "cpu"
    assert not list(rope.parameters()) and not rope.state_dict()  # nothing to move or to save


@pytest.mark.gpu
def test_tables_follow_the_input_device_cuda(seed):
    rope = RotaryEmbedding(RopeConfig(32))
    positions = torch.arange(300)
    q_cpu = torch.randn(1, 300, 2, 32)
    for device in ("cpu", "cuda", "cpu", "cuda"):
        q = q_cpu.to(device)
        q_rot, _ = rope(q, q, positions.to(device))
        assert q_rot.device == q.device
        torch.testing.assert_close(q_rot.cpu().double(), complex_rope(q_cpu, positions, 32, False), rtol=0, atol=1e-6)


# ---------------------------------------------------------------- far positions and the bounded cache


@pytest.mark.parametrize("position", [2**20, 2**22, 2**40, 2**62])
def test_rotary_embedding_far_positions_are_computed_directly(position):
    rope = RotaryEmbedding(RopeConfig(128))
    positions = torch.tensor([0, 5, position])
    cos, sin = rope.cos_sin(positions)
    ref_cos, ref_sin = cos_sin(positions, inv_freq(128, 10000.0))
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)
    assert rope._cos is None or rope._cos.shape[0] <= rope.cache_limit  # no table of every smaller position


def test_cache_is_bounded_and_cached_values_equal_direct():
    rope = RotaryEmbedding(RopeConfig(32), cache_limit=1000)
    positions = torch.arange(990, 1010)
    cos, sin = rope.cos_sin(positions)
    assert rope._cos is None or rope._cos.shape[0] <= 1000
    ref_cos, ref_sin = cos_sin(positions, inv_freq(32, 10000.0))
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)
    cos, _ = rope.cos_sin(torch.arange(900))  # below the limit: served from a cache of <= 1000 rows
    assert rope._cos.shape[0] <= 1000
    assert torch.equal(cos, cos_sin(torch.arange(900), inv_freq(32, 10000.0))[0])


def test_cache_limit_is_validated():
    with pytest.raises(ValueError, match="cache_limit must be an integer >= 1, got 0"):
        RotaryEmbedding(RopeConfig(16), cache_limit=0)


def test_rotary_embedding_refuses_other_head_dims():
    rope = RotaryEmbedding(RopeConfig(8))
    q = torch.randn(1, 3, 2, 16)
    with pytest.raises(ValueError, match=r"q must be 4-D with head_dim 8 .*got shape \(1, 3, 2, 16\)"):
        rope(q, q)
    with pytest.raises(ValueError, match=r"k must be 4-D with head_dim 8"):
        rope(torch.randn(1, 3, 2, 8), q)
