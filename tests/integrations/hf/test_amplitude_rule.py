"""The amplitude rule a written method keeps from the model's own (closed forms: YaRN's A = 0.1·ln s + 1, DeepSeek's
g(s, mscale)/g(s, mscale_all_dim))."""

from __future__ import annotations

import math

import pytest

from ropekit.integrations.hf.amplitude_rule import amplitude_rule, kept_amplitude, with_kept_amplitude
from ropekit.scaling import LinearScaling, YarnScaling

_X32 = YarnScaling(factor=32.0, original_max_position_embeddings=8192)


def test_a_stated_formula_value_is_the_formula() -> None:
    """OLMo 3 ships YaRN x8 with attention_factor 0.1·ln 8 + 1: YaRN x32 on it gets 0.1·ln 32 + 1."""
    olmo3 = YarnScaling(factor=8.0, original_max_position_embeddings=8192, attention_factor=1.2079441541679836)
    assert amplitude_rule(olmo3) == {}
    assert with_kept_amplitude(olmo3, _X32) == _X32
    assert math.isclose(with_kept_amplitude(olmo3, _X32).resolved_attention_factor(), 0.1 * math.log(32) + 1)


def test_a_fixed_attention_factor_is_kept() -> None:
    """DeepSeek-V4's compress RoPE: YaRN x16 with attention_factor 1 (not 0.1·ln 16 + 1), kept at x32."""
    compress = YarnScaling(factor=16.0, original_max_position_embeddings=65536, attention_factor=1.0)
    assert amplitude_rule(compress) == {"attention_factor": 1.0}
    assert with_kept_amplitude(compress, _X32).resolved_attention_factor() == 1.0


def test_deepseeks_mscale_pair_is_kept_and_follows_the_written_factor() -> None:
    v3 = YarnScaling(factor=40.0, original_max_position_embeddings=4096, mscale=0.707, mscale_all_dim=1.0)
    written = with_kept_amplitude(v3, _X32)
    assert (written.mscale, written.mscale_all_dim, written.attention_factor) == (0.707, 1.0, None)
    wanted = (0.1 * 0.707 * math.log(32) + 1) / (0.1 * math.log(32) + 1)
    assert math.isclose(written.resolved_attention_factor(), wanted, rel_tol=1e-12)


@pytest.mark.parametrize(
    "requested",
    [
        YarnScaling(factor=32.0, original_max_position_embeddings=8192, attention_factor=1.5),
        LinearScaling(factor=32.0),
        None,
    ],
)
def test_the_request_states_its_own_amplitude(requested) -> None:
    """A request with amplitude keys, or of another rope_type (linear: A = 1), or none, keeps nothing."""
    compress = YarnScaling(factor=16.0, original_max_position_embeddings=65536, attention_factor=1.0)
    assert kept_amplitude(compress, requested) == {}
    assert with_kept_amplitude(compress, requested) == requested


def test_a_model_without_a_method_keeps_nothing() -> None:
    assert kept_amplitude(None, _X32) == {} and amplitude_rule(None) == {}
