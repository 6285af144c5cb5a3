"""Regression tests for core-API defects found by hostile testing.

Oracles: torch's own autograd and in-place rules (the eager path raises what torch raises), mpmath at 50 digits for
tables at huge positions, float64 gradcheck for table gradients, explicit float64 formulas.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from ropekit import RopeConfig, RotaryEmbedding, apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels import _cpu, backend_for
from ropekit.kernels.reference import rope_reference
from ropekit.scaling import Frequencies, inv_freq

D = 16


def _tables(n: int, d: int = D, dtype=torch.float32):
    return cos_sin(torch.arange(n), inv_freq(d, 10000.0), dtype=dtype)


@pytest.fixture(scope="module")
def cpu_kernel():
    if backend_for(torch.zeros(1)) != "cpu":
        pytest.skip("the C++ CPU kernel is unavailable here")
    return _cpu.load(wait=True)


# ---------------------------------------------------------------- 1. in-place writes are tracked by autograd


@pytest.mark.parametrize("mode", ["inplace", "out"])
def test_kernel_write_after_save_raises_like_torch(cpu_kernel, mode):
    """The reproduction: a tensor saved for backward, then rotated in place under no_grad."""
    cos, sin = _tables(4)
    leaf = torch.randn(1, 4, 2, D, requires_grad=True)
    y = leaf * 3
    z = (y * y).sum()  # saves y for the backward
    with torch.no_grad():
        if mode == "inplace":
            apply_rope(y, cos, sin, inplace=True)
        else:
            apply_rope(torch.randn(1, 4, 2, D), cos, sin, out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_eager_path_raises_the_same(monkeypatch):
    """The oracle: torch's own in-place ops (the eager path) raise in the same situation."""
    cos, sin = _tables(4)
    leaf = torch.randn(1, 4, 2, D, requires_grad=True)
    y = leaf * 3
    z = (y * y).sum()
    with torch.no_grad():
        rope_reference(y, cos, sin, out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_version_counter_bumped_by_every_write(cpu_kernel):
    cos, sin = _tables(4)
    x = torch.randn(1, 4, 2, D)
    before = x._version
    apply_rope(x, cos, sin, inplace=True)
    assert x._version > before
    out = torch.empty_like(x)
    before = out._version
    apply_rope(x, cos, sin, out=out)
    assert out._version > before


def test_inference_tensor_is_not_written_outside_inference_mode(cpu_kernel):
    cos, sin = _tables(4)
    with torch.inference_mode():
        x = torch.randn(1, 4, 2, D)
    saved = x.clone()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        apply_rope(x, cos, sin, inplace=True)
    assert torch.equal(x, saved)
    with torch.inference_mode():  # inside inference mode it is allowed, as for torch's ops
        y = apply_rope(x, cos, sin, inplace=True)
    assert torch.equal(y, rope_reference(saved, cos, sin))


def test_correct_gradient_when_no_conflict(cpu_kernel):
    """Nothing saved the tensor: in-place rotation under no_grad leaves the true gradient (18 = 2·3·3)."""
    cos, sin = _tables(4)
    leaf = torch.ones(1, 4, 2, D, requires_grad=True)
    z = (leaf * 3 * 3).sum()
    y = (leaf * 3).detach()
    with torch.no_grad():
        apply_rope(y, cos, sin, inplace=True)
    z.backward()
    assert torch.all(leaf.grad == 9)


# ---------------------------------------------------------------- 3. large positions in RotaryEmbedding


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


# ---------------------------------------------------------------- 4. precision at huge positions


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


# ---------------------------------------------------------------- 10. gradients of cos and sin


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
    cos, sin = _tables(4)
    cos.requires_grad_(True)
    with pytest.raises(ValueError, match="do not support autograd; cos/sin require grad"):
        apply_rope(torch.randn(1, 4, 2, D), cos, sin, inplace=True)


# ---------------------------------------------------------------- 11. bad frequencies and attention factors


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


# ---------------------------------------------------------------- 14. head_dim mismatch in RotaryEmbedding


def test_rotary_embedding_refuses_other_head_dims():
    rope = RotaryEmbedding(RopeConfig(8))
    q = torch.randn(1, 3, 2, 16)
    with pytest.raises(ValueError, match=r"q must be 4-D with head_dim 8 .*got shape \(1, 3, 2, 16\)"):
        rope(q, q)
    with pytest.raises(ValueError, match=r"k must be 4-D with head_dim 8"):
        rope(torch.randn(1, 3, 2, 8), q)


# ---------------------------------------------------------------- 15. flags and devices are type-checked


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
    cos, sin = _tables(4)
    x = torch.randn(1, 4, 2, D)
    saved = x.clone()
    with pytest.raises(error, match=match):
        apply_rope(x, cos, sin, **kwargs)
    assert torch.equal(x, saved)


# ---------------------------------------------------------------- 22 and 29. odd positions, dtypes, overlaps


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


def test_in_place_on_an_expanded_tensor_is_refused():
    cos, sin = _tables(4)
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
    cos, sin = _tables(5, 12)
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
    cos, sin = _tables(3, 8, dtype=torch.float64)
    q = torch.randn(1, 3, 4, 8, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(1, 3, 2, 8, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: apply_rope_qk(q, k, cos, sin), (q, k))


def test_apply_rope_qk_names_the_tensor_in_errors():
    cos, sin = _tables(4)
    q = torch.randn(1, 4, 2, D)
    with pytest.raises(ValueError, match=r"cos/sin cover 4 positions but x has 3 .*\(x is k here\)"):
        apply_rope_qk(q, torch.randn(1, 3, 2, D), cos, sin)
    with pytest.raises(ValueError, match=r"q and k must have the same batch size, got 1 and 2"):
        apply_rope_qk(q, torch.randn(2, 4, 2, D), cos, sin)


def test_apply_rope_qk_takes_the_one_call_entry(cpu_kernel, monkeypatch):
    """One call into C++ for q and k together (decode's hot path), and the same bits as the reference."""
    entry = _cpu.load_qk()
    calls = []

    def counting(*args):
        result = entry(*args)
        calls.append(result[0])
        return result

    monkeypatch.setattr(_cpu, "_loaded_qk", counting)
    cos, sin = cos_sin(torch.arange(7, 15).unsqueeze(1), inv_freq(D, 10000.0))  # per-row positions, decode
    q, k = torch.randn(8, 1, 4, D).bfloat16(), torch.randn(8, 1, 2, D).bfloat16()
    q_ref, k_ref = rope_reference(q, cos, sin), rope_reference(k, cos, sin)
    q_rot, k_rot = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert calls == [True]
    assert torch.equal(q_rot, q_ref) and torch.equal(k_rot, k_ref)
    with pytest.raises(ValueError, match=r"cos/sin cover 1 positions but x has 3 .*\(x is q here\)"):
        apply_rope_qk(torch.randn(8, 3, 4, D), k, cos, sin)  # declined by the entry, message from Python
    assert calls == [True, False]


def test_frequencies_and_get_scaling_refuse_wrong_types():
    import ropekit

    with pytest.raises(TypeError, match="rope must be a RopeConfig, got NoneType"):
        ropekit.frequencies(None)
    with pytest.raises(TypeError, match=r"name must be a rope_type string such as 'yarn', got \['yarn'\] \(list\)"):
        ropekit.get_scaling(["yarn"])


@pytest.mark.parametrize("name", ["linear", "ntk", "yarn", "dynamic"])
def test_huge_factors_are_refused_in_the_library(name):
    from ropekit.scaling import make_scaling

    params = {"factor": 1e308}
    if name in ("yarn", "dynamic"):
        params["original_max_position_embeddings"] = 4096
    with pytest.raises(ValueError, match=r"factor must be <= 1e\+06"):
        make_scaling(name, **params)
