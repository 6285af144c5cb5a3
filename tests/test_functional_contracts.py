"""Tests of ropekit.functional's contracts: in-place and ``out=`` writes, bad input (errors naming the argument and
value), the tables' gradients (against float64 gradcheck and autograd through the eager formula), and
apply_rope_qk against two apply_rope calls. Oracles: tests/helpers/rope_oracles.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.rope_oracles import (
    BASE,
    LAYOUTS,
    D,
    tables,
)
from ropekit.functional import apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels.reference import rope_reference
from ropekit.scaling.registry import inv_freq

# ---------------------------------------------------------------- inplace and out=


@LAYOUTS
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("seq_dim", [1, 2])
def test_inplace_and_out_equal_out_of_place(seed, interleaved, dtype, seq_dim):
    positions = torch.tensor([[0, 5, 9, 2**20], [1, 2, 3, 4]])
    x = torch.randn(2, 4, 3, 20).to(dtype)
    if seq_dim == 2:
        x = x.transpose(1, 2).contiguous()
    cos, sin = tables(positions, 16)
    expected = apply_rope(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim)
    out = torch.empty_like(x)
    result = apply_rope(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, out=out)
    assert result is out and torch.equal(out, expected)
    y = x.clone()
    result = apply_rope(y, cos, sin, interleaved=interleaved, seq_dim=seq_dim, inplace=True)
    assert result is y and torch.equal(y, expected)


@LAYOUTS
def test_inplace_on_a_strided_view_touches_only_that_view(seed, interleaved):
    """q as a slice of a fused qkv projection (non-contiguous): only q's columns change."""
    qkv = torch.randn(2, 6, 3 * 4 * 16)  # (batch, seq, 3 · heads · head_dim)
    before = qkv.clone()
    q = qkv[..., : 4 * 16].unflatten(-1, (4, 16))  # (2, 6, 4, 16), a view
    cos, sin = tables(torch.arange(6), 16)
    expected = apply_rope(q.clone(), cos, sin, interleaved=interleaved)
    apply_rope(q, cos, sin, interleaved=interleaved, inplace=True)
    assert torch.equal(qkv[..., : 4 * 16].unflatten(-1, (4, 16)), expected)
    assert torch.equal(qkv[..., 4 * 16 :], before[..., 4 * 16 :])


@pytest.mark.parametrize(
    ("out", "match"),
    [
        (torch.empty(2, 4, 3, 8), r"out must be a tensor with x's shape \(2, 4, 3, 16\).*got \(\(2, 4, 3, 8\)"),
        (torch.empty(2, 4, 3, 16, dtype=torch.float64), r"dtype torch.float32, got .*torch.float64"),
        ([1, 2], r"out must be a tensor .*got \[1, 2\]"),
    ],
)
def test_out_with_wrong_shape_or_dtype_errors(seed, out, match):
    x = torch.randn(2, 4, 3, 16)
    cos, sin = tables(torch.arange(4), 16)
    with pytest.raises(ValueError, match=match):
        apply_rope(x, cos, sin, out=out)


def test_inplace_or_out_with_requires_grad_errors(seed):
    x = torch.randn(1, 4, 2, 16, requires_grad=True)
    cos, sin = tables(torch.arange(4), 16)
    with pytest.raises(ValueError, match="inplace=True and out= do not support autograd; x requires grad"):
        apply_rope(x, cos, sin, inplace=True)
    with pytest.raises(ValueError, match="do not support autograd"):
        apply_rope(x, cos, sin, out=torch.empty(1, 4, 2, 16))
    with pytest.raises(ValueError, match="either inplace=True or out="):
        apply_rope(x.detach(), cos, sin, inplace=True, out=torch.empty(1, 4, 2, 16))
    with torch.no_grad():  # allowed without autograd
        assert apply_rope(x, cos, sin, inplace=True) is x


# ---------------------------------------------------------------- bad input


