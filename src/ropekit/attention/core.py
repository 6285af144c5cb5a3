"""The attention core: scores with each method's re-indexed positions, a block of queries at a time.

RoPE is a group of rotations: a query already rotated at position ``i``, rotated again by ``p − i``, is exactly
the query rotated at ``p``. So the core takes queries and keys as the model rotated them (at their true
positions, with whatever scaling the model uses) and re-positions them per region of the method
(:class:`~ropekit.attention.registry.Region`) with ropekit's rotation (:func:`ropekit.functional.apply_rope`);
the model's code is untouched, and any RoPE scaling composes (the re-rotation uses the same frequencies).

Memory: queries go in blocks of ``block_rows``; in each region the keys every query of the block may use
(``Region.full``) go through a fused flash kernel with no mask, and only the region's edges (at most
``block_rows`` keys at each end, ``Region.keys``) get a ``(block_rows × edge)`` mask; the parts are merged by
their log-sum-exp (as flash attention merges blocks). No ``(seq × seq)`` tensor exists: memory is linear in the
sequence (keys re-rotated once per region, ``regions × seq`` rows). ReRoPE's two score matrices are two regions,
the neighbour band and the clipped far part, each a block of rows at a time.
"""

from __future__ import annotations

import torch

from ropekit.attention.registry import AttentionConfig, Region
from ropekit.functional import apply_rope
from ropekit.scaling.registry import Frequencies
from ropekit.tables import cos_sin

__all__ = ["BLOCK_ROWS", "attend", "shift"]

#: queries per block: the masked edges of a region are at most this many keys wide
BLOCK_ROWS = 256
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


def _fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float):
    """Softmax attention of ``q`` over ``k``/``v`` (``mask``: bool, True = may attend) and its log-sum-exp.

    On the CPU this is torch's fused flash kernel (``aten._scaled_dot_product_flash_attention_for_cpu``, which
    returns the log-sum-exp); elsewhere the same in plain torch. A row with no allowed key gets lse −inf.

    Shapes: q ``(b, h, n, d)``, k/v ``(b, h, keys, d)``, mask broadcastable to ``(b, h, n, keys)`` →
    out ``(b, h, n, dv)`` and lse ``(b, h, n)`` float32 (float64 for float64 input).
    """
    stats = torch.float64 if q.dtype == torch.float64 else torch.float32
    if q.device.type == "cpu":
        bias = None if mask is None else torch.zeros(mask.shape, dtype=q.dtype).masked_fill_(~mask, -torch.inf)
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, False, attn_mask=bias, scale=scale
        )
        lse = lse.to(stats)
    else:
        scores = (q @ k.transpose(-1, -2)).to(stats) * scale  # (b, h, n, keys)
        if mask is not None:
            scores = scores.masked_fill(~mask, -torch.inf)
        lse = torch.logsumexp(scores, dim=-1)
        safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
        out = (torch.exp(scores - safe.unsqueeze(-1)).to(v.dtype) @ v).to(v.dtype)
    if mask is not None:
        lse = lse.masked_fill(~mask.any(-1).expand(lse.shape), -torch.inf)
    return out, lse


