"""Tests of ropekit.config.RopeConfig and the shared argument checks in ropekit._validate."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

from ropekit import RopeConfig, from_hf_config
from ropekit._validate import require_choice, require_float, require_int
from ropekit.hf_format import to_hf_dict
from ropekit.scaling import Frequencies, LinearScaling, LongRopeScaling, YarnScaling, frequencies, inv_freq


def test_defaults_and_derived_fields():
    config = RopeConfig(128)
    assert (config.head_dim, config.base, config.rotary_dim, config.interleaved, config.scaling) == (
        128,
        10000.0,
        None,
        False,
        None,
    )
    assert config.dim == 128 and config.rope_type == "default"
    partial = RopeConfig(128, rotary_dim=32, interleaved=True)
    assert partial.dim == 32 and partial.interleaved
    scaled = RopeConfig(64, scaling=LinearScaling(factor=2.0))
    assert scaled.rope_type == "linear"


def test_frozen_and_keyword_only():
    config = RopeConfig(64)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.base = 5.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        RopeConfig(64, 10000.0)  # type: ignore[misc]
    assert hash(config) == hash(RopeConfig(64)) and config == RopeConfig(64, base=1e4)


def test_numbers_are_stored_as_plain_python_types():
    config = RopeConfig(np.int64(64), base=np.float32(500000.0), rotary_dim=np.int32(32))
    assert type(config.head_dim) is int and type(config.base) is float and type(config.rotary_dim) is int
    assert config == RopeConfig(64, base=500000.0, rotary_dim=32)
    assert RopeConfig(64, base=Fraction(10001, 1)).base == 10001.0


def test_frequencies_of_a_config_are_the_closed_form():
    """inv_freq[i] = b^(−2i/d) over rotary_dim, not head_dim (FACTS: partial rotary pitfall)."""
    config = RopeConfig(128, base=500000.0, rotary_dim=64)
    freqs = frequencies(config)
    assert isinstance(freqs, Frequencies) and freqs.attention_factor == 1.0
    assert freqs.inv_freq.dtype == np.float64 and freqs.inv_freq.shape == (32,)
    expected = np.array([500000.0 ** (-2 * i / 64) for i in range(32)])
    np.testing.assert_allclose(freqs.inv_freq, expected, rtol=1e-15, atol=0)
    np.testing.assert_allclose(inv_freq(64, 500000.0), expected, rtol=1e-15, atol=0)
    assert freqs.inv_freq[0] == 1.0
    np.testing.assert_allclose(freqs.wavelengths, 2 * math.pi / expected, rtol=1e-15)


def test_replace_validates_again():
    config = RopeConfig(64)
    assert config.replace(base=500.0).base == 500.0
    with pytest.raises(ValueError, match=r"base must be > 1.0, got 1"):
        config.replace(base=1)
    with pytest.raises(ValueError, match=r"rotary_dim must be <= head_dim \(64\), got 66"):
        config.replace(rotary_dim=66)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim": 0}, ValueError, r"head_dim must be an integer >= 1, got 0"),
        ({"head_dim": 64.0}, TypeError, r"head_dim must be an integer, got 64.0 \(float\)"),
        ({"head_dim": True}, TypeError, r"head_dim must be an integer, got True \(bool\)"),
        ({"head_dim": 7}, ValueError, r"rotary_dim must be even \(dims rotate in pairs\), got 7 \(from head_dim\)"),
        ({"head_dim": 64, "rotary_dim": 31}, ValueError, r"rotary_dim must be even \(dims rotate in pairs\), got 31"),
        ({"head_dim": 64, "rotary_dim": 128}, ValueError, r"rotary_dim must be <= head_dim \(64\), got 128"),
        ({"head_dim": 64, "rotary_dim": 0}, ValueError, r"rotary_dim must be an integer >= 2, got 0"),
        ({"head_dim": 64, "rotary_dim": 32.0}, TypeError, r"rotary_dim must be an integer, got 32.0"),
        ({"head_dim": 64, "base": 1.0}, ValueError, r"base must be > 1.0, got 1.0"),
        ({"head_dim": 64, "base": 0}, ValueError, r"base must be > 1.0, got 0"),
        ({"head_dim": 64, "base": -10000.0}, ValueError, r"base must be > 1.0, got -10000.0"),
        ({"head_dim": 64, "base": float("nan")}, ValueError, r"base must be finite, got nan"),
        ({"head_dim": 64, "base": float("inf")}, ValueError, r"base must be finite, got inf"),
        ({"head_dim": 64, "base": -math.inf}, ValueError, r"base must be finite, got -inf"),
        ({"head_dim": 64, "base": 10**400}, ValueError, r"base must be finite, got 1000000"),
        ({"head_dim": 64, "base": "10000"}, TypeError, r"base must be a real number, got '10000' \(str\)"),
        ({"head_dim": 64, "base": None}, TypeError, r"base must be a real number, got None"),
        ({"head_dim": 64, "interleaved": 1}, TypeError, r"interleaved must be a bool, got 1"),
        (
            {"head_dim": 64, "scaling": {"rope_type": "linear"}},
            TypeError,
            r"scaling must be a config .*got \{'rope_type'",
        ),
        (
            {
                "head_dim": 64,
                "scaling": LongRopeScaling(
                    short_factor=[1.0] * 3, long_factor=[1.0] * 3, original_max_position_embeddings=8
                ),
            },
            ValueError,
            r"short_factor must have rotary_dim/2 = 32 entries, got 3",
        ),
    ],
)
def test_invalid_config_raises_naming_field_and_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        RopeConfig(**kwargs)


def test_never_an_assertion_error_for_odd_values():
    """Every bad value is a ValueError or TypeError naming the field (never an assert or an OverflowError)."""
    junk = [None, "x", [], {}, complex(1, 1), float("nan"), float("inf"), 10**400, -1, 0]
    bad = {
        "head_dim": [*junk[:7], 1.5, True, -1, 0, 3],
        "base": [*junk, 1, 0.999, True, np.nan, -np.inf],
        "rotary_dim": [*junk[1:], 1.5, True, 66, 33, 1],
    }
    for field, values in bad.items():
        for value in values:
            with pytest.raises((ValueError, TypeError), match=field):
                RopeConfig(**{"head_dim": 64, field: value})


def test_to_hf_dict_and_back():
    config = RopeConfig(128, base=500000.0, rotary_dim=64)
    params = to_hf_dict(config)
    assert params == {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5}
    assert from_hf_config({"head_dim": 128, "rope_parameters": params, "max_position_embeddings": 4096}) == config
    yarn = RopeConfig(64, scaling=YarnScaling(factor=4.0, original_max_position_embeddings=2048))
    assert to_hf_dict(yarn)["rope_type"] == "yarn" and to_hf_dict(yarn)["factor"] == 4.0


# ---------------------------------------------------------------- ropekit._validate


def test_require_int():
    assert require_int("n", 5) == 5 and type(require_int("n", np.int16(5))) is int
    assert require_int("n", 3, minimum=3) == 3
    with pytest.raises(ValueError, match=r"n must be an integer >= 4, got 3"):
        require_int("n", 3, minimum=4)
    for value, shown in [(3.0, r"3.0 \(float\)"), (False, r"False \(bool\)"), ("3", r"'3' \(str\)"), (None, "None")]:
        with pytest.raises(TypeError, match=rf"n must be an integer, got {shown}"):
            require_int("n", value)


def test_require_float():
    assert require_float("x", 2) == 2.0 and type(require_float("x", np.float32(0.5))) is float
    assert require_float("x", 1.0, at_least=1.0) == 1.0
    with pytest.raises(ValueError, match=r"x must be > 1.0, got 1.0"):
        require_float("x", 1.0, above=1.0)
    with pytest.raises(ValueError, match=r"x must be >= 0.0, got -0.5"):
        require_float("x", -0.5, at_least=0.0)
    for value in (float("nan"), float("inf"), -float("inf"), 10**400):
        with pytest.raises(ValueError, match=r"x must be finite"):
            require_float("x", value)
    for value in (True, "1", None, 1j, [1.0]):
        with pytest.raises(TypeError, match=r"x must be a real number, got"):
            require_float("x", value)


def test_require_choice():
    assert require_choice("ramp", "paper", ("paper", "transformers")) == "paper"
    with pytest.raises(ValueError, match=r"ramp must be one of 'paper', 'transformers'; got 'linear'"):
        require_choice("ramp", "linear", ("paper", "transformers"))
    with pytest.raises(ValueError, match=r"ramp must be one of .*; got \['paper'\]"):
        require_choice("ramp", ["paper"], ("paper", "transformers"))
