"""The attention core: scores with each method's re-indexed positions, a block of queries at a time.

RoPE is a group of rotations: a query already rotated at position ``i``, rotated again by ``p − i``, is exactly
the query rotated at ``p``. So the core takes queries and keys as the model rotated them (at their true
positions, with whatever scaling the model uses) and re-positions them per region of the method
(:class:`~ropekit.attention.registry.Region`) with ropekit's rotation (:func:`ropekit.functional.apply_rope`);
the model's code is untouched, and any RoPE scaling composes (the re-rotation uses the same frequencies).

Memory: queries go in blocks of ``block_rows``; each region scores only the keys it can reach from the block
(``Region.keys``), and the regions are merged with a running log-sum-exp (as flash attention merges blocks), so
the largest temporary is ``(batch, heads, block_rows, seq)`` scores: linear in the sequence. Keys are re-rotated
once per region (``regions × seq`` rows). ReRoPE's two score matrices are two regions: the neighbour band and the
clipped far part, each a block of rows at a time.
"""

from __future__ import annotations

import torch

from ropekit.attention.registry import AttentionConfig
from ropekit.functional import apply_rope
from ropekit.scaling.registry import Frequencies
from ropekit.tables import cos_sin

__all__ = ["BLOCK_BYTES", "attend", "shift"]

#: bytes of float32 scores held at once per region (rows per block = this / (4 · batch · heads · keys))
BLOCK_BYTES = 32 * 2**20
#: below this offset the float64 product ``offset · inv_freq`` is what :func:`ropekit.tables.cos_sin` computes
_EXACT_PRODUCT = 1 << 24


def _freqs(inv_freq: torch.Tensor | Frequencies, device: torch.device) -> torch.Tensor:
    values = inv_freq.inv_freq if isinstance(inv_freq, Frequencies) else inv_freq
    freqs = torch.as_tensor(values, dtype=torch.float64, device=device)
    if freqs.dim() != 1 or freqs.numel() == 0:
        raise ValueError(f"inv_freq must be 1-D with one entry per rotating pair, got shape {tuple(freqs.shape)}")
    return freqs


