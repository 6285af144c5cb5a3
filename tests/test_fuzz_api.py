"""Property-based fuzzing of the public Python API (hypothesis).

Invariant for every call: it raises only ``ValueError`` or ``TypeError`` (or torch's own autograd/in-place
``RuntimeError`` where torch itself would raise), with a message naming an argument of the call; or it returns a
result equal to a float64 reference computed here independently (explicit per-pair rotation, or mpmath angles).
The default suite runs a few hundred cases; ``-m slow`` runs many more.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ropekit
from ropekit import RopeConfig, RotaryEmbedding, apply_rope, apply_rope_qk, cos_sin
from ropekit.scaling import inv_freq, make_scaling

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
SLOW = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

JUNK = st.sampled_from([None, "yes", "1", 1.0, 1.5, -1, 0, 2, 3, True, False, [1], math.nan, object()])
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.integers(-(10**20), 10**20)


def _names_an_argument(message: str, names: tuple[str, ...]) -> bool:
    return any(name in message for name in names)


# ---------------------------------------------------------------- float64 oracle of the rotation


def _oracle(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, seq_dim: int) -> torch.Tensor:
    """Pair by pair in float64 with explicit indices (no shared code with ropekit)."""
    xd = x.double()
    if seq_dim == 2:
        xd = xd.transpose(1, 2)  # (b, seq, heads, d)
    half = cos.shape[-1]
    c, s = cos.double(), sin.double()
    if c.dim() == 2:
        c, s = c.unsqueeze(0), s.unsqueeze(0)
    c, s = c.unsqueeze(2), s.unsqueeze(2)  # (b|1, seq, 1, half)
    y = xd.clone()
    for i in range(half):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        x1, x2 = xd[..., a], xd[..., b]
        y[..., a] = x1 * c[..., i] - x2 * s[..., i]
        y[..., b] = x2 * c[..., i] + x1 * s[..., i]
    return y.transpose(1, 2) if seq_dim == 2 else y


TOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


@st.composite
def rope_calls(draw):
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]))
    batch, seq, heads = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    head_dim = 2 * draw(st.integers(1, 6))
    half = draw(st.integers(1, head_dim // 2))
    seq_dim = draw(st.sampled_from([1, 2, 1, 2, 0, 3]) | JUNK)
    shape = [batch, seq, heads, head_dim] if seq_dim != 2 else [batch, heads, seq, head_dim]
    if draw(st.booleans()) and draw(st.booleans()):  # sometimes a wrong shape
        shape[draw(st.integers(0, 3))] += draw(st.integers(1, 2))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(draw(st.integers(0, 99)))).to(dtype)
    table_seq = seq if draw(st.integers(0, 5)) else seq + 1
    table_batch = draw(st.sampled_from([None, None, 1, batch, batch + 1]))
    positions = torch.arange(table_seq) * draw(st.sampled_from([1, 1000, 2**30]))
    if table_batch is not None:
        positions = positions.expand(table_batch, table_seq)
    cos, sin = cos_sin(positions, inv_freq(2 * half, 10000.0), dtype=draw(st.sampled_from([torch.float32, dtype])))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["interleaved"] = draw(st.booleans() | JUNK)
    if draw(st.booleans()):
        kwargs["inplace"] = draw(st.booleans() | JUNK)
    if seq_dim != 1 or draw(st.booleans()):
        kwargs["seq_dim"] = seq_dim
    if draw(st.integers(0, 4)) == 0:
        kwargs["rotary_dim"] = draw(st.sampled_from([2 * half, 2 * half + 2, 0, -2, 3]) | JUNK)
    return x, cos, sin, kwargs


def _check_apply_rope(x, cos, sin, kwargs):
    names = ("x", "cos", "sin", "interleaved", "inplace", "seq_dim", "rotary_dim", "out")
    saved = x.clone()
    try:
        y = apply_rope(x, cos, sin, **kwargs)
    except (ValueError, TypeError) as exc:
        assert _names_an_argument(str(exc), names), str(exc)
        assert torch.equal(x, saved), "x was modified by a call that failed"
        return
    expected = _oracle(saved, cos, sin, kwargs.get("interleaved", False), kwargs.get("seq_dim", 1))
    torch.testing.assert_close(y.double(), expected, rtol=TOL[x.dtype], atol=TOL[x.dtype] * 8)
    if kwargs.get("inplace", False):
        assert y is x


@FAST
@given(rope_calls())
def test_fuzz_apply_rope(call):
    _check_apply_rope(*call)


@pytest.mark.slow
@SLOW
@given(rope_calls())
def test_fuzz_apply_rope_many(call):
    _check_apply_rope(*call)


@FAST
@given(rope_calls(), st.integers(1, 3))
def test_fuzz_apply_rope_qk_equals_apply_rope(call, k_heads):
    x, cos, sin, kwargs = call
    kwargs.pop("rotary_dim", None)
    if x.dim() != 4:
        return
    seq_dim = kwargs.get("seq_dim", 1)
    k = x[:, :, :k_heads] if seq_dim != 2 else x[:, :k_heads]
    k = k.clone()
    q, k_in = x.clone(), k.clone()
    try:
        q_rot, k_rot = apply_rope_qk(q, k_in, cos, sin, **kwargs)
    except (ValueError, TypeError) as exc:
        assert _names_an_argument(str(exc), ("x", "q", "k", "cos", "sin", "interleaved", "inplace", "seq_dim")), exc
        assert torch.equal(q, x) and torch.equal(k_in, k)
        return
    assert torch.equal(q_rot, apply_rope(x.clone(), cos, sin, **kwargs))
    assert torch.equal(k_rot, apply_rope(k.clone(), cos, sin, **kwargs))


# ---------------------------------------------------------------- cos_sin at any position


POSITIONS = st.integers(0, 2**63 - 1) | st.integers(0, 2**24) | st.integers(-5, -1)


@FAST
@given(
    st.lists(POSITIONS, min_size=1, max_size=3),
    st.lists(FLOATS, min_size=1, max_size=3) | st.sampled_from([None, "x", 3]),
    FLOATS,
)
def test_fuzz_cos_sin(positions, freqs, attention_factor):
    names = ("positions", "inv_freq", "attention_factor", "dtype")
    try:
        freq_array = np.array(freqs, dtype=np.float64) if isinstance(freqs, list) else freqs
        cos, sin = cos_sin(torch.tensor(positions), freq_array, attention_factor=attention_factor, dtype=torch.float64)
    except (ValueError, TypeError, OverflowError) as exc:
        assert not isinstance(exc, OverflowError) or isinstance(freqs, list), exc  # numpy's own, building input
        if not isinstance(exc, OverflowError):
            assert _names_an_argument(str(exc), names), str(exc)
        return
    assert min(positions) >= 0 and float(attention_factor) > 0
    with mpmath.workdps(60):
        for row, p in enumerate(positions):
            for col, f in enumerate(freq_array):
                if f > 1e6:  # phases of huge frequencies: still exact, but not the float64 regime this checks
                    continue
                angle = mpmath.mpf(p) * mpmath.mpf(float(f))
                tol = 2e-9 * max(1.0, float(f)) * float(attention_factor)
                assert abs(float(cos[row, col]) - float(attention_factor * mpmath.cos(angle))) <= tol
                assert abs(float(sin[row, col]) - float(attention_factor * mpmath.sin(angle))) <= tol


# ---------------------------------------------------------------- RotaryEmbedding and configs


@FAST
@given(
    st.integers(1, 8).map(lambda h: 2 * h),
    st.lists(st.integers(0, 2**62), min_size=1, max_size=4),
    st.integers(1, 64),
)
def test_fuzz_rotary_embedding_tables_equal_cos_sin(head_dim, positions, cache_limit):
    rope = RotaryEmbedding(RopeConfig(head_dim), cache_limit=cache_limit)
    cos, sin = rope.cos_sin(torch.tensor(positions))
    ref_cos, ref_sin = cos_sin(torch.tensor(positions), inv_freq(head_dim, 10000.0))
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)


@FAST
@given(
    st.sampled_from([*ropekit.list_scalings(), "none", "nope", ""]),
    st.dictionaries(
        st.sampled_from(
            [
                "factor",
                "original_max_position_embeddings",
                "beta_fast",
                "beta_slow",
                "low_freq_factor",
                "high_freq_factor",
                "attention_factor",
                "base",
                "bogus",
            ]
        ),
        FLOATS | JUNK,
        max_size=3,
    ),
    st.integers(-2, 130) | JUNK,
    FLOATS | JUNK,
)
def test_fuzz_configs_raise_only_clear_errors(name, params, head_dim, base):
    try:
        scaling = make_scaling(name, **params)
        rope = RopeConfig(head_dim, base=base, scaling=scaling)
        freqs = ropekit.frequencies(rope)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert message and len(message) < 600
        fields = ("factor", "original_max_position_embeddings", "short_factor", "long_factor", "beta_fast", "beta_slow")
        assert _names_an_argument(message, (*params, *fields, "head_dim", "base", "rope_type", "scaling", name)), (
            message
        )
        return
    assert np.all(np.isfinite(freqs.inv_freq)) and np.all(freqs.inv_freq >= 0)
    assert math.isfinite(freqs.attention_factor) and freqs.attention_factor > 0


# ---------------------------------------------------------------- autograd and in-place safety


@FAST
@given(st.sampled_from([torch.float32, torch.float64]), st.booleans(), st.sampled_from([1, 2]))
def test_fuzz_in_place_after_save_always_raises(dtype, interleaved, seq_dim):
    cos, sin = cos_sin(torch.arange(3), inv_freq(8, 10000.0))
    leaf = torch.randn(1, 3, 3, 8, dtype=dtype, requires_grad=True)
    y = leaf.exp()  # exp saves its output for the backward
    z = y.sum()
    with torch.no_grad():
        apply_rope(y, cos, sin, inplace=True, interleaved=interleaved, seq_dim=seq_dim)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
