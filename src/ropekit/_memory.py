"""Which elements of tensors share memory: the checks behind in-place and ``out=`` rotations."""

from __future__ import annotations

import torch

__all__ = ["aliasing", "has_overlap", "span"]


def has_overlap(t: torch.Tensor) -> bool:
    """True when two indices of ``t`` may address one element (an expanded or otherwise self-overlapping view)."""
    dims = sorted((stride, size) for stride, size in zip(t.stride(), t.shape, strict=True) if size > 1)
    extent = 1
    for stride, size in dims:
        if stride < extent:
            return True
        extent = stride * size
    return False


def span(t: torch.Tensor) -> tuple[int, int]:
    """``[first, last + 1)`` storage offsets (in elements) that ``t`` addresses; ``t`` is not empty."""
    start = t.storage_offset()
    return start, start + 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


def aliasing(a: torch.Tensor, b: torch.Tensor) -> str:
    """How two in-place targets share memory: ``"none"``, ``"same"`` (one view: same start, shape, strides and
    dtype) or ``"overlap"`` (at least one element is addressed by both).

    Views of one buffer whose elements interleave without meeting (q and k of a fused qkv projection) are
    ``"none"``: when their spans intersect, the elements are marked exactly in a scratch mask of the joint span
    (only on this rare path). Neither tensor may overlap itself (``apply_rope`` refuses that first).
    """
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return "none"
    if a.dtype != b.dtype:
        return "overlap"  # one buffer read as two dtypes: conservative
    if a.storage_offset() == b.storage_offset() and a.shape == b.shape and a.stride() == b.stride():
        return "same"
    (a0, a1), (b0, b1) = span(a), span(b)
    if a1 <= b0 or b1 <= a0:
        return "none"
    base = min(a0, b0)
    mask = torch.zeros(max(a1, b1) - base, dtype=torch.bool, device=a.device)
    mask.as_strided(a.shape, a.stride(), a0 - base).fill_(True)
    return "overlap" if bool(mask.as_strided(b.shape, b.stride(), b0 - base).any()) else "none"