X = torch.zeros(2, 4, 3, 16)
COS, SIN = cos_sin(torch.arange(4), inv_freq(16, BASE))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        # rotary_dim: odd, too large, not matching the tables, not an integer
        (lambda: apply_rope(X, COS, SIN, rotary_dim=15), ValueError, r"rotary_dim must be even.*got 15"),
        (
            lambda: apply_rope(X, COS, SIN, rotary_dim=12),
            ValueError,
            r"rotary_dim must equal 2 \* cos.shape\[-1\] = 16, got 12",
        ),
        (
            lambda: apply_rope(X[..., :8], COS, SIN),
            ValueError,
            r"rotary_dim must be <= head_dim \(8\), got 16",
        ),
        (lambda: apply_rope(X, COS, SIN, rotary_dim=16.0), TypeError, r"rotary_dim must be an integer, got 16.0"),
        # cos/sin that do not match x
        (lambda: apply_rope(X[:, :3], COS, SIN), ValueError, r"cos/sin cover 4 positions but x has 3 along seq_dim=1"),
        (
            lambda: apply_rope(X, COS, SIN, seq_dim=2),
            ValueError,
            r"cos/sin cover 4 positions but x has 3 along seq_dim=2",
        ),
        (
            lambda: apply_rope(X, COS.expand(3, 4, 8), SIN.expand(3, 4, 8)),
            ValueError,
            r"cos/sin batch 3 does not match x batch 2",
        ),
        (
            lambda: apply_rope(X, COS, SIN[:, :4]),
            ValueError,
            r"cos and sin must have the same shape, got \(4, 8\) and \(4, 4\)",
        ),
        (
            lambda: apply_rope(X, COS[None, None], SIN[None, None]),
            ValueError,
            r"cos must be \(seq, rotary_dim/2\).*got \(1, 1, 4, 8\)",
        ),
        (lambda: apply_rope(X, COS.long(), SIN), TypeError, r"cos must be a floating-point tensor"),
        # x
        (lambda: apply_rope(X.long(), COS, SIN), TypeError, r"x must be a floating-point tensor .*got torch.int64"),
        (
            lambda: apply_rope(X.to(torch.complex64), COS, SIN),
            TypeError,
            r"x must be a floating-point tensor .*got torch.complex64",
        ),
        (lambda: apply_rope(X[0], COS, SIN), ValueError, r"x must be 4-D .*got \(4, 3, 16\)"),
        (lambda: apply_rope(X, COS, SIN, seq_dim=0), ValueError, r"seq_dim must be 1 .* or 2 .*got 0"),
    ],
)
def test_bad_input_raises_error_naming_argument_and_value(call, error, match):
    with pytest.raises(error, match=match):
        call()


@given(
    rotary_dim=st.one_of(st.integers(-4, 40), st.floats(allow_nan=True), st.none(), st.text(max_size=2)),
    seq_dim=st.one_of(st.integers(-3, 5), st.none()),
    rows=st.integers(0, 6),
)
@settings(max_examples=150, deadline=None, derandomize=True)
def test_any_argument_gives_a_result_or_a_value_or_type_error(rotary_dim, seq_dim, rows):
    """Never an AssertionError, IndexError or NaN: either a correct rotation or a ValueError/TypeError."""
    try:
        y = apply_rope(X[:, :rows] + 1.0, COS, SIN, rotary_dim=rotary_dim, seq_dim=seq_dim)
    except (ValueError, TypeError):
        return
    assert not torch.isnan(y).any()
    assert torch.equal(y, apply_rope(X + 1.0, COS, SIN, seq_dim=1))


# ---------------------------------------------------------------- gradients of cos and sin


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("seq_dim", [1, 2])
@pytest.mark.parametrize("batched", [False, True])
def test_table_gradients_match_gradcheck(interleaved, seq_dim, batched):
    g = torch.Generator().manual_seed(1)
    shape = (2, 3, 4, 10) if seq_dim == 1 else (2, 4, 3, 10)
    x = torch.randn(shape, dtype=torch.float64, generator=g, requires_grad=True)
    table_shape = (2, 3, 3) if batched else (3, 3)  # rotary_dim 6 of head_dim 10
    cos = torch.randn(table_shape, dtype=torch.float64, generator=g, requires_grad=True)
    sin = torch.randn(table_shape, dtype=torch.float64, generator=g, requires_grad=True)

    def f(x, c, s):
        return apply_rope(x, c, s, interleaved=interleaved, seq_dim=seq_dim)

    assert torch.autograd.gradcheck(f, (x, cos, sin))
    assert torch.autograd.gradgradcheck(f, (x, cos, sin))