def shift(x: torch.Tensor, offsets: torch.Tensor, inv_freq: torch.Tensor, *, interleaved: bool = False) -> torch.Tensor:
    """Rotate already-rotated ``x`` further by ``offsets`` positions: a vector at ``p`` moves to ``p + offset``.

    Args:
        x: ``(batch, heads, seq, head_dim)``.
        offsets: ``(seq,)`` float64 offsets (negative, fractional allowed).
        inv_freq: ``(rotary_dim // 2,)`` float64 frequencies: those the model rotated with.
        interleaved: the model's pair layout.

    Returns:
        ``x`` rotated (``x`` itself when every offset is 0).

    Precision: angles ``offset · inv_freq`` in float64 (integer offsets of 2**24 and more go through the exact
    :func:`~ropekit.tables.cos_sin`), tables in fp32 (fp64 for fp64 ``x``); the rotation rounds once.
    """
    if not bool((offsets != 0).any()):
        return x
    table = torch.float64 if x.dtype == torch.float64 else torch.float32
    largest = float(offsets.abs().max())
    if largest >= _EXACT_PRODUCT and bool((offsets == offsets.round()).all()):
        cos, sin = cos_sin(offsets.abs().to(torch.int64), inv_freq, dtype=torch.float64)
        sin = sin * offsets.sign().unsqueeze(-1)  # R(−θ) = R(θ)ᵀ
    else:
        angles = offsets.unsqueeze(-1) * inv_freq  # (seq, rotary_dim/2)
        cos, sin = angles.cos(), angles.sin()
    return apply_rope(x, cos.to(table), sin.to(table), interleaved=interleaved, seq_dim=2)


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, method: AttentionConfig) -> None:
    if not isinstance(method, AttentionConfig):
        raise TypeError(f"method must be an AttentionConfig (see ropekit.attention.ATTENTIONS), got {method!r:.60}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or not t.is_floating_point():
            raise ValueError(f"{name} must be a 4-D floating tensor (batch, heads, seq, head_dim), got {t!r:.60}")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k and v must agree in (batch, heads, seq), got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch and head_dim, and q's heads must be a "
            "multiple of k's (grouped-query attention)"
        )


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    method: AttentionConfig,
    inv_freq: torch.Tensor | Frequencies,
    *,
    scale: float | None = None,
    q_offset: int | None = None,
    interleaved: bool = False,
    attention_mask: torch.Tensor | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> torch.Tensor:
    """Causal attention with ``method``'s positions, from queries and keys rotated at their true positions.

    Args:
        q: ``(batch, q_heads, q_len, head_dim)``, rotated at positions ``q_offset … q_offset + q_len − 1``.
        k: ``(batch, kv_heads, kv_len, head_dim)``, rotated at ``0 … kv_len − 1`` (a KV cache holds exactly this).
        v: ``(batch, kv_heads, kv_len, v_dim)``.
        method: the attention method's config.
        inv_freq: the frequencies q and k were rotated with (float64, or a :class:`Frequencies`).
        scale: multiplies the scores (default ``head_dim ** -0.5``).
        q_offset: position of the first query (default ``kv_len − q_len``: the queries are the last tokens).
        interleaved: the pair layout of the rotation (``False``: rotate-half, as transformers).
        attention_mask: optional ``(batch or 1, 1, q_len, kv_len)``: bool (True = may attend) or additive float,
            applied on top of the method's pattern (e.g. padding).
        block_bytes: budget of one block of float32 scores.

    Returns:
        ``(batch, q_heads, q_len, v_dim)`` in ``v.dtype``.

    Precision: scores in the input dtype, softmax statistics and the value sum in float32 (float64 for float64
    input), as transformers' eager attention does.
    """
    _check(q, k, v, method)
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    groups = q_heads // kv_heads
    offset = kv_len - q_len if q_offset is None else int(q_offset)
    if offset < 0 or offset + q_len > kv_len:
        raise ValueError(f"queries at {offset}…{offset + q_len - 1} must have their keys (kv_len={kv_len})")
    freqs = _freqs(inv_freq, q.device)
    scale = head_dim**-0.5 if scale is None else float(scale)
    stats = torch.float64 if q.dtype == torch.float64 else torch.float32
    regions = method.regions()
    key_index = torch.arange(kv_len, dtype=torch.float64, device=q.device)
    keys = [shift(k, r.k_position(key_index) - key_index, freqs, interleaved=interleaved) for r in regions]
    out = torch.empty(batch, q_heads, q_len, v.shape[-1], dtype=v.dtype, device=v.device)
    rows = max(16, block_bytes // (4 * batch * q_heads * max(kv_len, 1)))
    for start in range(0, q_len, rows):
        stop = min(q_len, start + rows)
        first, last = offset + start, offset + stop - 1
        qi = torch.arange(first, last + 1, dtype=torch.float64, device=q.device)[:, None]  # (n, 1)
        peak = torch.full((batch, kv_heads, groups, stop - start, 1), -torch.inf, dtype=stats, device=q.device)
        total = torch.zeros_like(peak)
        acc = torch.zeros(batch, kv_heads, groups, stop - start, v.shape[-1], dtype=stats, device=q.device)
        for region, rotated in zip(regions, keys, strict=True):
            lo, hi = region.keys(first, last)
            lo, hi = max(0, lo), min(hi, last + 1, kv_len)
            if lo >= hi:
                continue
            kj = key_index[lo:hi][None, :]  # (1, keys)
            allowed = (kj <= qi) & region.allowed(qi, kj)  # (n, keys)
            if not bool(allowed.any()):
                continue
            qr = shift(q[:, :, start:stop], region.q_position(qi[:, 0]) - qi[:, 0], freqs, interleaved=interleaved)
            qr = qr.reshape(batch, kv_heads, groups, stop - start, head_dim)  # (b, kv, g, n, d)
            scores = (qr @ rotated[:, :, None, lo:hi].transpose(-1, -2)).to(stats) * scale  # (b, kv, g, n, keys)
            if attention_mask is not None:
                part = attention_mask[..., start:stop, lo:hi].unsqueeze(2)  # (b|1, 1, 1, n, keys)
                if part.dtype == torch.bool:
                    allowed = allowed & part
                else:
                    scores = scores + part.to(stats)
            scores = scores.masked_fill(~allowed, -torch.inf)
            new_peak = torch.maximum(peak, scores.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(new_peak), torch.zeros_like(new_peak), new_peak)
            weights = torch.exp(scores - safe)  # (b, kv, g, n, keys)
            decay = torch.exp(peak - safe)
            total = total * decay + weights.sum(-1, keepdim=True)
            acc = acc * decay + (weights.to(v.dtype) @ v[:, :, None, lo:hi]).to(stats)
            peak = new_peak
        block = acc / torch.where(total > 0, total, torch.ones_like(total))  # a row with no key gives zeros
        out[:, :, start:stop] = block.reshape(batch, q_heads, stop - start, -1).to(v.dtype)
    return out
