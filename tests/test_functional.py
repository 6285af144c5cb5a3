"""Tests of ropekit.functional: apply_rope and apply_rope_qk (the tables are tests/test_tables.py, the weight-layout
conversion tests/test_permute.py).

Every check compares against a float64 oracle (tests/helpers/rope_oracles.py) from the closed form θ_i = b^(−2i/d): an explicit
block-diagonal rotation matrix, complex multiplication (Meta's ``freqs_cis``), the ``rotate_half`` /
``rotate_every_two`` formulas, or a property (relative positions, norms, gradients); the tables' gradients against
float64 gradcheck and autograd through the eager formula; apply_rope_qk against two apply_rope calls.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.rope_oracles import (
    LAYOUTS,
    bits,
    complex_rope,
    formula_rope,
    matrix_rope,
    pair_indices,
    ref_angles,
    rotation_matrices,
    tables,
)
from ropekit.functional import apply_rope

# ---------------------------------------------------------------- the three forms agree


@LAYOUTS
@pytest.mark.parametrize("rotary_dim", [64, 32], ids=["full", "partial"])
def test_matrix_complex_and_formula_forms_agree_with_apply_rope(seed, interleaved, rotary_dim):
    positions = torch.tensor([0, 1, 2, 7, 100, 4095, 65_537, 2**20])
    x = torch.randn(2, len(positions), 3, 64)
    cos, sin = tables(positions, rotary_dim)
    y = apply_rope(x, cos, sin, interleaved=interleaved).double()
    angles = ref_angles(positions, rotary_dim)
    for oracle in (matrix_rope, complex_rope, formula_rope):
        torch.testing.assert_close(y, oracle(x, angles, interleaved), rtol=0, atol=1e-6, msg=oracle.__name__)
    # The oracles themselves agree to float64 rounding.
    torch.testing.assert_close(matrix_rope(x, angles, interleaved), complex_rope(x, angles, interleaved))


@LAYOUTS
def test_float64_input_matches_matrix_to_float64_precision(seed, interleaved):
    positions = torch.arange(0, 3000, 97)
    x = torch.randn(1, len(positions), 2, 16, dtype=torch.float64)
    cos, sin = tables(positions, 16, dtype=torch.float64)
    y = apply_rope(x, cos, sin, interleaved=interleaved)
    assert y.dtype == torch.float64
    torch.testing.assert_close(y, matrix_rope(x, ref_angles(positions, 16), interleaved), rtol=0, atol=1e-12)


@LAYOUTS
def test_layouts_are_a_permutation_of_each_other(seed, interleaved):
    """Interleaved pair i = dims (2i, 2i+1) is half-split pair i = dims (i, i + r/2)."""
    r = 16
    positions = torch.arange(10)
    x = torch.randn(1, 10, 2, r, dtype=torch.float64)
    cos, sin = tables(positions, r, dtype=torch.float64)
    to_half = torch.cat((torch.arange(0, r, 2), torch.arange(1, r, 2)))
    y_int = apply_rope(x, cos, sin, interleaved=True)
    y_half = apply_rope(x[..., to_half], cos, sin, interleaved=False)
    torch.testing.assert_close(y_int[..., to_half], y_half, rtol=0, atol=1e-14)


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    m=st.integers(0, 2**20),
    n=st.integers(0, 2**20),
    data_seed=st.integers(0, 2**31 - 1),
    interleaved=st.booleans(),
)
def test_relative_position_property(m, n, data_seed, interleaved):
    """⟨R_m q, R_n k⟩ = ⟨q, R_{n−m} k⟩ (RoFormer eq. 16); for n < m use the equal ⟨R_{m−n} q, k⟩."""
    g = torch.Generator().manual_seed(data_seed)
    q = torch.randn(1, 1, 1, 64, dtype=torch.float64, generator=g)
    k = torch.randn(1, 1, 1, 64, dtype=torch.float64, generator=g)

    def rotate(x, p):
        cos, sin = tables(torch.tensor([p]), 64, dtype=torch.float64)
        return apply_rope(x, cos, sin, interleaved=interleaved)

    lhs = (rotate(q, m) * rotate(k, n)).sum()
    rhs = (q * rotate(k, n - m)).sum() if n >= m else (rotate(q, m - n) * k).sum()
    # Angles up to 2**20 carry ~1e-10 absolute error in float64.
    assert abs(lhs - rhs) <= 1e-8 * q.norm() * k.norm()


@LAYOUTS
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rotation_preserves_norms(seed, interleaved, dtype):
    positions = torch.randint(0, 2**20, (64,))
    x = torch.randn(2, 64, 4, 32, dtype=dtype)
    cos, sin = tables(positions, 32, dtype=dtype)
    y = apply_rope(x, cos, sin, interleaved=interleaved)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(y.double().norm(dim=-1), x.double().norm(dim=-1), rtol=tol, atol=0)


# ---------------------------------------------------------------- autograd


@LAYOUTS
@pytest.mark.parametrize(
    ("rotary_dim", "seq_dim", "batched_positions"),
    [(8, 1, False), (6, 1, True), (8, 2, False), (4, 2, True)],
)
def test_gradcheck_float64(seed, interleaved, rotary_dim, seq_dim, batched_positions):
    positions = torch.tensor([[0, 3, 1000, 2**20], [5, 6, 7, 8]]) if batched_positions else torch.tensor([0, 3, 9, 4])
    cos, sin = tables(positions, rotary_dim, dtype=torch.float64)
    shape = (2, 4, 3, 8) if seq_dim == 1 else (2, 3, 4, 8)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)

    def f(x):
        return apply_rope(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim)

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


@LAYOUTS
def test_backward_is_rotation_by_negative_angle(seed, interleaved):
    positions = torch.tensor([0, 11, 2**19])
    x = torch.randn(1, 3, 2, 16, dtype=torch.float64, requires_grad=True)
    g = torch.randn(1, 3, 2, 16, dtype=torch.float64)
    cos, sin = tables(positions, 12, dtype=torch.float64)
    apply_rope(x, cos, sin, interleaved=interleaved).backward(g)
    R = rotation_matrices(ref_angles(positions, 12), 16, interleaved)  # (seq, D, D)
    expected = torch.einsum("sji,bshj->bshi", R, g)  # Rᵀ g
    torch.testing.assert_close(x.grad, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_saves_no_input_sized_tensor(seed, dtype):
    x = torch.randn(2, 16, 4, 32, dtype=dtype, requires_grad=True)  # 4096 elements; tables are 16·16 = 256
    cos, sin = tables(torch.arange(16), 32)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = apply_rope(x, cos, sin)
    assert saved, "the hook saw nothing: the check would be vacuous"
    assert all(t.numel() < x.numel() for t in saved), [tuple(t.shape) for t in saved]
    assert all(t.untyped_storage().data_ptr() != x.untyped_storage().data_ptr() for t in saved)
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_works_under_torch_compile(seed):
    """Traced as one graph (fullgraph) by dynamo and AOT autograd, forward and backward."""
    cos, sin = tables(torch.arange(16), 32)
    x = torch.randn(2, 16, 4, 48, requires_grad=True)
    compiled = torch.compile(
        lambda x, cos, sin: apply_rope(x, cos, sin, interleaved=True), fullgraph=True, backend="aot_eager"
    )
    y = compiled(x, cos, sin)
    angles = ref_angles(torch.arange(16), 32)
    torch.testing.assert_close(y.double(), complex_rope(x.detach(), angles, True), rtol=0, atol=1e-6)
    y.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach(), rtol=1e-5, atol=1e-5)  # d‖Rx‖²/dx = 2x


@pytest.mark.slow
def test_works_under_torch_compile_inductor(seed):
    cos, sin = tables(torch.arange(16), 32)
    x = torch.randn(2, 16, 4, 48, requires_grad=True)
    compiled = torch.compile(lambda x, cos, sin: apply_rope(x, cos, sin), fullgraph=True)
    y = compiled(x, cos, sin)
    torch.testing.assert_close(
        y.double(), matrix_rope(x.detach(), ref_angles(torch.arange(16), 32), False), atol=1e-6, rtol=0
    )
    y.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- partial rotary


@LAYOUTS
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["autograd", "out", "inplace"])
def test_partial_rotary_pass_through_is_bit_identical(seed, interleaved, dtype, mode):
    x = torch.randn(2, 5, 3, 24).to(dtype)
    # Values arithmetic would disturb: NaN payloads, −0.0, infinities and subnormals.
    x[0, 0, 0, 16:20] = torch.tensor([float("nan"), -0.0, float("inf"), torch.finfo(dtype).tiny / 4])
    original = x.clone()
    cos, sin = tables(torch.arange(5), 16)
    if mode == "autograd":
        y = apply_rope(x.requires_grad_(), cos, sin, interleaved=interleaved)
    elif mode == "out":
        y = apply_rope(x, cos, sin, interleaved=interleaved, out=torch.full_like(x, 7.0))
    else:
        y = apply_rope(x, cos, sin, interleaved=interleaved, inplace=True)
    assert torch.equal(bits(y[..., 16:]), bits(original[..., 16:]))
    # The rotary part did change, and matches the oracle.
    ref = matrix_rope(original[..., :16], ref_angles(torch.arange(5), 16), interleaved)
    torch.testing.assert_close(y[..., :16].double(), ref.to(dtype).double(), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- positions: offsets, packing, padding, batches


@LAYOUTS
def test_decoding_one_token_at_offset_equals_row_of_full_apply(seed, interleaved):
    seq = 40
    x = torch.randn(2, seq, 4, 32)
    cos, sin = tables(torch.arange(seq), 32)
    full = apply_rope(x, cos, sin, interleaved=interleaved)
    for p in (0, 1, 17, seq - 1):
        c, s = tables(torch.tensor([p]), 32)
        step = apply_rope(x[:, p : p + 1], c, s, interleaved=interleaved)
        torch.testing.assert_close(step, full[:, p : p + 1], rtol=0, atol=1e-7)
    # A decode step far into a KV cache: position 2**20 − 1, against the float64 matrix.
    p = 2**20 - 1
    c, s = tables(torch.tensor([p]), 32)
    step = apply_rope(x[:, :1], c, s, interleaved=interleaved)
    torch.testing.assert_close(
        step.double(), matrix_rope(x[:, :1], ref_angles(torch.tensor([p]), 32), interleaved), rtol=0, atol=1e-6
    )


@LAYOUTS
def test_packed_sequences_equal_separate_sequences(seed, interleaved):
    lengths = [3, 7, 1, 5]
    positions = torch.cat([torch.arange(n) for n in lengths])  # per-document positions
    x = torch.randn(1, sum(lengths), 2, 16, dtype=torch.float64)
    cos, sin = tables(positions, 16, dtype=torch.float64)
    packed = apply_rope(x, cos, sin, interleaved=interleaved)
    for doc_x, doc_y in zip(x.split(lengths, dim=1), packed.split(lengths, dim=1), strict=True):
        c, s = tables(torch.arange(doc_x.shape[1]), 16, dtype=torch.float64)
        torch.testing.assert_close(doc_y, apply_rope(doc_x, c, s, interleaved=interleaved), rtol=0, atol=1e-15)


@LAYOUTS
def test_left_padding_matches_unpadded_rows(seed, interleaved):
    lengths, seq = [6, 3], 6
    x = torch.randn(2, seq, 2, 16)
    # Left padded: real tokens start at position 0 after the padding (as HF builds position_ids from the mask).
    positions = torch.stack([(torch.arange(seq) - (seq - n)).clamp_min(0) for n in lengths])  # (2, seq)
    cos, sin = tables(positions, 16)
    y = apply_rope(x, cos, sin, interleaved=interleaved)
    for row, n in enumerate(lengths):
        c, s = tables(torch.arange(n), 16)
        alone = apply_rope(x[row : row + 1, seq - n :], c, s, interleaved=interleaved)
        torch.testing.assert_close(y[row : row + 1, seq - n :], alone, rtol=0, atol=1e-7)


@LAYOUTS
@pytest.mark.parametrize("seq_dim", [1, 2])
def test_different_positions_per_batch_row(seed, interleaved, seq_dim):
    positions = torch.tensor([[0, 1, 2, 3], [100, 101, 102, 103], [7, 3, 2**20, 0]])  # (batch, seq)
    x = torch.randn(3, 4, 2, 16)
    cos, sin = tables(positions, 16)
    xin = x if seq_dim == 1 else x.transpose(1, 2)
    y = apply_rope(xin, cos, sin, interleaved=interleaved, seq_dim=seq_dim)
    y = y if seq_dim == 1 else y.transpose(1, 2)
    torch.testing.assert_close(y.double(), matrix_rope(x, ref_angles(positions, 16), interleaved), rtol=0, atol=1e-6)
    # A batch-1 table broadcasts over the batch.
    c1, s1 = tables(positions[1:2], 16)
    y1 = apply_rope(xin, c1, s1, interleaved=interleaved, seq_dim=seq_dim)
    y1 = y1 if seq_dim == 1 else y1.transpose(1, 2)
    ref1 = matrix_rope(x, ref_angles(positions[1], 16), interleaved)
    torch.testing.assert_close(y1.double(), ref1, rtol=0, atol=1e-6)


@LAYOUTS
def test_gqa_q_and_k_with_different_head_counts(seed, interleaved):
    positions = torch.arange(5, 15)
    q = torch.randn(2, 10, 8, 32)
    k = torch.randn(2, 10, 2, 32)
    cos, sin = tables(positions, 32)
    angles = ref_angles(positions, 32)
    for x in (q, k):
        y = apply_rope(x, cos, sin, interleaved=interleaved)
        torch.testing.assert_close(y.double(), complex_rope(x, angles, interleaved), rtol=0, atol=1e-6)


@LAYOUTS
def test_seq_dim_2_layout(seed, interleaved):
    positions = torch.tensor([3, 1, 4, 1, 5, 9])
    x = torch.randn(2, 6, 3, 24)  # (batch, seq, heads, head_dim)
    cos, sin = tables(positions, 16)
    y2 = apply_rope(x.transpose(1, 2), cos, sin, interleaved=interleaved, seq_dim=2)  # (batch, heads, seq, hd)
    assert y2.shape == (2, 3, 6, 24)
    ref = matrix_rope(x, ref_angles(positions, 16), interleaved)
    torch.testing.assert_close(y2.transpose(1, 2).double(), ref, rtol=0, atol=1e-6)
    assert torch.equal(y2.transpose(1, 2), apply_rope(x, cos, sin, interleaved=interleaved))


# ---------------------------------------------------------------- precision


@LAYOUTS
def test_fp32_rotated_vectors_within_1e6_up_to_2_pow_20(seed, interleaved):
    positions = torch.cat((torch.randint(0, 2**20, (2000,)), torch.arange(2**20 - 47, 2**20 + 1)))
    x = torch.randn(1, len(positions), 2, 128)
    cos, sin = tables(positions, 128)
    y = apply_rope(x, cos, sin, interleaved=interleaved)
    err = (y.double() - complex_rope(x, ref_angles(positions, 128), interleaved)).abs().max()
    assert err <= 1e-6, float(err)


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of ``dtype`` at each float64 value (its smallest subnormal spacing near zero)."""
    info = torch.finfo(dtype)
    _, exponent = torch.frexp(values)  # values = m·2**e, 0.5 <= |m| < 1
    spacing = torch.ldexp(torch.ones_like(values), exponent - (1 + round(-math.log2(info.eps))))
    return spacing.clamp_min(info.smallest_normal * info.eps)