def test_table_gradients_equal_the_eager_graph():
    """The oracle: autograd through the eager formula (ordinary torch ops)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 3, 8, generator=g)
    cos = torch.randn(5, 4, generator=g, requires_grad=True)
    sin = torch.randn(5, 4, generator=g, requires_grad=True)
    grad = torch.randn(2, 5, 3, 8, generator=g)
    apply_rope(x, cos, sin).backward(grad)
    ours = cos.grad.clone(), sin.grad.clone()
    cos.grad = sin.grad = None
    rope_reference(x, cos, sin).backward(grad)
    torch.testing.assert_close(ours[0], cos.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[1], sin.grad, rtol=1e-5, atol=1e-5)


def test_inplace_with_tables_requiring_grad_is_refused():
    cos, sin = tables(torch.arange(4), D)
    cos.requires_grad_(True)
    with pytest.raises(ValueError, match="do not support autograd; cos/sin require grad"):
        apply_rope(torch.randn(1, 4, 2, D), cos, sin, inplace=True)


# ---------------------------------------------------------------- flags and overlapping memory


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"inplace": "no"}, TypeError, r"inplace must be True or False, got 'no' \(str\)"),
        ({"inplace": 1}, TypeError, r"inplace must be True or False, got 1 \(int\)"),
        ({"interleaved": "yes"}, TypeError, r"interleaved must be True or False, got 'yes'"),
        ({"interleaved": None}, TypeError, r"interleaved must be True or False, got None"),
        ({"seq_dim": True}, ValueError, r"seq_dim must be 1 .* or 2 .*got True"),
        ({"seq_dim": 1.0}, ValueError, r"seq_dim must be 1 .* or 2 .*got 1.0"),
        ({"out": torch.empty(1, 4, 2, D, device="meta")}, ValueError, r"out must be on x's device cpu, got meta"),
    ],
)
def test_bad_flags_are_refused_and_x_is_untouched(kwargs, error, match):
    cos, sin = tables(torch.arange(4), D)
    x = torch.randn(1, 4, 2, D)
    saved = x.clone()
    with pytest.raises(error, match=match):
        apply_rope(x, cos, sin, **kwargs)
    assert torch.equal(x, saved)


def test_in_place_on_an_expanded_tensor_is_refused():
    cos, sin = tables(torch.arange(4), D)
    x = torch.randn(1, 1, 1, D).expand(1, 4, 2, D)
    with pytest.raises(ValueError, match=r"inplace=True has elements that share memory"):
        apply_rope(x, cos, sin, inplace=True)
    # out of place it is fine and equals the reference on a contiguous copy
    assert torch.equal(apply_rope(x, cos, sin), rope_reference(x.contiguous(), cos, sin))


# ---------------------------------------------------------------- apply_rope_qk


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("seq_dim", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_apply_rope_qk_equals_two_calls(interleaved, seq_dim, dtype):
    g = torch.Generator().manual_seed(3)
    cos, sin = tables(torch.arange(5), 12)
    q_shape, k_shape = ((2, 5, 6, 16), (2, 5, 2, 16)) if seq_dim == 1 else ((2, 6, 5, 16), (2, 2, 5, 16))
    q = torch.randn(q_shape, generator=g).to(dtype)
    k = torch.randn(k_shape, generator=g).to(dtype)
    kw = {"interleaved": interleaved, "seq_dim": seq_dim}
    q_rot, k_rot = apply_rope_qk(q, k, cos, sin, **kw)
    assert torch.equal(q_rot, rope_reference(q, cos, sin, **kw))
    assert torch.equal(k_rot, rope_reference(k, cos, sin, **kw))
    q2, k2 = q.clone(), k.clone()
    out = apply_rope_qk(q2, k2, cos, sin, inplace=True, **kw)
    assert out[0] is q2 and out[1] is k2 and torch.equal(q2, q_rot) and torch.equal(k2, k_rot)


def test_apply_rope_qk_autograd_matches_apply_rope():
    g = torch.Generator().manual_seed(4)
    cos, sin = tables(torch.arange(3), 8, dtype=torch.float64)
    q = torch.randn(1, 3, 4, 8, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(1, 3, 2, 8, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: apply_rope_qk(q, k, cos, sin), (q, k))


def test_apply_rope_qk_names_the_tensor_in_errors():
    cos, sin = tables(torch.arange(4), D)
    q = torch.randn(1, 4, 2, D)
    with pytest.raises(ValueError, match=r"cos/sin cover 4 positions but x has 3 .*\(x is k here\)"):
        apply_rope_qk(q, torch.randn(1, 3, 2, D), cos, sin)
    with pytest.raises(ValueError, match=r"q and k must have the same batch size, got 1 and 2"):
        apply_rope_qk(q, torch.randn(2, 4, 2, D), cos, sin)
