"""``ropekit.hf_format``: bad config.json values give a ``ValueError`` naming the key,
disagreements say which value is used, numpy inputs export as JSON, and :func:`to_hf_config` writes a config.json
that reads back.

Oracles: the key the message must name (what the user has to fix), ``json.dumps`` itself, and the round trip
through :func:`from_hf_config`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest

from ropekit import RopeConfig, frequencies, from_hf_config
from ropekit.hf_format import to_hf_config, to_hf_dict
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    YarnScaling,
)


def no_warnings_value_error(config: dict[str, Any], *fragments: str) -> str:
    """``from_hf_config(config)`` raises ``ValueError`` (never another exception, never a warning) with ``fragments``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as info:
            from_hf_config(config)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def yarn(**top: Any) -> dict[str, Any]:
    return {
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
        **top,
    }


# ---------------------------------------------------------------------------------------------------------------
# values of the wrong kind name their key


@pytest.mark.parametrize("value", [None, "10000", "abc", [10000.0], True])
def test_rope_theta_of_the_wrong_kind(value: Any) -> None:
    no_warnings_value_error({"head_dim": 64, "rope_parameters": {"rope_theta": value}}, "rope_theta", repr(value))
    no_warnings_value_error({"head_dim": 64, "rope_theta": value}, "rope_theta")


@pytest.mark.parametrize("value", ["128", "abc", 127.9, -64, [64]])
def test_head_dim_of_the_wrong_kind(value: Any) -> None:
    no_warnings_value_error({"head_dim": value}, "head_dim", repr(value))


def test_whole_floats_are_read_and_fractions_are_not_truncated() -> None:
    assert from_hf_config({"head_dim": 128.0}) == RopeConfig(128)
    assert (
        from_hf_config(yarn(original_max_position_embeddings=2048.0)).scaling.original_max_position_embeddings == 2048
    )
    no_warnings_value_error({"head_dim": 127.9}, "head_dim", "127.9", "not truncated")
    no_warnings_value_error(yarn(original_max_position_embeddings=4096.7), "original_max_position_embeddings", "4096.7")
    params = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    no_warnings_value_error(
        {"head_dim": 64, "max_position_embeddings": 131072.5, "rope_parameters": params}, "max_position_embeddings"
    )


@pytest.mark.parametrize("value", ["4096", "abc", [4096], -1])
def test_original_length_of_the_wrong_kind(value: Any) -> None:
    no_warnings_value_error(yarn(original_max_position_embeddings=value), "original_max_position_embeddings")


def test_null_original_length_falls_back_as_in_transformers() -> None:
    """transformers reads ``original or max_position_embeddings``: null means absent; nothing at all is an error."""
    assert from_hf_config(yarn(original_max_position_embeddings=None)).scaling.original_max_position_embeddings == 2048
    config = yarn(max_position_embeddings=None)
    config["rope_parameters"] = {**config["rope_parameters"], "original_max_position_embeddings": None}
    no_warnings_value_error(config, "original_max_position_embeddings")


@pytest.mark.parametrize("value", ["linear", 4.0, ["linear"]])
@pytest.mark.parametrize("key", ["rope_scaling", "rope_parameters"])
def test_rope_dict_that_is_not_a_dict(key: str, value: Any) -> None:
    no_warnings_value_error({"head_dim": 64, key: value}, key, "must be a dict", repr(value))


@pytest.mark.parametrize("value", [None, 3, ["yarn"]])
def test_rope_type_that_is_not_a_string(value: Any) -> None:
    no_warnings_value_error({"head_dim": 64, "rope_parameters": {"rope_type": value}}, "rope_type", repr(value))


def test_method_value_of_the_wrong_kind_is_a_value_error_naming_the_key() -> None:
    config = {"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factor": "4"}}
    no_warnings_value_error(config, "rope_parameters", "factor", "'4'")


def test_longrope_with_original_length_one() -> None:
    """ln(1) = 0 in A = sqrt(1 + ln s / ln L0): transformers divides by zero; ropekit names the key."""
    params = {"rope_type": "longrope", "short_factor": [1.0] * 32, "long_factor": [2.0] * 32}
    config = {"head_dim": 64, "max_position_embeddings": 4096, "original_max_position_embeddings": 1}
    no_warnings_value_error({**config, "rope_parameters": params}, "original_max_position_embeddings", ">= 2", "got 1")
    explicit = from_hf_config({**config, "rope_parameters": {**params, "attention_factor": 1.2}})
    assert explicit.scaling.resolved_attention_factor() == 1.2
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        LongRopeScaling(short_factor=[1.0], long_factor=[1.0], original_max_position_embeddings=1, factor=2.0)


