"""Invalid configs raise ``ValueError`` (never a warning) naming the field and the allowed range; the registry.

transformers only logs warnings for most of these; ropekit refuses them. Every check runs with warnings turned
into errors, so a warning instead of the exception would fail the test.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

import ropekit
from ropekit import RopeConfig, RotaryEmbedding, frequencies, from_hf_config
from ropekit.hf_format import to_hf_dict
from ropekit.scaling import (
    SCALINGS,
    BaseChange,
    DynamicScaling,
    Frequencies,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    ScalingConfig,
    YarnScaling,
    get_scaling,
    inv_freq,
    list_scalings,
    make_scaling,
    register_scaling,
    registry,
)


def raises_value_error(build: Callable[[], Any], *fragments: str) -> str:
    """``build()`` raises ValueError (with warnings as errors) whose message contains every fragment."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as info:
            build()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def model(rope_parameters: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"head_dim": 64, "max_position_embeddings": 8192, "rope_parameters": rope_parameters, **top}


LONG = {"original_max_position_embeddings": 4096}
FACTOR_BELOW_ONE = [
    lambda: LinearScaling(factor=0.5),
    lambda: NTKScaling(factor=0.5),
    lambda: DynamicScaling(factor=0.5, **LONG),
    lambda: YarnScaling(factor=0.5, **LONG),
    lambda: Llama3Scaling(factor=0.5, **LONG),
    lambda: LongRopeScaling(short_factor=[1.0], long_factor=[1.0], factor=0.5, **LONG),
    lambda: ProportionalScaling(factor=0.5),
    lambda: from_hf_config(model({"rope_type": "linear", "factor": 0.5})),
    lambda: from_hf_config(model({"type": "dynamic", "factor": 0.5})),
]


@pytest.mark.parametrize("build", FACTOR_BELOW_ONE)
def test_factor_below_one(build: Callable[[], Any]) -> None:
    raises_value_error(build, "factor", ">= 1.0", "0.5")


@pytest.mark.parametrize(
    "build",
    [
        lambda: YarnScaling(factor=4.0, beta_fast=1.0, beta_slow=2.0, **LONG),
        lambda: from_hf_config(model({"rope_type": "yarn", "factor": 4.0, "beta_fast": 1.0, "beta_slow": 2.0})),
        lambda: from_hf_config(model({"rope_type": "yarn", "factor": 4.0, "beta_fast": 0, "beta_slow": 33.0})),
    ],
)
def test_beta_fast_below_beta_slow(build: Callable[[], Any]) -> None:
    raises_value_error(build, "beta_fast must be >= beta_slow", "beta_fast=", "beta_slow=")


@pytest.mark.parametrize("name", ["beta_fast", "beta_slow"])
def test_yarn_betas_are_positive(name: str) -> None:
    raises_value_error(lambda: YarnScaling(factor=4.0, **{name: 0.0}, **LONG), name, "> 0.0")


@pytest.mark.parametrize(("low", "high"), [(4.0, 1.0), (2.0, 1.5)])
def test_llama3_low_freq_factor_above_high(low: float, high: float) -> None:
    def build() -> Llama3Scaling:
        return Llama3Scaling(factor=8.0, low_freq_factor=low, high_freq_factor=high, **LONG)

    raises_value_error(build, "low_freq_factor must be <= high_freq_factor", f"low_freq_factor={low}")
    hf_dict = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": low, "high_freq_factor": high}
    raises_value_error(lambda: from_hf_config(model(hf_dict)), "low_freq_factor must be <= high_freq_factor")


@pytest.mark.parametrize(("name", "length"), [("short_factor", 31), ("long_factor", 33), ("short_factor", 0)])
def test_longrope_list_of_wrong_length(name: str, length: int) -> None:
    factors = {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32, name: [1.5] * length}
    spec = LongRopeScaling(**factors, **LONG)
    raises_value_error(lambda: RopeConfig(64, scaling=spec), name, "rotary_dim/2 = 32", f"got {length}")
    hf_dict = {"rope_type": "longrope", **factors}
    raises_value_error(lambda: from_hf_config(model(hf_dict)), name, "32")


@pytest.mark.parametrize("bad", [0.0, -1.0])
@pytest.mark.parametrize("name", ["short_factor", "long_factor"])
def test_longrope_non_positive_entries(name: str, bad: float) -> None:
    factors = {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32}
    factors[name] = [1.0] * 3 + [bad] + [1.0] * 28
    raises_value_error(lambda: LongRopeScaling(**factors, **LONG), f"{name}[3]", "> 0.0", str(bad))