def _mask_part(attention_mask: torch.Tensor | None, rows: slice, keys: slice) -> torch.Tensor | None:
    """The caller's mask on ``rows × keys`` as bool ``(b|1, 1, n, keys)`` (True = may attend)."""
    if attention_mask is None:
        return None
    part = attention_mask[..., rows, keys]
    if part.dtype == torch.bool:
        return part
    if not bool(((part == 0) | (part < -1e30)).all()):
        raise ValueError("attention_mask must be bool or additive 0/−inf; other additive biases are not supported")
    return part == 0


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
    block_rows: int = BLOCK_ROWS,
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
        attention_mask: optional ``(batch or 1, 1, q_len, kv_len)``: bool (True = may attend) or additive 0/−inf,
            applied on top of the method's pattern (e.g. padding).
        block_rows: queries per block.

    Returns:
        ``(batch, q_heads, q_len, v_dim)`` in ``v.dtype``.

    How: per block of queries and per region, the keys every query of the block may use go through a fused
    kernel without a mask; only the edges of the region (a band of at most ``block_rows`` keys at each end) get a
    mask. The parts are merged by their log-sum-exp.
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
    regions = method.regions()
    key_index = torch.arange(kv_len, dtype=torch.float64, device=q.device)
    keys = [shift(k, r.k_position(key_index) - key_index, freqs, interleaved=interleaved) for r in regions]
    out = torch.empty(batch, q_heads, q_len, v.shape[-1], dtype=v.dtype, device=v.device)
    for start in range(0, q_len, max(1, int(block_rows))):
        stop = min(q_len, start + max(1, int(block_rows)))
        rows = stop - start
        first, last = offset + start, offset + stop - 1
        qi = torch.arange(first, last + 1, dtype=torch.float64, device=q.device)  # (n,)
        outs, lses = [], []
        for region, rotated in zip(regions, keys, strict=True):
            lo, hi = region.keys(first, last)
            lo, hi = max(0, lo), min(hi, last + 1, kv_len)
            if lo >= hi:
                continue
            full_lo, full_hi = region.full(first, last)
            full_lo, full_hi = max(full_lo, lo), min(full_hi, hi)
            if full_lo >= full_hi:
                full_lo = full_hi = hi
            qr = shift(q[:, :, start:stop], region.q_position(qi) - qi, freqs, interleaved=interleaved)
            qr = qr.reshape(batch, kv_heads, groups * rows, head_dim)  # (b, kv, g·n, d): GQA groups as rows
            parts = [(full_lo, full_hi, False), (lo, full_lo, True), (full_hi, hi, True)]
            for part_lo, part_hi, masked in parts:
                if part_lo >= part_hi:
                    continue
                keep, mask = _part_mask(attention_mask, region, qi, key_index, start, part_lo, part_hi, masked, groups)
                if not keep:
                    continue
                part_out, part_lse = _fused(qr, rotated[:, :, part_lo:part_hi], v[:, :, part_lo:part_hi], mask, scale)
                outs.append(part_out)
                lses.append(part_lse)
        merged = _merge(outs, lses)
        out[:, :, start:stop] = merged.reshape(batch, q_heads, rows, -1).to(v.dtype)
    return out


def _part_mask(
    attention_mask: torch.Tensor | None,
    region: Region,
    qi: torch.Tensor,
    key_index: torch.Tensor,
    start: int,
    part_lo: int,
    part_hi: int,
    masked: bool,
    groups: int,
) -> tuple[bool, torch.Tensor | None]:
    """``(keep, mask)`` of the keys ``part_lo … part_hi − 1`` for the block of queries at positions ``qi`` (rows
    ``start …`` of the call): the caller's ``attention_mask`` and, for an edge part (``masked``), the causal and
    region pattern, laid out ``(b|1, 1, g·n, keys)`` for the GQA rows; ``keep`` is false when no key is allowed."""
    rows = len(qi)
    mask = _mask_part(attention_mask, slice(start, start + rows), slice(part_lo, part_hi))
    if masked:
        kj = key_index[part_lo:part_hi][None, :]
        allowed = (kj <= qi[:, None]) & region.allowed(qi[:, None], kj)  # (n, keys)
        mask = allowed if mask is None else mask & allowed
    if mask is None:
        return True, None
    if not bool(mask.any()):
        return False, None
    width = part_hi - part_lo
    mask = mask.reshape(-1, 1, 1, rows, width).expand(-1, 1, groups, rows, width)
    return True, mask.reshape(-1, 1, groups * rows, width)  # (b|1, 1, g·n, keys)


def _merge(outs: list[torch.Tensor], lses: list[torch.Tensor]) -> torch.Tensor:
    """The parts' outputs merged by their log-sum-exp (a part whose every score is −inf weighs nothing)."""
    lse = torch.stack(lses)  # (parts, b, kv, g·n)
    total = torch.logsumexp(lse, dim=0)
    weights = torch.exp(lse - torch.where(torch.isinf(total), torch.zeros_like(total), total))
    return sum(w.unsqueeze(-1) * o.to(w.dtype) for w, o in zip(weights, outs, strict=True))
