"""Tests of ropekit.permute: converting q/k projection weights between the interleaved and half-split pair
layouts.

Oracles: attention scores of the model before and after conversion (float64), and the closed-form permutation of
transformers' convert_llama_weights_to_hf.
"""

from __future__ import annotations

import pytest
import torch

from ropekit.functional import apply_rope
from ropekit.permute import half_split_to_interleaved, interleaved_to_half_split
from ropekit.scaling.registry import inv_freq
from ropekit.tables import cos_sin

BASE = 10000.0


def tables(positions: torch.Tensor, rotary_dim: int, dtype: torch.dtype = torch.float32):
    return cos_sin(positions, inv_freq(rotary_dim, BASE), dtype=dtype)


# ---------------------------------------------------------------- weight layout conversion


@pytest.mark.parametrize("rotary_dim", [None, 8], ids=["full", "partial"])
def test_converting_qk_weights_keeps_attention_scores(seed, rotary_dim):
    """A model written for interleaved RoPE, converted to half-split, gives the same scores (with GQA)."""
    heads, kv_heads, head_dim, hidden, seq = 4, 2, 16, 32, 12
    r = rotary_dim or head_dim
    wq = torch.randn(heads * head_dim, hidden, dtype=torch.float64)
    wk = torch.randn(kv_heads * head_dim, hidden, dtype=torch.float64)
    bq = torch.randn(heads * head_dim, dtype=torch.float64)
    h = torch.randn(1, seq, hidden, dtype=torch.float64)
    cos, sin = tables(torch.arange(seq), r, dtype=torch.float64)

    def scores(wq, bq, wk, interleaved):
        q = (h @ wq.T + bq).unflatten(-1, (heads, head_dim))  # (1, seq, heads, head_dim)
        k = (h @ wk.T).unflatten(-1, (kv_heads, head_dim))  # (1, seq, kv_heads, head_dim)
        q = apply_rope(q, cos, sin, interleaved=interleaved)
        k = apply_rope(k, cos, sin, interleaved=interleaved).repeat_interleave(heads // kv_heads, dim=2)
        return torch.einsum("bshd,bthd->bhst", q, k)  # (1, heads, seq, seq)

    original = scores(wq, bq, wk, interleaved=True)
    convert = {"head_dim": head_dim, "rotary_dim": rotary_dim}
    wq_h, bq_h, wk_h = (interleaved_to_half_split(w, **convert) for w in (wq, bq, wk))
    torch.testing.assert_close(scores(wq_h, bq_h, wk_h, interleaved=False), original, rtol=1e-12, atol=1e-10)
    # The check has power: unconverted weights in the other layout give different scores.
    assert not torch.allclose(scores(wq, bq, wk, interleaved=False), original, rtol=1e-3, atol=1e-3)
    # Round trips are exact, and the inverse undoes a half-split model back to interleaved.
    for w in (wq, bq, wk):
        assert torch.equal(half_split_to_interleaved(interleaved_to_half_split(w, **convert), **convert), w)
        assert torch.equal(interleaved_to_half_split(half_split_to_interleaved(w, **convert), **convert), w)
    back = (half_split_to_interleaved(w, **convert) for w in (wq_h, bq_h, wk_h))
    torch.testing.assert_close(scores(*back, interleaved=True), original, rtol=0, atol=0)


def test_weight_conversion_matches_meta_llama_permute():
    """The permutation transformers' convert_llama_weights_to_hf applies to Meta's wq/wk (a closed form)."""
    heads, head_dim, hidden = 3, 8, 5
    w = torch.arange(heads * head_dim * hidden, dtype=torch.float32).reshape(heads * head_dim, hidden)
    expected = w.view(heads, head_dim // 2, 2, hidden).transpose(1, 2).reshape(heads * head_dim, hidden)
    assert torch.equal(interleaved_to_half_split(w, head_dim), expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim": 10}, ValueError, r"weight.shape\[0\]=24 is not a multiple of head_dim=10"),
        ({"head_dim": 8, "rotary_dim": 5}, ValueError, r"rotary_dim must be even.*got 5"),
        ({"head_dim": 8, "rotary_dim": 10}, ValueError, r"rotary_dim must be <= head_dim \(8\), got 10"),
        ({"head_dim": 8.0}, TypeError, r"head_dim must be an integer, got 8.0"),
    ],
)
def test_weight_conversion_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        interleaved_to_half_split(torch.zeros(24, 4), **kwargs)
