"""Wavelengths per pair, which pairs complete a period, and the critical dimension (numpy only).

The wavelength of pair i is λ_i = 2π/θ_i = 2π·b^(2i/d) (RoFormer, arXiv 2104.09864, eq. 15). A pair whose
wavelength fits inside the training length has been seen at every phase during training. Liu et al.
("Scaling Laws of RoPE-based Extrapolation", arXiv 2310.05209, §3.2) call the number of dims whose pairs do so
the critical dimension, d_extra = 2⌈(d/2)·log_b(T_train/2π)⌉, and the wavelength of the first pair that does not,
T_extra = 2π·b^(d_extra/d), the extrapolation limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ropekit._validate import require_float, require_int, require_rotary_dim
from ropekit.config import RopeConfig
from ropekit.scaling.registry import frequencies, inv_freq


def pair_wavelengths(rope: RopeConfig, *, seq_len: int | None = None, scaled: bool = True) -> np.ndarray:
    """λ_i = 2π/inv_freq_i for every pair of ``rope``, in float64.

    Args:
        rope: the rotary config.
        seq_len: the current sequence length (only length-dependent methods such as dynamic and longrope use it).
        scaled: ``True`` for the frequencies after ``rope.scaling``; ``False`` for plain RoPE with ``rope.base``.

    Returns:
        float64 array of shape ``(rope.dim // 2,)``, increasing for plain RoPE.
    """
    if not scaled or rope.scaling is None:
        return 2 * np.pi / inv_freq(rope.dim, rope.base)
    return frequencies(rope, seq_len=seq_len).wavelengths


def periodic_pairs(wavelengths: np.ndarray, length: int) -> np.ndarray:
    """Boolean mask of the pairs whose wavelength fits inside ``length`` tokens (λ_i <= length).

    Example: Llama 2 (d 128, base 1e4) at 4096 tokens: pairs 0..45 (pair 45: λ = 4080.2; pair 46: 4711.7),
    i.e. 92 of 128 dims (tests/theory/test_wavelengths.py).
    """
    require_int("length", length, minimum=1)
    return np.asarray(wavelengths, dtype=np.float64) <= length


def critical_dimension(rotary_dim: int, base: float, train_length: int) -> int:
    """d_extra = 2⌈(d/2)·log_b(T_train/2π)⌉, clamped to [0, d] (Liu et al., arXiv 2310.05209, eq. 8).

    For plain RoPE this equals twice the number of pairs with λ_i <= T_train, except when a wavelength equals
    T_train exactly.

    Args:
        rotary_dim: the rotary dimension d (even).
        base: the RoPE base b (> 1).
        train_length: the training length T_train in tokens.
    """
    rotary_dim = require_rotary_dim("rotary_dim", rotary_dim)
    base = require_float("base", base, above=1.0)
    require_int("train_length", train_length, minimum=1)
    pairs = math.ceil((rotary_dim / 2) * math.log(train_length / (2 * math.pi)) / math.log(base))
    return 2 * max(0, min(rotary_dim // 2, pairs))


def extrapolation_limit(rotary_dim: int, base: float, train_length: int) -> float:
    """T_extra = 2π·b^(d_extra/d): the wavelength of the first pair that never completes a period in training.

    Liu et al. (arXiv 2310.05209, eq. 9). With every pair periodic (d_extra = d) it is 2π·b, one step past the
    last pair, which means "no limit from this argument".
    """
    return 2 * math.pi * base ** (critical_dimension(rotary_dim, base, train_length) / rotary_dim)


@dataclass(frozen=True)
class WavelengthReport:
    """Wavelengths of a config before and after its scaling method, measured against a training length.

    Attributes:
        train_length: the training length T_train.
        wavelengths: λ_i of plain RoPE with the config's base, shape ``(d/2,)``.
        scaled_wavelengths: λ_i after the scaling method (equal to ``wavelengths`` without one), shape ``(d/2,)``.
        ratio: ``inv_freq_scaled / inv_freq`` per pair (1 = kept, 1/s = interpolated), shape ``(d/2,)``.
        periodic_dims: dims (2 per pair) whose plain wavelength fits inside ``train_length``.
        scaled_periodic_dims: the same after scaling.
        critical_dimension: d_extra of plain RoPE (Liu et al.).
        extrapolation_limit: T_extra of plain RoPE, in tokens.
        attention_factor: the scaling method's attention factor (1 without one).
    """

    train_length: int
    wavelengths: np.ndarray
    scaled_wavelengths: np.ndarray
    ratio: np.ndarray
    periodic_dims: int
    scaled_periodic_dims: int
    critical_dimension: int
    extrapolation_limit: float
    attention_factor: float


def wavelength_report(rope: RopeConfig, train_length: int, *, seq_len: int | None = None) -> WavelengthReport:
    """Everything :func:`pair_wavelengths` and the critical dimension say about ``rope`` at ``train_length``.

    Args:
        rope: the rotary config, with or without a scaling method.
        train_length: the (original) training length in tokens.
        seq_len: current sequence length for length-dependent methods.
    """
    require_int("train_length", train_length, minimum=1)
    plain = pair_wavelengths(rope, scaled=False)
    freqs = frequencies(rope, seq_len=seq_len)
    scaled = freqs.wavelengths
    if len(scaled) != len(plain):
        # Proportional RoPE spreads its frequencies over the whole head (head_dim/2 pairs, the last ones not
        # rotating) while a partial rotary_dim has rotary_dim/2: compare pair for pair over the whole head.
        plain = 2 * np.pi / inv_freq(2 * len(scaled), rope.base)
    return WavelengthReport(
        train_length=train_length,
        wavelengths=plain,
        scaled_wavelengths=scaled,
        ratio=plain / scaled,
        periodic_dims=2 * int(periodic_pairs(plain, train_length).sum()),
        scaled_periodic_dims=2 * int(periodic_pairs(scaled, train_length).sum()),
        critical_dimension=critical_dimension(rope.dim, rope.base, train_length),
        extrapolation_limit=extrapolation_limit(rope.dim, rope.base, train_length),
        attention_factor=float(freqs.attention_factor),
    )