REQUIRED = [
    ("linear", "factor"),
    ("dynamic", "factor"),
    ("yarn", "factor"),
    ("longrope", "short_factor"),
    ("longrope", "long_factor"),
    ("llama3", "factor"),
    ("llama3", "low_freq_factor"),
    ("llama3", "high_freq_factor"),
]
COMPLETE = {
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 2.0},
    "longrope": {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, **LONG},
}


@pytest.mark.parametrize(("rope_type", "key"), REQUIRED)
@pytest.mark.parametrize("form", ["5.x", "4.x"])
def test_missing_required_key(rope_type: str, key: str, form: str) -> None:
    params = {k: v for k, v in COMPLETE[rope_type].items() if k != key}
    if form == "5.x":
        config = model({"rope_type": rope_type, **params})
    else:
        config = {"head_dim": 64, "max_position_embeddings": 8192, "rope_scaling": {"type": rope_type, **params}}
    assert from_hf_config(model({"rope_type": rope_type, **COMPLETE[rope_type]})).rope_type == rope_type
    raises_value_error(lambda: from_hf_config(config), "missing required key", repr(key), repr(rope_type))


@pytest.mark.parametrize("rope_type", ["linear", "dynamic", "llama3"])
def test_null_factor_is_missing_where_transformers_cannot_derive_it(rope_type: str) -> None:
    params = {"rope_type": rope_type, **COMPLETE[rope_type], "factor": None}
    raises_value_error(lambda: from_hf_config(model(params)), "missing required key", "'factor'")


def test_yarn_null_factor_is_derived_and_must_not_be_below_one() -> None:
    """transformers' quirk: ``factor: null`` means max_position_embeddings / original (here 8192/2048)."""
    params = {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 2048}
    assert from_hf_config(model(params)).scaling.factor == 4.0
    short = model(params, max_position_embeddings=1024)
    raises_value_error(lambda: from_hf_config(short), "yarn factor is null", "1024/2048", ">= 1")


def test_length_keys_missing_everywhere() -> None:
    no_length = {"head_dim": 64, "rope_parameters": {"rope_type": "yarn", "factor": 2.0}}
    raises_value_error(lambda: from_hf_config(no_length), "original_max_position_embeddings")
    dynamic = {"head_dim": 64, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}
    raises_value_error(lambda: from_hf_config(dynamic), "max_position_embeddings")
    raises_value_error(lambda: from_hf_config({"rope_parameters": {}}), "head_dim", "hidden_size")


def test_unknown_rope_type_lists_the_known_ones() -> None:
    message = raises_value_error(lambda: get_scaling("xpos"), "unknown rope_type 'xpos'")
    for name in list_scalings():
        assert name in message
    for alias in ("pi", "su", "abf"):
        assert alias in message
    raises_value_error(lambda: from_hf_config(model({"rope_type": "xpos"})), "unknown rope_type 'xpos'", "yarn")
    raises_value_error(lambda: make_scaling("xpos", factor=2.0), "available:")


def test_unknown_parameter_lists_the_allowed_ones() -> None:
    params = {"rope_type": "linear", "factor": 2.0, "window_size": 64}
    raises_value_error(lambda: from_hf_config(model(params)), "window_size", "allowed", "factor")
    wrong = {"rope_type": "linear", "factor": 2.0, "mrope_section": [16, 24, 24]}  # M-RoPE is known: its sections
    raises_value_error(lambda: from_hf_config(model(wrong)), "mrope sections (16, 24, 24) cover 64 pairs")


