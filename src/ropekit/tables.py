"""cos/sin tables from integer positions, exact at any int64 position.

Precision: the angle ``position · inv_freq`` is formed modulo 2π within 2e-9 rad of exact for every int64 position
(the low 24 bits by the plain float64 product, the higher bits in 16-bit chunks whose phases are reduced exactly
with rationals), cos/sin are taken in float64 and cast once, so fp32 tables are one rounding from exact even at
positions near 2**63.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import torch

from ropekit._validate import require_float
from ropekit.scaling.registry import Frequencies

__all__ = ["capturing", "chunk_phases", "cos_sin", "graph_cos_sin"]

#: 2π to 100 digits: exact enough to reduce 2**48 · inv_freq modulo 2π with error far below float64 spacing.
_TWO_PI = Fraction(
    Decimal("6.283185307179586476925286766559005768394338798750211641949889184615632812572417997256069650684234136")
)
#: positions below 2**24 use the plain float64 product (error below 2e-9 rad); above, the bits from 24 on are
#: split into 16-bit chunks whose phases are reduced modulo 2π exactly (see :func:`_angles`).
_LOW_BITS = 24
_CHUNK_BITS = 16
#: chunk levels covering every int64 position (bits 24 to 62), used where no position value may be read
_ALL_LEVELS = -(-(63 - _LOW_BITS) // _CHUNK_BITS)
_SIGNED_OR_BYTE = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_WIDE_UNSIGNED = tuple(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name))


def capturing() -> bool:
    """True while ``torch.compile`` or ``torch.jit.trace`` records a graph: no tensor value may be read then."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def _check_positions(positions: torch.Tensor, name: str = "positions") -> tuple[torch.Tensor, int | None]:
    """Validate integer positions; return them (wide unsigned types as int64) and their maximum.

    The maximum is ``None`` for an empty tensor or a meta tensor (no values to read), and while a graph is
    captured (:func:`capturing`): then the sign check is an assertion inside the graph, which raises when a
    compiled call meets a negative position (``RuntimeError``, same message) instead of breaking the graph.
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(positions).__name__}")
    dtype = positions.dtype
    if dtype in _WIDE_UNSIGNED:
        positions = positions.to(torch.int64)  # values >= 2**63 wrap negative and are refused below
    elif dtype not in _SIGNED_OR_BYTE:
        raise TypeError(f"{name} must have an integer dtype, got {dtype} (allowed: int8/16/32/64, uint8/16/32/64)")
    if positions.dim() not in (1, 2):
        raise ValueError(f"{name} must be 1-D (seq,) or 2-D (batch, seq), got shape {tuple(positions.shape)}")
    if positions.is_meta or positions.numel() == 0:
        return positions, None
    if capturing():
        torch._assert_async((positions >= 0).all(), f"{name} must be >= 0")
        return positions, None
    low, high = torch.aminmax(positions)
    if int(low) < 0:
        raise ValueError(f"{name} must be >= 0, got minimum {int(low)}")
    return positions, int(high)


def _check_inv_freq(inv_freq: object) -> torch.Tensor:
    """``inv_freq`` as a float64 tensor, refusing what would silently poison the tables."""
    if isinstance(inv_freq, np.ndarray):
        if inv_freq.dtype == np.bool_ or not np.issubdtype(inv_freq.dtype, np.number):
            raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
        if np.iscomplexobj(inv_freq):
            raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
        inv_freq = torch.from_numpy(np.asarray(inv_freq, dtype=np.float64))
    if not isinstance(inv_freq, torch.Tensor):
        raise TypeError(f"inv_freq must be a 1-D tensor, a numpy array or a Frequencies, got {type(inv_freq).__name__}")
    if inv_freq.dtype == torch.bool or inv_freq.is_complex():
        raise TypeError(f"inv_freq must hold real numbers, got dtype {inv_freq.dtype}")
    if inv_freq.dim() != 1 or inv_freq.numel() == 0:
        raise ValueError(f"inv_freq must be 1-D with one entry per rotating pair, got shape {tuple(inv_freq.shape)}")
    freqs = inv_freq.to(torch.float64)
    if not freqs.is_meta:
        bad = ~torch.isfinite(freqs) | (freqs < 0)
        if bool(bad.any()):
            value = float(freqs[bad][0])
            raise ValueError(f"inv_freq must be finite and >= 0 (0 = a pair that does not rotate), got {value}")
    return freqs


@functools.lru_cache(maxsize=32)
def _chunk_phases(freq_bytes: bytes, levels: int) -> np.ndarray:
    """``(2**s_j · f) mod 2π`` for the chunk shifts ``s_j = 24 + 16 j`` (j < levels) and every frequency ``f``.

    Each is the float64 nearest the exact value, computed with exact rationals (``f`` is a float64, so
    ``2**s · f`` is exact) once per set of frequencies.
    """
    freqs = np.frombuffer(freq_bytes, dtype=np.float64)
    phases = np.empty((levels, len(freqs)), dtype=np.float64)
    for j in range(levels):
        scale = 1 << (_LOW_BITS + _CHUNK_BITS * j)
        for i, f in enumerate(freqs.tolist()):
            x = Fraction(f) * scale
            phases[j, i] = float(x - math.floor(x / _TWO_PI) * _TWO_PI)
    return phases


def _angles(positions: torch.Tensor, freqs: torch.Tensor, largest: int) -> torch.Tensor:
    """``positions ⊗ freqs`` up to multiples of 2π, within 2e-9 rad of exact for every int64 position (f <= 1).

    A float64 product ``p · f`` is off by up to ``p · f · 2**-53`` (3e-5 rad at p = 2**40, all meaning lost
    past 2**53). So only the low 24 bits of a position use the plain product (bit for bit what the product of
    the whole position gives below 2**24); the bits above go in 16-bit chunks ``a_j`` whose phases
    ``(2**s_j f) mod 2π`` were reduced exactly beforehand: each ``a_j · phase_j`` is below 2**19 and rounds by
    under 1e-10.
    """
    positions = positions.to(torch.int64)
    if largest < (1 << _LOW_BITS):
        return positions.to(torch.float64).unsqueeze(-1) * freqs  # (..., seq, rotary_dim/2)
    levels = -(-(largest.bit_length() - _LOW_BITS) // _CHUNK_BITS)
    return _chunked_angles(positions, freqs, chunk_phases(freqs, levels).to(freqs.device))


def chunk_phases(freqs: torch.Tensor, levels: int = _ALL_LEVELS) -> torch.Tensor:
    """``(levels, rotary_dim/2)`` float64 phases ``(2**(24 + 16 j) · f) mod 2π`` (CPU); the default covers
    every int64 position. Computed once per set of frequencies, outside any graph."""
    return torch.from_numpy(_chunk_phases(freqs.detach().cpu().to(torch.float64).numpy().tobytes(), levels))


def _chunked_angles(positions: torch.Tensor, freqs: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
    """The angles of :func:`_angles` from int64 ``positions`` and precomputed ``phases`` (one row per chunk)."""
    angles = (positions & ((1 << _LOW_BITS) - 1)).to(torch.float64).unsqueeze(-1) * freqs
    mask = (1 << _CHUNK_BITS) - 1
    for j in range(phases.shape[0]):
        chunk = (positions >> (_LOW_BITS + _CHUNK_BITS * j)) & mask  # (..., seq)
        angles = angles + chunk.to(torch.float64).unsqueeze(-1) * phases[j]
    return angles


def cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor | np.ndarray | Frequencies,
    *,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``positions ⊗ inv_freq``, times ``attention_factor``.

    Args:
        positions: integer tensor ``(seq,)`` or ``(batch, seq)``, values >= 0 (KV-cache offsets, packed
            documents and left padding are just different position values). Any int64 value is exact.
        inv_freq: ``(rotary_dim // 2,)`` frequencies, finite and >= 0 (float64 recommended), or a
            :class:`Frequencies`, whose attention factor then multiplies the one given here.
        attention_factor: multiplies cos and sin (YaRN's temperature; logits scale by its square); > 0.
        dtype: floating dtype of the returned tables.

    Returns:
        ``(cos, sin)``, each of shape ``positions.shape + (rotary_dim // 2,)`` on ``positions.device``.

    Precision: the angle ``p · f`` (``f`` the float64 frequency, at most 1 for plain RoPE) is formed modulo 2π
    with an absolute error below 2e-9 for every int64 position ``p`` (the bits of ``p`` from 2**24 up are
    split into 16-bit chunks whose phases are reduced exactly, see :func:`_angles`); cos/sin are taken in
    float64 and cast once. fp32 tables are therefore within one fp32 rounding (plus 2e-9) of exact at any
    position, 2**40 and 2**62 included; float64 tables are float64-exact up to ``p · 2**-53`` below 2**24 and
    within 2e-9 above.
    """
    positions, largest = _check_positions(positions)
    # A NaN, infinite or non-positive factor would silently poison every table.
    attention_factor = require_float("attention_factor", attention_factor, above=0.0)
    if isinstance(inv_freq, Frequencies):
        attention_factor = attention_factor * require_float(
            "Frequencies.attention_factor", inv_freq.attention_factor, above=0.0
        )
        inv_freq = inv_freq.inv_freq
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype, got {dtype!r} (a torch.dtype such as torch.float32)")
    freqs = _check_inv_freq(inv_freq)
    if largest is None and capturing() and positions.numel() and not positions.is_meta:
        return graph_cos_sin(positions, freqs, chunk_phases(freqs), attention_factor=attention_factor, dtype=dtype)
    if largest is None:  # empty or meta positions: shapes only
        shape = (*positions.shape, freqs.shape[0])
        return (
            torch.empty(shape, dtype=dtype, device=positions.device),
            torch.empty(shape, dtype=dtype, device=positions.device),
        )
    angles = _angles(positions, freqs.to(positions.device), largest)  # (..., seq, rotary_dim/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)


def graph_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    phases: torch.Tensor,
    *,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cos_sin` for a graph being captured (``torch.compile``, ``torch.jit.trace``): no value is read.

    Every position goes through all chunk levels (a zero chunk adds exactly 0), so the tables equal
    :func:`cos_sin`'s at any int64 position without knowing the largest. The caller validates the positions
    (:func:`_check_positions` asserts ``>= 0`` inside the graph).

    Args:
        positions: integer ``(seq,)`` or ``(batch, seq)``, values >= 0.
        inv_freq: ``(rotary_dim // 2,)`` float64 frequencies.
        phases: :func:`chunk_phases` of ``inv_freq`` with the default (all) levels.
        attention_factor: multiplies cos and sin.
        dtype: dtype of the returned tables.

    Returns:
        ``(cos, sin)`` of shape ``positions.shape + (rotary_dim // 2,)`` on ``positions.device``.
    """
    positions = positions.to(torch.int64)
    device = positions.device
    angles = _chunked_angles(positions, inv_freq.to(device), phases.to(device))
    cos, sin = torch.cos(angles), torch.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)
