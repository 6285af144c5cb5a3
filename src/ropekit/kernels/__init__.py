"""Fast paths for :func:`ropekit.apply_rope` with the same semantics as the eager reference.

``apply_rope_into`` writes the rotation of ``x`` into ``target`` (which may be ``x`` itself).
"""

from __future__ import annotations

import torch

from ropekit.functional import _rotate


def apply_rope_into(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    target: torch.Tensor,
    *,
    rotary_dim: int,
    interleaved: bool,
    seq_dim: int,
) -> torch.Tensor:
    """Rotate ``x`` into ``target`` (validated by the caller). Eager torch; one rounding to ``x.dtype``."""
    rotated = _rotate(x, cos, sin, rotary_dim, interleaved, seq_dim)
    if target is not x:
        target[..., rotary_dim:] = x[..., rotary_dim:]
    target[..., :rotary_dim] = rotated
    return target