@LAYOUTS
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_within_one_rounding_of_float64(seed, interleaved, dtype):
    """Math in fp32 and one rounding at the end: every output within 1 ulp of the float64 result.

    Near zero (a pair rotated almost onto an axis; fp16 subnormals) the fp32 arithmetic itself, a few fp32
    roundings of the pair's magnitude, can exceed a low-precision ulp; that slack, 2**-21 · |pair|, is allowed
    on top. Computing in the low dtype instead is off by thousands of ulps.
    """
    positions = torch.cat((torch.randint(0, 2**20, (500,)), torch.arange(2**20 - 11, 2**20 + 1)))
    x = torch.randn(2, len(positions), 4, 64).to(dtype)
    cos, sin = tables(positions, 64)
    y = apply_rope(x, cos, sin, interleaved=interleaved)
    assert y.dtype == dtype
    exact = complex_rope(x, ref_angles(positions, 64), interleaved)  # float64 from the same dtype inputs
    first, second = pair_indices(64, interleaved)
    pair_norm = torch.empty_like(exact)
    pair_norm[..., first] = pair_norm[..., second] = torch.hypot(exact[..., first], exact[..., second])
    err = (y.double() - exact).abs()
    excess = err - ulp(exact, dtype) - 2**-21 * pair_norm
    assert excess.max() <= 0, float((err / ulp(exact, dtype)).max())
    assert (err <= ulp(exact, dtype)).double().mean() >= 0.9999
    # Nearly all are the correctly rounded value itself (double rounding through fp32 rarely differs).
    assert (y == exact.to(dtype)).double().mean() >= 0.999
    # fp32 tables do not lose anything either: the same through fp64 tables is equal.
    c64, s64 = tables(positions, 64, dtype=torch.float64)
    y64 = apply_rope(x.double(), c64, s64, interleaved=interleaved).to(dtype)
    assert (y == y64).double().mean() >= 0.999
