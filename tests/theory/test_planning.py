"""The extension plan against closed forms (NTK base, YaRN's corrected dims, Llama 3's bands) and direct sums.

Oracles: the papers' formulas written out here (not the registry's code), B_m summed directly with ``np.cos``, and
:func:`base_bound` / :func:`max_context_length` for the bound's numbers.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from ropekit.theory import base_bound, max_context_length, plan, smallest_feasible_base

#: Llama-2-like: d = 128, b = 1e4, extended by s = 4 (short lengths keep the test fast).
HEAD_DIM, BASE, TRAIN, TARGET = 128, 10000.0, 1024, 4096


@functools.cache
def llama_plan():
    return plan(HEAD_DIM, BASE, TRAIN, TARGET, robust=False)


def direct_first_negative(frequencies: np.ndarray, length: int) -> int | None:
    values = np.cos(np.outer(np.arange(length, dtype=np.float64), frequencies)).sum(axis=1)
    negative = np.flatnonzero(values < -1e-9)
    return int(negative[0]) if negative.size else None


def test_factor_and_ntk_base():
    result = llama_plan()
    assert result.factor == 4.0
    ntk = result.method("ntk")
    assert round(ntk.parameters["base"]) == 40890
    assert ntk.parameters["base"] == pytest.approx(BASE * 4.0 ** (128 / 126), rel=1e-13)
    i = np.arange(64)
    np.testing.assert_allclose(ntk.ratio, (ntk.parameters["base"] / BASE) ** (-2 * i / 128), rtol=1e-12)
    assert ntk.kept == [0] and ntk.interpolated == [63]


def test_feasibility_agrees_with_max_context_length():
    result = llama_plan()
    assert result.first_negative == max_context_length(BASE, HEAD_DIM, limit=TARGET) == 1707
    assert not result.clears_bound
    assert result.clears_bound_at_train  # 1707 > 1024
    assert result.smallest_base == pytest.approx(smallest_feasible_base(TARGET, HEAD_DIM), rel=1e-12)
    assert result.robust_base is None and result.islands is None
    assert "below the base bound" in result.lines()[0]


def test_a_base_above_the_bound_clears_it():
    result = plan(HEAD_DIM, 500000.0, 1024, 2048, robust=False)
    assert result.clears_bound and result.first_negative is None
    assert max_context_length(500000.0, HEAD_DIM, limit=2048) is None


def test_suggested_base_is_round_and_feasible_by_direct_summation():
    result = llama_plan()
    assert result.suggested_base >= result.smallest_base
    mantissa = result.suggested_base / 10 ** math.floor(math.log10(result.suggested_base))
    assert round(mantissa, 6) in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
    theta = result.suggested_base ** -(np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    assert direct_first_negative(theta, TARGET) is None


def test_yarn_groups_match_the_corrected_dims():
    """lo = ⌊d·ln(T/(2π·32))/(2 ln b)⌋ = 11, hi = ⌈d·ln(T/2π)/(2 ln b)⌉ = 36: kept i <= lo, interpolated i >= hi."""
    yarn = llama_plan().method("yarn")
    low = math.floor(128 * math.log(TRAIN / (2 * math.pi * 32)) / (2 * math.log(BASE)))
    high = math.ceil(128 * math.log(TRAIN / (2 * math.pi)) / (2 * math.log(BASE)))
    assert (low, high) == (11, 36)
    assert yarn.kept == list(range(low + 1))
    assert yarn.blended == list(range(low + 1, high))
    assert yarn.interpolated == list(range(high, 64))
    assert yarn.parameters["beta_fast"] == 32 and yarn.parameters["beta_slow"] == 1
    assert yarn.attention_factor == pytest.approx(0.1 * math.log(4) + 1)


def test_llama3_bands_by_wavelength():
    """Kept: λ < T/4; divided by s: λ > T; smoothed between (low_freq_factor 1, high_freq_factor 4)."""
    llama3 = llama_plan().method("llama3")
    wavelength = 2 * np.pi * BASE ** (np.arange(0, 128, 2) / 128)
    assert llama3.kept == np.flatnonzero(wavelength < TRAIN / 4).tolist()
    assert llama3.interpolated == np.flatnonzero(wavelength > TRAIN).tolist()
    assert llama3.blended == np.flatnonzero((wavelength >= TRAIN / 4) & (wavelength <= TRAIN)).tolist()
    assert llama3.parameters["low_freq_factor"] == 1 and llama3.parameters["high_freq_factor"] == 4


def test_linear_divides_every_frequency():
    linear = llama_plan().method("linear")
    np.testing.assert_allclose(linear.ratio, 0.25, rtol=1e-14)
    assert linear.interpolated == list(range(64))


def test_method_first_negative_by_direct_summation():
    theta = BASE ** -(np.arange(0, 128, 2) / 128)
    for method in llama_plan().methods:
        assert method.first_negative == direct_first_negative(theta * method.ratio, TARGET), method.name


def test_why_and_periods():
    result = llama_plan()
    assert result.critical_dimension == 2 * math.ceil(64 * math.log(TRAIN / (2 * math.pi)) / math.log(BASE))
    assert result.periodic_dims == result.critical_dimension
    assert any("Liu et al." in line for line in result.why)
    assert any("Men et al." in line for line in result.why)


def test_robust_bound_when_the_target_is_short():
    result = plan(64, BASE, 256, 1024)
    expected = base_bound(1024, 64)
    assert result.robust_base == pytest.approx(expected.robust_base, rel=1e-12)
    assert result.islands == len(expected.islands)


def test_to_dict_is_json():
    data = json.loads(json.dumps(llama_plan().to_dict()))
    assert data["factor"] == 4.0 and data["first_negative"] == 1707 and data["robust_base"] is None
    assert [m["name"] for m in data["methods"]] == ["linear", "ntk", "yarn", "llama3"]


def test_rotary_dim_is_used():
    result = plan(128, BASE, 512, 1024, rotary_dim=64, robust=False)
    assert result.rotary_dim == 64
    assert result.first_negative == max_context_length(BASE, 64, limit=1024)
    assert len(result.method("linear").ratio) == 32


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((128, BASE, 4096, 1024), {}, "target_length"),
        ((128, BASE, 0, 1024), {}, "train_length"),
        ((128, BASE, 1024, -1), {}, "target_length"),
        ((128, 0.0, 1024, 4096), {}, "base"),
        ((128, -5.0, 1024, 4096), {}, "base"),
        ((127, BASE, 1024, 4096), {}, "head_dim"),
        ((0, BASE, 1024, 4096), {}, "head_dim"),
        ((128, BASE, 1024, 4096), {"rotary_dim": 63}, "rotary_dim"),
        ((128, BASE, 1024, 4096), {"rotary_dim": 256}, "rotary_dim"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plan(*args, **kwargs)


@pytest.mark.parametrize("target", [1, 2])
def test_plan_refuses_degenerate_target_lengths(target):
    with pytest.raises(ValueError, match=f"target_length must be an integer >= 3, got {target}"):
        plan(128, 10000.0, 1, target)


def test_plan_refuses_a_robust_flag_that_is_not_a_bool():
    with pytest.raises(TypeError, match="robust must be True, False or None"):
        plan(128, 10000.0, 1024, 4096, robust="no")
