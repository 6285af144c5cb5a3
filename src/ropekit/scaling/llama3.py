"""Llama 3.1 frequency scaling (Meta, "The Llama 3 Herd of Models", arXiv 2407.21783)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit._validate import require_float, require_int
from ropekit.scaling._hf_numbers import hf_original_length
from ropekit.scaling._pairs import PairGroups, pair_ranges, require_hf_keys
from ropekit.scaling.registry import Frequencies, ScalingConfig, check_factor, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig


@dataclass(frozen=True, kw_only=True)
class Llama3Scaling(ScalingConfig):
    """Three wavelength bands around L0: short kept, long divided by s, a smooth blend between.

    Llama 3.1 uses factor 8, low_freq_factor 1, high_freq_factor 4, L0 8192 with base 5e5.

    transformers quirks and how ropekit treats them:

    * transformers computes the blend in float32, where smooth = (L0/λ − lf)/(hf − lf) cancels near the low
      band edge and the error is multiplied by up to s: its result can be ~1e-5 relative away from the exact
      value for large s. ropekit computes in float64 (the exact value of the same formula).
    * ``low_freq_factor == high_freq_factor`` (Llama 4 Scout: both 1, L0 8192, factor 16, base 5e5) is only a
      warning in transformers, which then computes a step: wavelengths above L0/lf divided by s, those below kept
      (its blend is never taken, except at a wavelength of exactly L0/lf, where it divides 0 by 0; refused here).
      ropekit computes the same step.
    * ``low_freq_factor > high_freq_factor`` is also only a warning in transformers (the blend flips sign); here it
      raises ``ValueError``.
    """

    rope_type = "llama3"
    hf_required = ("factor", "low_freq_factor", "high_freq_factor")
    plan_order = 4.0
    hf_native = True
    extend_preference = 2.0
    eval_order = 5.0
    plan_why = (
        "Llama 3 keeps wavelengths shorter than T/high_freq_factor, divides those longer than T/low_freq_factor "
        "by s, and blends between."
    )
    factor: float
    original_max_position_embeddings: int
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))
        original = require_int("original_max_position_embeddings", self.original_max_position_embeddings, minimum=1)
        object.__setattr__(self, "original_max_position_embeddings", original)
        for name in ("low_freq_factor", "high_freq_factor"):
            object.__setattr__(self, name, require_float(name, getattr(self, name), above=0.0))
        if self.low_freq_factor > self.high_freq_factor:
            raise ValueError(
                "low_freq_factor must be <= high_freq_factor (equal: a step at L0/low_freq_factor), got "
                f"low_freq_factor={self.low_freq_factor}, high_freq_factor={self.high_freq_factor}"
            )

    def bands(self) -> tuple[float, float]:
        """(λ_hi, λ_lo): wavelengths below λ_hi are kept, above λ_lo divided by s."""
        length = self.original_max_position_embeddings
        return length / self.high_freq_factor, length / self.low_freq_factor

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> Llama3Scaling:
        """L0 in transformers' order (:func:`~ropekit.scaling._hf_numbers.hf_original_length`); ``factor`` is
        required."""
        require_hf_keys(params, cls.hf_required, name)
        values = {key: value for key, value in params.items() if value is not None}
        return cls.from_params({**values, "original_max_position_embeddings": hf_original_length(params, model, name)})

    def plan_summary(self, rope: RopeConfig, freqs: Frequencies, groups: PairGroups) -> tuple[dict[str, Any], str]:
        short_band, long_band = self.bands()
        summary = (
            f"wavelengths < {short_band:,.0f} kept (pairs {pair_ranges(groups.kept)}), > {long_band:,.0f} divided "
            f"by s (pairs {pair_ranges(groups.interpolated)}), smoothed between (pairs {pair_ranges(groups.blended)})"
        )
        return {"short_wavelength": short_band, "long_wavelength": long_band}, summary


@register_scaling(Llama3Scaling)
def llama3_frequencies(spec: Llama3Scaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """Keep θ_i if λ_i < λ_hi; θ_i/s if λ_i > λ_lo; else blend with smooth = (L0/λ_i − lf)/(hf − lf).

    With lf = hf the bands meet (λ_hi = λ_lo) and the result is a step, as transformers computes it; a pair whose
    wavelength is exactly that edge has no value (transformers gives NaN) and raises ``ValueError``.
    """
    theta = inv_freq(rope.dim, rope.base)
    wavelength = 2 * math.pi / theta
    short_band, long_band = spec.bands()
    if spec.low_freq_factor == spec.high_freq_factor:
        if np.any(wavelength == long_band):
            raise ValueError(
                f"low_freq_factor = high_freq_factor = {spec.low_freq_factor} puts the step at wavelength "
                f"{long_band:g}, which a pair has exactly: its frequency is 0/0 (transformers gives NaN)"
            )
        return Frequencies(np.where(wavelength > long_band, theta / spec.factor, theta), 1.0)
    smooth = (spec.original_max_position_embeddings / wavelength - spec.low_freq_factor) / (
        spec.high_freq_factor - spec.low_freq_factor
    )
    blended = (1 - smooth) * theta / spec.factor + smooth * theta
    scaled = np.where(wavelength > long_band, theta / spec.factor, blended)
    return Frequencies(np.where(wavelength < short_band, theta, scaled), 1.0)