def test_disagreeing_rope_scaling_and_rope_parameters_say_which_is_used() -> None:
    config = {
        "head_dim": 64,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "rope_parameters": {"rope_type": "linear", "factor": 4.0},
    }
    with pytest.warns(UserWarning, match=r"disagree on \['factor'\]; using rope_scaling"):
        assert from_hf_config(config) == RopeConfig(64, scaling=LinearScaling(factor=2.0))
    same = {**config, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # agreeing dicts (4.x "type" vs 5.x "rope_type") are silent
        assert from_hf_config(same) == RopeConfig(64, scaling=LinearScaling(factor=2.0))


# ---------------------------------------------------------------------------------------------------------------
# Odd values


def test_top_level_rope_theta_disagreeing_with_the_rope_dict_warns_which_is_used() -> None:
    config = {"head_dim": 64, "rope_theta": 10000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    with pytest.warns(UserWarning, match=r"rope_theta=10000.0 at the top level .* using 500000.0 from rope_parameters"):
        assert from_hf_config(config).base == 5e5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_hf_config({**config, "rope_theta": 5e5}).base == 5e5
        assert from_hf_config({"head_dim": 64, "rope_theta": 5e5}).base == 5e5


def test_a_top_level_base_beside_per_layer_type_dicts_is_not_a_disagreement() -> None:
    """DeepSeek-V4 keeps its ``main`` base at the top level (10,000) and ``compress``'s in its own dict (160,000):
    reading ``compress`` uses its dict's base (transformers' rule) without a warning, since the top-level value is
    another layer type's, not a rival of this one."""
    config = {
        "head_dim": 64,
        "rope_theta": 10000.0,
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0},
            "compress": {"rope_type": "default", "rope_theta": 160000.0},
        },
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_hf_config(config, layer_type="compress").base == 160000.0
        assert from_hf_config(config, layer_type="main").base == 10000.0


def test_hidden_size_not_divisible_by_heads_needs_head_dim() -> None:
    no_warnings_value_error(
        {"hidden_size": 4097, "num_attention_heads": 32}, "hidden_size=4097", "num_attention_heads=32", "head_dim"
    )
    assert from_hf_config({"hidden_size": 4097, "num_attention_heads": 32, "head_dim": 128}).head_dim == 128
    assert from_hf_config({"hidden_size": 4096, "num_attention_heads": 32}).head_dim == 128


# ---------------------------------------------------------------------------------------------------------------
# numpy inputs export as plain JSON


NUMPY_CONFIGS = [
    RopeConfig(np.int64(128), base=np.float64(5e5), rotary_dim=np.int32(64)),
    RopeConfig(128, scaling=LinearScaling(factor=np.float32(4.0))),
    RopeConfig(128, scaling=NTKScaling(factor=np.float64(4.0))),
    RopeConfig(128, scaling=BaseChange(base=np.float64(5e5))),
    RopeConfig(128, scaling=DynamicScaling(factor=np.int64(2), original_max_position_embeddings=np.int64(4096))),
    RopeConfig(
        128,
        scaling=YarnScaling(
            factor=np.float64(4.0),
            original_max_position_embeddings=np.int64(4096),
            beta_fast=np.int64(32),
            mscale=np.float64(1.0),
            mscale_all_dim=np.float64(1.0),
            attention_factor=np.float32(1.25),
        ),
    ),
    RopeConfig(
        128,
        scaling=Llama3Scaling(
            factor=np.int64(8), original_max_position_embeddings=np.int64(4096), high_freq_factor=np.float32(4.0)
        ),
    ),
    RopeConfig(
        128,
        scaling=LongRopeScaling(
            short_factor=np.ones(64),
            long_factor=np.full(64, 2.0, dtype=np.float32),
            original_max_position_embeddings=np.int64(4096),
            factor=np.float64(8.0),
        ),
    ),
    RopeConfig(128, rotary_dim=64, scaling=ProportionalScaling(factor=np.float64(2.0))),
]


@pytest.mark.parametrize("rope", NUMPY_CONFIGS, ids=lambda rope: rope.rope_type)
def test_numpy_inputs_export_as_plain_json(rope: RopeConfig) -> None:
    exported = to_hf_dict(rope)
    text = json.dumps(exported)  # raised "Object of type int64 is not JSON serializable" before
    assert json.loads(text) == exported

    def plain(value: Any) -> bool:
        if isinstance(value, list):
            return all(plain(item) for item in value)
        return type(value) in (int, float, str, bool)

    assert all(plain(value) for value in exported.values()), exported
    model = {"head_dim": 128, "max_position_embeddings": 65536, "rope_parameters": json.loads(text)}
    if isinstance(rope.scaling, DynamicScaling):
        model["max_position_embeddings"] = 4096
    back = from_hf_config(model)
    np.testing.assert_allclose(frequencies(back).inv_freq, frequencies(rope).inv_freq, rtol=1e-15)
    assert frequencies(back).attention_factor == pytest.approx(frequencies(rope).attention_factor, rel=1e-15)


# ---------------------------------------------------------------------------------------------------------------
# to_hf_config: a whole config.json


LLAMA_4X = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    "vocab_size": 128256,
}


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        YarnScaling(factor=4.0, original_max_position_embeddings=8192),
        DynamicScaling(factor=4.0, original_max_position_embeddings=8192),
        LinearScaling(factor=4.0),
    ],
    ids=lambda scaling: "default" if scaling is None else scaling.rope_type,
)
def test_to_hf_config_reads_back_and_leaves_the_input_alone(scaling: Any) -> None:
    rope = RopeConfig(128, base=500000.0, scaling=scaling)
    before = json.dumps(LLAMA_4X, sort_keys=True)
    written = to_hf_config(rope, LLAMA_4X, max_position_embeddings=32768)
    assert json.dumps(LLAMA_4X, sort_keys=True) == before
    assert "rope_scaling" not in written and written["rope_parameters"] == to_hf_dict(rope)
    assert written["vocab_size"] == 128256 and written["rope_theta"] == 500000.0
    dynamic = isinstance(scaling, DynamicScaling)
    assert written["max_position_embeddings"] == (8192 if dynamic else 32768)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_hf_config(json.loads(json.dumps(written))) == rope


