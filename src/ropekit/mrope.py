"""M-RoPE: cos/sin tables and the rotation for 3-D positions (time, height, width), Qwen2-VL and Qwen3-VL.

Each rotating pair reads one of the three position axes (:meth:`ropekit.config.MRope.axis_of_pairs`: blocked for
Qwen2-VL and Qwen2.5-VL, interleaved for Qwen3-VL); its angle is that position times the pair's frequency. A scaling
method changes the frequencies only, exactly as transformers computes it (``rope_init_fn`` first, then the
sections on top): so every static method (linear, yarn, llama3, ntk, ...) composes exactly, and the length-following
ones (``dynamic``, ``longrope``) are refused by :class:`~ropekit.config.RopeConfig`.

Precision: each axis's table is :func:`ropekit.tables.cos_sin` (angles within 2e-9 rad of exact for every int64
position, cos/sin in float64, cast once); the pairs are then picked from the three tables, so the result is the same
float64-exact value per pair.
"""

from __future__ import annotations

import numpy as np
import torch

from ropekit.config import MRope, RopeConfig
from ropekit.functional import apply_rope
from ropekit.scaling.registry import Frequencies, frequencies
from ropekit.tables import cos_sin

__all__ = ["apply_mrope", "mrope_cos_sin", "text_positions"]


def text_positions(positions: torch.Tensor) -> torch.Tensor:
    """The 3-D positions of text tokens: ``(3,) + positions.shape``, the same position on every axis."""
    return positions.unsqueeze(0).expand(3, *positions.shape)


def _check_positions(positions: object) -> torch.Tensor:
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be an integer torch.Tensor of shape (3, seq) or (3, batch, seq), got {positions!r:.60}"
        )
    if positions.dim() not in (2, 3) or positions.shape[0] != 3:
        raise ValueError(
            f"positions must be (3, seq) or (3, batch, seq): one row per axis (time, height, width), got shape "
            f"{tuple(positions.shape)}"
        )
    return positions


def mrope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor | np.ndarray | Frequencies,
    mrope: MRope,
    *,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for 3-D positions: pair ``p`` at ``positions[axis(p)] · inv_freq[p]``, times ``attention_factor``.

    Args:
        positions: integer ``(3, seq)`` or ``(3, batch, seq)``, values >= 0 (transformers' ``position_ids`` of a
            Qwen2-VL model, time first).
        inv_freq: ``(rotary_dim // 2,)`` frequencies, or a :class:`Frequencies` (its attention factor multiplies).
        mrope: the sections and their layout.
        attention_factor: multiplies cos and sin; > 0.
        dtype: dtype of the returned tables.

    Returns:
        ``(cos, sin)`` of shape ``positions.shape[1:] + (rotary_dim // 2,)``: the tables :func:`ropekit.apply_rope`
        takes (one column per pair; transformers' tables repeat them for the second half of the head).

    Raises:
        ValueError: positions not 3-D by axis, or sections that do not cover the frequencies.
    """
    positions = _check_positions(positions)
    if not isinstance(mrope, MRope):
        raise TypeError(f"mrope must be an MRope, got {mrope!r:.60}")
    tables = [
        cos_sin(positions[axis], inv_freq, attention_factor=attention_factor, dtype=torch.float64) for axis in range(3)
    ]
    pairs = tables[0][0].shape[-1]
    if pairs != mrope.pairs:
        raise ValueError(f"mrope sections {mrope.sections} cover {mrope.pairs} pairs, but inv_freq has {pairs}")
    axes = torch.tensor(mrope.axis_of_pairs(), device=positions.device)  # (pairs,)
    cos = torch.where(axes == 0, tables[0][0], torch.where(axes == 1, tables[1][0], tables[2][0]))
    sin = torch.where(axes == 0, tables[0][1], torch.where(axes == 1, tables[1][1], tables[2][1]))
    return cos.to(dtype), sin.to(dtype)


def apply_mrope(
    x: torch.Tensor,
    positions: torch.Tensor,
    rope: RopeConfig,
    *,
    seq_dim: int = 1,
    table_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Rotate ``x`` at 3-D ``positions`` by ``rope`` (which must carry an :class:`MRope`), its scaling included.

    Args:
        x: ``(batch, seq, heads, head_dim)`` (``seq_dim=1``) or ``(batch, heads, seq, head_dim)`` (``seq_dim=2``).
        positions: integer ``(3, seq)`` or ``(3, batch, seq)``.
        rope: the model's RoPE with ``mrope`` set.
        seq_dim: which axis of ``x`` is the sequence.
        table_dtype: dtype of the cos/sin tables (float64 for a float64 reference).

    Returns:
        The rotated tensor (see :func:`ropekit.apply_rope` for precision and autograd).

    Raises:
        ValueError: ``rope.mrope`` is ``None`` (use :func:`ropekit.apply_rope` with 1-D positions).
    """
    if not isinstance(rope, RopeConfig) or rope.mrope is None:
        raise ValueError(f"rope must be a RopeConfig with mrope set (e.g. mrope=MRope((16, 24, 24))), got {rope!r:.80}")
    cos, sin = mrope_cos_sin(positions, frequencies(rope), rope.mrope, dtype=table_dtype)
    return apply_rope(x, cos, sin, interleaved=rope.interleaved, seq_dim=seq_dim)
