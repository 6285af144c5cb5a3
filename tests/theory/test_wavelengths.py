"""Wavelengths, periodic pairs, critical dimension and extrapolation limit against published numbers and closed forms.

Oracles: Llama 2 (92 dims complete a period within 4096 tokens; with base 500 all 128, longest 2850.9),
Liu et al.'s formulas written out here, and the NTK-aware base 40,890 (b·s^(d/(d−2)) for b = 1e4, s = 4, d = 128).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.config import RopeConfig
from ropekit.scaling import LinearScaling, NTKScaling, YarnScaling, frequencies
from ropekit.theory import (
    critical_dimension,
    extrapolation_limit,
    pair_wavelengths,
    periodic_pairs,
    wavelength_report,
)

LLAMA2 = RopeConfig(128, base=10000.0)


def test_llama2_pairs_completing_a_period():
    wavelengths = pair_wavelengths(LLAMA2)
    assert wavelengths[45] == pytest.approx(4080.2, abs=0.05)
    assert wavelengths[46] == pytest.approx(4711.7, abs=0.05)
    assert 2 * periodic_pairs(wavelengths, 4096).sum() == 92


def test_base_500_every_pair_completes_a_period():
    wavelengths = pair_wavelengths(RopeConfig(128, base=500.0))
    assert wavelengths.max() == pytest.approx(2850.9, abs=0.05)
    assert periodic_pairs(wavelengths, 4096).all()


def test_wavelengths_are_two_pi_base_power():
    expected = 2 * np.pi * 10000.0 ** (np.arange(0, 128, 2) / 128)
    np.testing.assert_allclose(pair_wavelengths(LLAMA2), expected, rtol=1e-13)


def test_critical_dimension_and_extrapolation_limit_of_llama2():
    """d_extra = 2⌈(d/2)·log_b(T/2π)⌉ = 92 and T_extra = 2π·b^(92/128) = λ_46 ≈ 4711.7."""
    expected = 2 * math.ceil(64 * math.log(4096 / (2 * math.pi)) / math.log(10000.0))
    assert expected == 92
    assert critical_dimension(128, 10000.0, 4096) == 92
    assert extrapolation_limit(128, 10000.0, 4096) == pytest.approx(2 * math.pi * 10000.0 ** (92 / 128), rel=1e-13)
    assert extrapolation_limit(128, 10000.0, 4096) == pytest.approx(4711.7, abs=0.05)


def test_critical_dimension_equals_twice_the_periodic_pairs():
    for base in (500.0, 10000.0, 500000.0, 1e6):
        for length in (512, 4096, 8192, 32768):
            periodic = periodic_pairs(pair_wavelengths(RopeConfig(128, base=base)), length)
            assert critical_dimension(128, base, length) == 2 * periodic.sum(), (base, length)


def test_ntk_aware_base_from_the_registry():
    """b' = b·s^(d/(d−2)) = 40,890 for s = 4, d = 128, b = 1e4: θ_1 = b'^(−2/d) recovers b'."""
    freqs = frequencies(LLAMA2.replace(scaling=NTKScaling(factor=4.0)))
    new_base = freqs.inv_freq[1] ** (-128 / 2)
    assert round(new_base) == 40890
    assert freqs.inv_freq[-1] == pytest.approx(frequencies(LLAMA2).inv_freq[-1] / 4, rel=1e-12)


def test_report_after_linear_scaling():
    report = wavelength_report(LLAMA2.replace(scaling=LinearScaling(factor=4.0)), 4096)
    np.testing.assert_allclose(report.ratio, 0.25, rtol=1e-13)
    np.testing.assert_allclose(report.scaled_wavelengths, 4 * report.wavelengths, rtol=1e-13)
    assert report.periodic_dims == 92
    assert report.scaled_periodic_dims == 2 * int((4 * report.wavelengths <= 4096).sum())
    assert report.attention_factor == 1.0


def test_report_after_yarn_keeps_fast_pairs():
    spec = YarnScaling(factor=4.0, original_max_position_embeddings=4096)
    report = wavelength_report(LLAMA2.replace(scaling=spec), 4096)
    assert report.ratio[0] == 1.0
    assert report.ratio[-1] == pytest.approx(0.25, rel=1e-13)
    assert report.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1)


def test_periodic_pairs_rejects_bad_length():
    with pytest.raises(ValueError, match="length"):
        periodic_pairs(np.ones(4), 0)


def test_wavelength_report_proportional_partial_compares_over_the_whole_head():
    """Proportional RoPE with rotary_dim < head_dim has head_dim/2 frequencies (the last ones zero)."""
    from ropekit.scaling import make_scaling

    rope = RopeConfig(128, rotary_dim=64, scaling=make_scaling("proportional", factor=2.0))
    report = wavelength_report(rope, 4096)
    theta = 10000.0 ** (-np.arange(0, 128, 2) / 128)  # closed form over the whole head
    np.testing.assert_allclose(report.wavelengths, 2 * np.pi / theta, rtol=1e-14)
    np.testing.assert_allclose(report.ratio[:32], 0.5, rtol=1e-14)  # rotating pairs: wavelengths doubled
    assert np.all(report.ratio[32:] == 0)  # pairs that do not rotate: infinite scaled wavelength
