"""Float64 oracles of RoPE written from the closed form θ_i = b^(−2i/d), independent of ropekit's rotation code:
an explicit block-diagonal rotation matrix, complex multiplication (Meta's ``freqs_cis``) and the ``rotate_half`` /
``rotate_every_two`` formulas; plus the small table and bit helpers the functional tests share."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ropekit.functional import cos_sin
from ropekit.scaling.registry import inv_freq

BASE = 10000.0
D = 16


def ref_angles(positions: torch.Tensor, rotary_dim: int, base: float = BASE) -> torch.Tensor:
    """float64 angles m·b^(−2i/d), shape ``positions.shape + (rotary_dim // 2,)``."""
    theta = base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    return torch.from_numpy(positions.numpy().astype(np.float64)[..., None] * theta)


def pair_indices(rotary_dim: int, interleaved: bool) -> tuple[list[int], list[int]]:
    """The (first, second) dim of every rotating pair."""
    half = rotary_dim // 2
    if interleaved:
        return list(range(0, rotary_dim, 2)), list(range(1, rotary_dim, 2))
    return list(range(half)), list(range(half, rotary_dim))


def rotation_matrices(angles: torch.Tensor, head_dim: int, interleaved: bool) -> torch.Tensor:
    """Explicit block-diagonal R_m for each position: ``angles.shape[:-1] + (head_dim, head_dim)``, identity past r."""
    rotary_dim = 2 * angles.shape[-1]
    R = torch.eye(head_dim, dtype=torch.float64).expand(*angles.shape[:-1], head_dim, head_dim).clone()
    first, second = pair_indices(rotary_dim, interleaved)
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        c, s = torch.cos(angles[..., i]), torch.sin(angles[..., i])
        R[..., a, a], R[..., a, b], R[..., b, a], R[..., b, b] = c, -s, s, c
    return R


def matrix_rope(x: torch.Tensor, angles: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """y = R_m x in float64; x ``(batch, seq, heads, head_dim)``, angles ``(seq, r/2)`` or ``(batch, seq, r/2)``."""
    R = rotation_matrices(angles, x.shape[-1], interleaved)
    if R.dim() == 3:
        R = R.unsqueeze(0)  # (1, seq, D, D)
    return torch.einsum("bsij,bshj->bshi", R, x.double())


def complex_rope(x: torch.Tensor, angles: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Pairs as complex numbers times e^{imθ} (Meta's ``freqs_cis``); x ``(batch, seq, heads, head_dim)``."""
    r = 2 * angles.shape[-1]
    xd = x.double()
    if interleaved:
        z = torch.view_as_complex(xd[..., :r].unflatten(-1, (r // 2, 2)).contiguous())  # (b, s, h, r/2)
    else:
        z = torch.complex(xd[..., : r // 2], xd[..., r // 2 : r])
    rot = torch.polar(torch.ones_like(angles), angles)
    rot = rot.unsqueeze(-2) if rot.dim() == 3 else rot[None, :, None]  # broadcast over heads
    w = z * rot
    head = torch.view_as_real(w).flatten(-2) if interleaved else torch.cat((w.real, w.imag), dim=-1)
    return torch.cat((head, xd[..., r:]), dim=-1)


def formula_rope(x: torch.Tensor, angles: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """HF ``x·cos + rotate_half(x)·sin`` (half-split) or GPT-J ``rotate_every_two`` (interleaved), float64."""
    r = 2 * angles.shape[-1]
    xd = x.double()
    xr = xd[..., :r]
    if interleaved:
        cos = torch.cos(angles).repeat_interleave(2, dim=-1)
        sin = torch.sin(angles).repeat_interleave(2, dim=-1)
        rotated = torch.stack((-xr[..., 1::2], xr[..., 0::2]), dim=-1).flatten(-2)
    else:
        cos = torch.cat((torch.cos(angles),) * 2, dim=-1)
        sin = torch.cat((torch.sin(angles),) * 2, dim=-1)
        rotated = torch.cat((-xr[..., r // 2 :], xr[..., : r // 2]), dim=-1)
    cos = cos.unsqueeze(-2) if cos.dim() == 3 else cos[None, :, None]
    sin = sin.unsqueeze(-2) if sin.dim() == 3 else sin[None, :, None]
    return torch.cat((xr * cos + rotated * sin, xd[..., r:]), dim=-1)


def tables(positions: torch.Tensor, rotary_dim: int, dtype: torch.dtype = torch.float32):
    return cos_sin(positions, inv_freq(rotary_dim, BASE), dtype=dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit pattern, so NaN payloads and −0.0 count in equality."""
    return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


LAYOUTS = pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
