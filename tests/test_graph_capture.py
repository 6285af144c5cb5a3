"""Graph capture and aliasing.

* ``torch.jit.trace`` of ``apply_rope``, ``apply_rope_qk`` and ``RotaryEmbedding`` records the rotation
  (the C++ kernel writes behind the tracer, so a trace used to keep only its ``empty_like``).
* ``apply_rope_qk(..., inplace=True)`` with q and k sharing memory rotates each element once, or refuses.
* ``torch.jit.script`` is unsupported (keyword-only arguments) and says so; tracing is the way.

Oracle: the rotation in float64 (float64 input through the eager definition, float64 tables) on inputs the
graph was not traced with.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from ropekit import RopeConfig, RotaryEmbedding, apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels.reference import rope_reference
from ropekit.scaling import inv_freq

D = 16
FREQS = inv_freq(D, 10000.0)


def _tables(start: int, n: int, dtype=torch.float32):
    return cos_sin(torch.arange(start, start + n), FREQS, dtype=dtype)


def _exact(x: torch.Tensor, start: int, seq_dim: int = 1) -> torch.Tensor:
    """float64 rotation of ``x`` at positions start, start + 1, … (the oracle)."""
    c, s = _tables(start, x.shape[seq_dim], torch.float64)
    return rope_reference(x.double(), c, s, seq_dim=seq_dim)


def _trace(fn, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings about Python-level shape checks
        return torch.jit.trace(fn, inputs, check_trace=False)


# ---------------------------------------------------------------- jit.trace records the rotation


def test_trace_apply_rope_is_exact_on_new_inputs():
    gen = torch.Generator().manual_seed(0)
    traced = _trace(lambda x, c, s: apply_rope(x, c, s), (torch.randn(2, 6, 3, D, generator=gen), *_tables(0, 6)))
    x = torch.randn(2, 6, 3, D, generator=gen)
    got = traced(x, *_tables(1000, 6))
    torch.testing.assert_close(got.double(), _exact(x, 1000), rtol=0, atol=2e-6)
    assert torch.equal(got, apply_rope(x, *_tables(1000, 6)))  # and bit-identical to eager


def test_trace_apply_rope_qk_is_exact_on_new_inputs():
    gen = torch.Generator().manual_seed(1)

    def fn(q, k, c, s):
        return apply_rope_qk(q, k, c, s)

    sample = (torch.randn(1, 5, 4, D, generator=gen), torch.randn(1, 5, 2, D, generator=gen), *_tables(0, 5))
    traced = _trace(fn, sample)
    q, k = torch.randn(1, 5, 4, D, generator=gen), torch.randn(1, 5, 2, D, generator=gen)
    got_q, got_k = traced(q, k, *_tables(77, 5))
    torch.testing.assert_close(got_q.double(), _exact(q, 77), rtol=0, atol=2e-6)
    torch.testing.assert_close(got_k.double(), _exact(k, 77), rtol=0, atol=2e-6)


def test_trace_rotary_embedding_is_exact_on_new_inputs():
    gen = torch.Generator().manual_seed(2)
    rotary = RotaryEmbedding(RopeConfig(D))
    sample = (torch.randn(2, 7, 2, D, generator=gen), torch.randn(2, 7, 1, D, generator=gen))
    traced = _trace(rotary, sample)
    q, k = torch.randn(2, 7, 2, D, generator=gen), torch.randn(2, 7, 1, D, generator=gen)
    got_q, got_k = traced(q, k)
    assert torch.isfinite(got_q).all() and torch.isfinite(got_k).all()
    torch.testing.assert_close(got_q.double(), _exact(q, 0), rtol=0, atol=2e-6)
    torch.testing.assert_close(got_k.double(), _exact(k, 0), rtol=0, atol=2e-6)
    eager_q, eager_k = rotary(q, k)
    assert torch.equal(got_q, eager_q) and torch.equal(got_k, eager_k)


def test_trace_rotary_embedding_with_positions_follows_the_positions():
    """Positions are a graph input: the traced module rotates new positions, not the traced ones."""
    gen = torch.Generator().manual_seed(3)
    rotary = RotaryEmbedding(RopeConfig(D))
    q, k = torch.randn(1, 4, 2, D, generator=gen), torch.randn(1, 4, 2, D, generator=gen)
    traced = _trace(rotary, (q, k, torch.arange(4)))
    far = torch.arange(2**40, 2**40 + 4)
    got_q, _ = traced(q, k, far)
    c, s = cos_sin(far, FREQS, dtype=torch.float64)
    torch.testing.assert_close(got_q.double(), rope_reference(q.double(), c, s), rtol=0, atol=2e-6)


# ---------------------------------------------------------------- q and k sharing memory, in place


def test_inplace_qk_with_one_tensor_twice_rotates_once():
    x = torch.randn(2, 5, 3, D, generator=torch.Generator().manual_seed(4))
    want = _exact(x, 0)
    q_out, k_out = apply_rope_qk(x, x, *_tables(0, 5), inplace=True)
    assert q_out is x and k_out is x
    torch.testing.assert_close(x.double(), want, rtol=0, atol=2e-6)


def test_inplace_qk_with_two_identical_views_rotates_once():
    buf = torch.randn(1, 4, 2, D, generator=torch.Generator().manual_seed(5))
    want = _exact(buf, 0)
    apply_rope_qk(buf[:], buf.view(1, 4, 2, D), *_tables(0, 4), inplace=True)
    torch.testing.assert_close(buf.double(), want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("seq_dim", [1, 2])
def test_inplace_qk_partial_overlap_is_refused_untouched(seq_dim):
    """The case: q = heads 0-7 and k = heads 6-9 of one buffer."""
    shape = (1, 3, 10, D) if seq_dim == 1 else (1, 10, 3, D)
    buf = torch.randn(*shape)
    before = buf.clone()
    heads = (slice(None), slice(None), slice(0, 8)) if seq_dim == 1 else (slice(None), slice(0, 8))
    other = (slice(None), slice(None), slice(6, 10)) if seq_dim == 1 else (slice(None), slice(6, 10))
    with pytest.raises(ValueError, match="q and k share memory"):
        apply_rope_qk(buf[heads], buf[other], *_tables(0, 3), inplace=True, seq_dim=seq_dim)
    assert torch.equal(buf, before)


def test_inplace_qk_on_disjoint_views_of_a_fused_buffer_is_exact():
    """q and k of a fused qkv projection interleave in memory without sharing an element: allowed, exact."""
    qkv = torch.randn(2, 5, 3, 2, D, generator=torch.Generator().manual_seed(6))  # (b, s, {q,k,v}, heads, d)
    q, k, v = qkv.unbind(2)
    want_q, want_k, v_before = _exact(q, 0), _exact(k, 0), v.clone()
    apply_rope_qk(q, k, *_tables(0, 5), inplace=True)
    torch.testing.assert_close(q.double(), want_q, rtol=0, atol=2e-6)
    torch.testing.assert_close(k.double(), want_k, rtol=0, atol=2e-6)
    assert torch.equal(v, v_before)


def test_out_of_place_qk_with_one_tensor_twice_leaves_it_alone():
    x = torch.randn(1, 4, 2, D)
    before = x.clone()
    q_out, k_out = apply_rope_qk(x, x, *_tables(0, 4))
    assert torch.equal(x, before) and torch.equal(q_out, k_out)


# ---------------------------------------------------------------- torch.jit.script


def test_jit_script_is_refused_clearly_and_trace_works():
    class Attention(torch.nn.Module):
        def forward(self, q, k, c, s):
            return apply_rope_qk(q, k, c, s, seq_dim=1)

    with pytest.raises(torch.jit.frontend.NotSupportedError, match="keyword-only arguments"):
        torch.jit.script(Attention())
    assert "torch.jit.script" in apply_rope_qk.__doc__  # documented as unsupported, with the alternative
    q, k = torch.randn(1, 3, 2, D), torch.randn(1, 3, 2, D)
    traced = _trace(Attention(), (q, k, *_tables(0, 3)))
    torch.testing.assert_close(traced(q, k, *_tables(9, 3))[1].double(), _exact(k, 9), rtol=0, atol=2e-6)


def test_export_rotary_embedding_is_exact_on_new_inputs():
    """torch.export (which also cannot see the C++ kernel) records the in-graph tables and rotation."""
    gen = torch.Generator().manual_seed(7)
    rotary = RotaryEmbedding(RopeConfig(D))
    q, k = torch.randn(1, 5, 2, D, generator=gen), torch.randn(1, 5, 1, D, generator=gen)
    exported = torch.export.export(rotary, (q, k, torch.arange(5)), strict=False).module()
    far = torch.arange(2**33, 2**33 + 5)
    got_q, got_k = exported(q, k, far)
    c, s = cos_sin(far, FREQS, dtype=torch.float64)
    torch.testing.assert_close(got_q.double(), rope_reference(q.double(), c, s), rtol=0, atol=2e-6)
    torch.testing.assert_close(got_k.double(), rope_reference(k.double(), c, s), rtol=0, atol=2e-6)


def test_length_dependent_scaling_refuses_capture_unless_fixed():
    """Dynamic NTK recomputes its frequencies from the largest position, which a graph cannot read: tracing it
    would bake one length's frequencies in silently. Refused, unless fixed_seq_len pins them."""
    from ropekit.scaling import get_scaling

    dynamic = get_scaling("dynamic")
    q = torch.randn(1, 4, 2, D)
    rotary = RotaryEmbedding(RopeConfig(D, scaling=dynamic.make(factor=2.0, original_max_position_embeddings=8)))
    with pytest.raises(NotImplementedError, match="fixed_seq_len"):
        _trace(rotary, (q, q.clone()))
    fixed = RotaryEmbedding(
        RopeConfig(D, scaling=dynamic.make(factor=2.0, original_max_position_embeddings=8, fixed_seq_len=32))
    )
    traced = _trace(fixed, (q, q.clone(), torch.arange(4)))
    positions = torch.arange(20, 24)
    torch.testing.assert_close(traced(q, q.clone(), positions)[0], fixed(q, q.clone(), positions)[0], rtol=0, atol=1e-6)


def test_trace_in_place_rotation_is_recorded():
    def fn(x, c, s):
        apply_rope(x, c, s, inplace=True)
        return x * 1.0

    traced = _trace(fn, (torch.randn(1, 4, 2, D), *_tables(0, 4)))
    x = torch.randn(1, 4, 2, D)
    want = _exact(x, 50)
    got = traced(x, *_tables(50, 4))
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-6)
    torch.testing.assert_close(x.double(), want, rtol=0, atol=2e-6)  # and x itself was written
