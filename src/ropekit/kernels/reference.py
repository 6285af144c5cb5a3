"""The eager torch rotation: the readable definition of RoPE, the fallback of every kernel, and the test oracle.

One home, one name: :func:`rope_reference`. It does no argument checking (``apply_rope`` does that) and records
an ordinary autograd graph. Every product ``x·cos``, ``x·sin`` is formed in fp32 (fp64 for fp64 input), the two
are added, and the result rounds once to ``x.dtype``; dims past ``rotary_dim`` are copied bit for bit.
"""

from __future__ import annotations

import torch

__all__ = ["rope_reference", "rotate"]


def _broadcast_table(table: torch.Tensor, seq_dim: int, compute: torch.dtype) -> torch.Tensor:
    """(seq, r/2) or (batch, seq, r/2) -> 4-D view broadcasting over heads."""
    if table.dim() == 2:
        table = table.unsqueeze(0)  # (1, seq, r/2)
    table = table.unsqueeze(2) if seq_dim == 1 else table.unsqueeze(1)  # (b, seq, 1, r/2) | (b, 1, seq, r/2)
    return table.to(compute)


def rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, interleaved: bool, seq_dim: int
) -> torch.Tensor:
    """Rotated first ``rotary_dim`` dims of ``x`` in the compute dtype (fp32, fp64 for fp64), layout as in ``x``.

    RoFormer (arXiv 2104.09864), eq. 34: pair (x1, x2) -> (x1·cos − x2·sin, x2·cos + x1·sin).
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    c = _broadcast_table(cos, seq_dim, compute)
    s = _broadcast_table(sin, seq_dim, compute)
    rot = x[..., :rotary_dim].to(compute)
    if interleaved:
        pairs = rot.unflatten(-1, (rotary_dim // 2, 2))  # (..., r/2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)  # (..., r)
    x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2 :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)  # (..., r)


def rope_reference(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = False,
    seq_dim: int = 1,
    conjugate: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eager RoPE of ``x`` (no validation): the definition every fast path must match bit for bit on CPU.

    Args:
        x: ``(batch, seq, heads, head_dim)`` if ``seq_dim=1`` else ``(batch, heads, seq, head_dim)``.
        cos, sin: ``(seq, rotary_dim // 2)`` or ``(batch | 1, seq, rotary_dim // 2)``; ``rotary_dim`` is
            ``2 * cos.shape[-1]``.
        interleaved: pairs (2i, 2i+1) instead of (i, i + rotary_dim/2).
        seq_dim: 1 or 2, the sequence axis of ``x``.
        conjugate: rotate by −θ (the backward of RoPE: R(θ)ᵀ = R(−θ)).
        out: write the result here (may be ``x`` itself, in place) instead of a new tensor.

    Returns:
        The rotated tensor (``out`` if given).
    """
    rotary_dim = 2 * cos.shape[-1]
    rotated = rotate(x, cos, -sin if conjugate else sin, rotary_dim, interleaved, seq_dim)
    if out is None:
        return torch.cat((rotated.to(x.dtype), x[..., rotary_dim:]), dim=-1)
    if out is not x:
        out[..., rotary_dim:] = x[..., rotary_dim:]
    out[..., :rotary_dim] = rotated
    return out