@pytest.mark.parametrize(("head_dim", "partial"), [(110, 56 / 110), (100, 0.25), (80, 0.0125)])
def test_odd_truncated_rotary_dim(head_dim: int, partial: float) -> None:
    """transformers truncates ``head_dim * partial`` (110 · 56/110 → 55, 100 · 0.25 → 25) and then computes
    ceil(d/2) frequencies with exponents 2i/d; ropekit refuses odd rotary dims."""
    config = {"head_dim": head_dim, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": partial}}
    raises_value_error(lambda: from_hf_config(config), "partial_rotary_factor", f"head_dim={head_dim}", "even")


@pytest.mark.parametrize("partial", [0.0, -0.5, 1.5])
def test_partial_rotary_factor_range(partial: float) -> None:
    config = {"head_dim": 64, "partial_rotary_factor": partial}
    raises_value_error(lambda: from_hf_config(config), "partial_rotary_factor")


def test_nested_rope_parameters_need_a_layer_type() -> None:
    nested = model(
        {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        }
    )
    raises_value_error(lambda: from_hf_config(nested), "layer_type", "full_attention", "sliding_attention")
    full = from_hf_config(nested, layer_type="full_attention")
    assert full == RopeConfig(64, base=1e6, scaling=LinearScaling(factor=8.0))
    assert from_hf_config(nested, layer_type="sliding_attention") == RopeConfig(64)
    raises_value_error(lambda: from_hf_config(model({"rope_type": "default"}), layer_type="full_attention"))


@pytest.mark.parametrize(
    "build",
    [
        lambda: YarnScaling(factor=2.0, original_max_position_embeddings=0),
        lambda: YarnScaling(factor=2.0, attention_factor=0.0, **LONG),
        lambda: YarnScaling(factor=2.0, mscale=-1.0, **LONG),
        lambda: YarnScaling(factor=2.0, ramp="ntk", **LONG),
        lambda: DynamicScaling(factor=2.0, fixed_seq_len=0, **LONG),
        lambda: BaseChange(base=1.0),
        lambda: RopeConfig(2, scaling=DynamicScaling(factor=2.0, **LONG)),
        lambda: YarnScaling(factor=float("inf"), **LONG),
    ],
)
def test_other_ranges_name_the_field(build: Callable[[], Any]) -> None:
    message = raises_value_error(build)
    assert re.search(r"\w+ must ", message) or "needs" in message


# ---------------------------------------------------------------------------------------------------------------
# The registry


def test_list_scalings_has_every_transformers_type_and_the_extras() -> None:
    names = list_scalings()
    assert set(names) == {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "ntk", "base"}
    assert len(names) == len(set(names))
    for name in names:
        method = get_scaling(name)
        assert method.name == name == method.config_class.rope_type
        assert SCALINGS[name] is method


@pytest.mark.parametrize(("alias", "name"), [("pi", "linear"), ("su", "longrope"), ("abf", "base")])
def test_aliases(alias: str, name: str) -> None:
    assert get_scaling(alias) is get_scaling(name)
    assert alias not in list_scalings()


def test_make_scaling() -> None:
    assert make_scaling("pi", factor=2) == LinearScaling(factor=2.0)
    assert make_scaling("default") is None
    assert make_scaling("yarn", factor=4, original_max_position_embeddings=4096).factor == 4.0
    assert isinstance(make_scaling("linear", factor=2).factor, float)  # HF dicts get floats


def test_registering_an_existing_name_raises() -> None:
    raises_value_error(lambda: register_scaling(LinearScaling)(lambda spec, rope, *, seq_len=None: None), "linear")


@dataclass(frozen=True, kw_only=True)
class PowerBase(ScalingConfig):
    """A toy method: the base raised to the power ``exponent``."""

    rope_type = "toy-power"
    exponent: float = 0.5


@pytest.fixture
def toy_method() -> Iterator[None]:
    """Register a method the way a new file would (one dataclass, one decorator), and remove it afterwards."""

    @register_scaling(PowerBase, aliases=("toy",))
    def toy_frequencies(spec: PowerBase, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
        return Frequencies(inv_freq(rope.dim, rope.base**spec.exponent), 1.0)

    try:
        yield
    finally:
        del registry.SCALINGS["toy-power"]
        del registry.ALIASES["toy"]
    assert "toy-power" not in list_scalings()


def test_adding_a_method_is_one_dataclass_and_one_decorator(toy_method: None) -> None:
    assert "toy-power" in list_scalings()
    assert get_scaling("toy").config_class is PowerBase
    rope = RopeConfig(64, base=1e4, scaling=make_scaling("toy", exponent=0.5))
    np.testing.assert_allclose(frequencies(rope).inv_freq, frequencies(RopeConfig(64, base=100.0)).inv_freq)
    assert from_hf_config(model({"rope_type": "toy-power", "exponent": 0.5})) == rope
    module = RotaryEmbedding(rope)
    cos, _ = module.cos_sin(torch.arange(3))
    torch.testing.assert_close(cos[2, 1].double(), torch.cos(torch.tensor(2 * 100.0 ** (-2 / 64), dtype=torch.float64)))
    assert to_hf_dict(ropekit.RopeConfig(64, scaling=PowerBase()))["rope_type"] == "toy-power"


# ---------------------------------------------------------------- wrong types and huge factors


def test_frequencies_and_get_scaling_refuse_wrong_types():
    import ropekit

    with pytest.raises(TypeError, match="rope must be a RopeConfig, got NoneType"):
        ropekit.frequencies(None)
    with pytest.raises(TypeError, match=r"name must be a rope_type string such as 'yarn', got \['yarn'\] \(list\)"):
        ropekit.get_scaling(["yarn"])


@pytest.mark.parametrize("name", ["linear", "ntk", "yarn", "dynamic"])
def test_huge_factors_are_refused_in_the_library(name):
    from ropekit.scaling import make_scaling

    params = {"factor": 1e308}
    if name in ("yarn", "dynamic"):
        params["original_max_position_embeddings"] = 4096
    with pytest.raises(ValueError, match=r"factor must be <= 1e\+06"):
        make_scaling(name, **params)