def test_to_hf_config_updates_top_level_restatements_and_checks_the_head_size() -> None:
    rope = RopeConfig(128, base=1e6, rotary_dim=32)
    neox = {"hidden_size": 2048, "num_attention_heads": 16, "rotary_pct": 0.25, "rotary_emb_base": 1e4}
    written = to_hf_config(rope, neox)
    assert written["rotary_emb_base"] == 1e6 and written["rotary_pct"] == 0.25
    assert from_hf_config(written) == rope
    assert to_hf_config(RopeConfig(64)) == {
        "head_dim": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
    }
    with pytest.raises(ValueError, match=r"head size 128.*64"):
        to_hf_config(RopeConfig(64), neox)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        to_hf_config(rope, neox, max_position_embeddings=4096.5)


def test_to_hf_config_replaces_one_layer_type_of_a_nested_config() -> None:
    gemma = {
        "head_dim": 256,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    rope = RopeConfig(256, base=1e6, scaling=LinearScaling(factor=8.0))
    written = to_hf_config(rope, gemma, layer_type="full_attention")
    assert from_hf_config(written, layer_type="full_attention") == rope
    assert written["rope_parameters"]["sliding_attention"] == gemma["rope_parameters"]["sliding_attention"]
    with pytest.raises(ValueError, match="nested by layer type"):
        to_hf_config(rope, gemma)


def test_hf_format_never_imports_transformers() -> None:
    code = "import sys, ropekit.hf_format; print('transformers' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_language_models_rope_is_read_from_text_config_where_both_have_one() -> None:
    """transformers builds a multimodal model's language model from ``text_config`` (Fuyu's Persimmon), whatever
    base the top level keeps: cos/sin of p·10000^(−2i/8) for its 8 rotating dims, not the top level's 25,000."""
    config = {
        "model_type": "fuyu",
        "rope_parameters": {"rope_type": "default", "rope_theta": 25000.0},
        "hidden_size": 64,
        "num_attention_heads": 4,
        "text_config": {
            "model_type": "persimmon",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        },
    }
    rope = from_hf_config(config)
    assert (rope.base, rope.rotary_dim, rope.head_dim) == (10000.0, 8, 16)


def test_a_rope_dict_may_carry_the_models_length_as_ministral_3s_does() -> None:
    """Ministral 3's config class copies max_position_embeddings into its YaRN dict; transformers' validation
    skips it (``ignore_keys_at_rope_validation``) and no rope function reads it: neither does ropekit."""
    params = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 16384}
    config = {"model_type": "ministral3", "head_dim": 128, "max_position_embeddings": 262144}
    plain = from_hf_config({**config, "rope_parameters": params})
    copied = from_hf_config({**config, "rope_parameters": {**params, "max_position_embeddings": 262144}})
    assert copied == plain and copied.scaling.factor == 16.0
