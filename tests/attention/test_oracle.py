"""Each method against its naive oracle (tests/attention/oracle.py), at lengths well beyond its window."""

from __future__ import annotations

import pytest
import torch

from ropekit.attention import attend, get_attention, list_attentions
from ropekit.functional import apply_rope, cos_sin

BASE = 10000.0
HEAD_DIM = 16
LENGTH = 160
NAMES = sorted(list_attentions())


def inv_freq(rotary_dim: int = HEAD_DIM) -> torch.Tensor:
    return BASE ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)


def rotated(x: torch.Tensor, freqs: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """x ``(b, h, s, d)`` rotated at positions offset … offset + s − 1 as the model does (ropekit's apply)."""
    cos, sin = cos_sin(torch.arange(offset, offset + x.shape[2]), freqs, dtype=x.dtype)
    return apply_rope(x, cos, sin, seq_dim=2)


def tensors(length: int = LENGTH, heads: int = 4, kv_heads: int = 2, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, heads, length, HEAD_DIM, generator=generator, dtype=dtype)
    k = torch.randn(1, kv_heads, length, HEAD_DIM, generator=generator, dtype=dtype)
    v = torch.randn(1, kv_heads, length, HEAD_DIM, generator=generator, dtype=dtype)
    return q, k, v


def test_every_registered_method_has_an_oracle(oracle):
    assert set(list_attentions()) == set(oracle.CASES) == set(oracle.ORACLES)


@pytest.mark.parametrize("rows", [16, 37, 256])
@pytest.mark.parametrize("name", NAMES)
def test_matches_oracle_beyond_the_window(name: str, rows: int, oracle):
    """Blocks of queries smaller than, across and larger than every window and chunk."""
    freqs = inv_freq()
    q, k, v = tensors()
    method = get_attention(name)(**oracle.CASES[name])
    ours = attend(rotated(q, freqs), rotated(k, freqs), v, method, freqs, block_rows=rows)
    expected = oracle.attention(name, q, k, v, freqs, **oracle.CASES[name])
    assert float((ours.double() - expected).abs().max()) < 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_decoding_rows_match_the_full_result(name: str, oracle):
    """Queries given as the last rows against the whole key cache (KV-cached decoding) give the same rows."""
    freqs = inv_freq()
    q, k, v = tensors()
    method = get_attention(name)(**oracle.CASES[name])
    qr, kr = rotated(q, freqs), rotated(k, freqs)
    full = attend(qr, kr, v, method, freqs)
    for last in (1, 7):
        tail = attend(qr[:, :, -last:], kr, v, method, freqs)
        assert float((tail - full[:, :, -last:]).abs().max()) < 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_window_covering_the_length_is_plain_attention(name: str):
    freqs = inv_freq()
    q, k, v = tensors(length=48)
    params = get_attention(name).from_options(train_length=64, length=48).describe()
    params.pop("attention")
    wide = {key: 48 for key in params if key in ("window", "chunk_size", "shift")}
    method = get_attention(name)(**{**params, **wide})
    qr, kr = rotated(q, freqs), rotated(k, freqs)
    ours = attend(qr, kr, v, method, freqs)
    plain = torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True, enable_gqa=True)
    assert float((ours - plain).abs().max()) < 1e-5


def test_partial_rotary_and_float64(oracle):
    """A rotary dim below head_dim leaves the tail dims alone; float64 inputs agree to float64 rounding."""
    freqs = inv_freq(rotary_dim=8)
    q, k, v = tensors(dtype=torch.float64)
    method = get_attention("self_extend")(**oracle.CASES["self_extend"])
    ours = attend(rotated(q, freqs), rotated(k, freqs), v, method, freqs)
    expected = oracle.attention("self_extend", q, k, v, freqs, **oracle.CASES["self_extend"])
    assert float((ours - expected).abs().max()) < 1e-10


def test_attention_mask_on_top_of_the_method(oracle):
    """A padding mask removes keys on top of the method's pattern; additive 0/−inf equals bool; other biases refused."""
    freqs = inv_freq()
    q, k, v = tensors(length=64)
    method = get_attention("self_extend")(group=2, window=8)
    qr, kr = rotated(q, freqs), rotated(k, freqs)
    keep = torch.ones(1, 1, 64, 64, dtype=torch.bool)
    plain = attend(qr, kr, v, method, freqs, block_rows=16)
    assert torch.allclose(attend(qr, kr, v, method, freqs, attention_mask=keep, block_rows=16), plain, atol=1e-6)
    keep[..., 20:30] = False
    masked = attend(qr, kr, v, method, freqs, attention_mask=keep, block_rows=16)
    additive = torch.zeros(1, 1, 64, 64).masked_fill(~keep, -torch.inf)
    assert torch.allclose(attend(qr, kr, v, method, freqs, attention_mask=additive, block_rows=16), masked, atol=1e-6)
    assert torch.allclose(masked[:, :, :20], plain[:, :, :20], atol=1e-6)  # queries before the masked keys
    assert not torch.allclose(masked[:, :, 40:], plain[:, :, 40:], atol=1e-3)
    with pytest.raises(ValueError, match="other additive biases are not supported"):
        attend(qr, kr, v, method, freqs, attention_mask=additive + 0.5)
