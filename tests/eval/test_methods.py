"""Which scaling each evaluated method gets: oracles are the definitions (s = length / original length, at
least 1), the registry's own config classes, and the frequencies they imply."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ropekit.config import RopeConfig
from ropekit.eval.methods import applied_factor, default_methods, describe_scaling, factor_for, scaling_for
from ropekit.scaling import (
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    YarnScaling,
    frequencies,
    inv_freq,
)

EXAMPLES = settings(max_examples=100, derandomize=True, database=None, deadline=None)


@EXAMPLES
@given(length=st.integers(1, 1 << 20), train_length=st.integers(1, 1 << 16))
def test_auto_factor_is_length_over_training_length_at_least_one(length: int, train_length: int) -> None:
    factor = factor_for(length, train_length, "auto")
    assert factor >= 1.0
    if length >= train_length:
        assert factor * train_length == pytest.approx(length, rel=1e-12)
    else:
        assert factor == 1.0


def test_explicit_factor_is_used_as_given() -> None:
    assert factor_for(8192, 1024, 3) == 3.0
    assert factor_for(512, 1024, 2.5) == 2.5


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("linear", LinearScaling(factor=4.0)),
        ("ntk", NTKScaling(factor=4.0)),
        ("dynamic", DynamicScaling(factor=4.0, original_max_position_embeddings=256)),
        ("yarn", YarnScaling(factor=4.0, original_max_position_embeddings=256)),
        ("llama3", Llama3Scaling(factor=4.0, original_max_position_embeddings=256)),
    ],
)
def test_each_method_gets_the_factor_and_the_training_length(method: str, expected) -> None:
    assert scaling_for(method, factor=4.0, train_length=256) == expected


def test_linear_at_auto_factor_divides_every_frequency_by_s() -> None:
    rope = RopeConfig(64, base=10000.0)
    spec = scaling_for("linear", factor=factor_for(2048, 256, "auto"), train_length=256)
    assert frequencies(rope.replace(scaling=spec)).inv_freq == pytest.approx(inv_freq(64, 10000.0) / 8, rel=1e-15)


def test_factor_below_one_is_clamped_so_short_lengths_mean_no_change() -> None:
    spec = scaling_for("linear", factor=0.5, train_length=256)
    assert spec.factor == 1.0
    rope = RopeConfig(32)
    np.testing.assert_array_equal(frequencies(rope.replace(scaling=spec)).inv_freq, inv_freq(32, 10000.0))


def test_none_is_plain_rope_and_native_is_the_models_own() -> None:
    native = LinearScaling(factor=2.0)
    assert scaling_for("none", factor=4.0, train_length=256, native=native) is None
    assert scaling_for("native", factor=4.0, train_length=256, native=native) is native


def test_longrope_without_native_factors_raises_lookup_error() -> None:
    with pytest.raises(LookupError, match="longrope"):
        scaling_for("longrope", factor=4.0, train_length=256)
    with pytest.raises(LookupError, match="longrope"):
        scaling_for("longrope", factor=4.0, train_length=256, native=LinearScaling(factor=2.0))


def test_longrope_reuses_the_native_factors_with_the_new_factor() -> None:
    native = LongRopeScaling(
        short_factor=(1.0, 1.5), long_factor=(2.0, 4.0), original_max_position_embeddings=128, factor=2.0
    )
    spec = scaling_for("longrope", factor=8.0, train_length=128, native=native)
    assert spec == dataclasses.replace(native, factor=8.0)
    assert scaling_for("longrope", factor=0.5, train_length=128, native=native).factor == 1.0


def test_a_method_needing_parameters_the_sweep_cannot_derive_raises_lookup_error() -> None:
    with pytest.raises(LookupError, match="base"):
        scaling_for("base", factor=4.0, train_length=256)
    assert scaling_for("base", factor=4.0, train_length=256, extra={"base": 5e5}).base == 5e5


def test_unknown_method_raises_value_error() -> None:
    with pytest.raises(ValueError, match="unknown rope_type"):
        scaling_for("rotary-magic", factor=2.0, train_length=256)


def test_every_default_method_is_in_the_registry_or_plain() -> None:
    assert default_methods() == ("none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "self_extend")
    for method in default_methods():
        try:
            scaling_for(method, factor=2.0, train_length=64)
        except LookupError:
            assert method == "longrope"


def test_describe_scaling_is_json_ready_and_summarises_factor_lists() -> None:
    assert describe_scaling(None) == {"rope_type": "default"}
    yarn = describe_scaling(YarnScaling(factor=4.0, original_max_position_embeddings=256))
    assert yarn["rope_type"] == "yarn" and yarn["factor"] == 4.0 and yarn["original_max_position_embeddings"] == 256
    longrope = describe_scaling(
        LongRopeScaling(short_factor=(1.0,) * 8, long_factor=(2.0,) * 8, original_max_position_embeddings=64)
    )
    assert longrope["short_factor"] == "<8 values>" and longrope["long_factor"] == "<8 values>"


def test_applied_factor_is_the_one_the_scaling_uses():
    """What a row records: plain RoPE is s = 1, a factored method its own factor, ``base`` has none."""
    assert applied_factor(scaling_for("none", factor=4.0, train_length=256)) == 1.0
    assert applied_factor(scaling_for("yarn", factor=4.0, train_length=256)) == 4.0
    assert applied_factor(scaling_for("base", factor=4.0, train_length=256, extra={"base": 5e5})) is None
