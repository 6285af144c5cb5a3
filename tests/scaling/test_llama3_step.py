"""Llama 3 scaling with ``low_freq_factor == high_freq_factor`` (Llama 4 Scout's shipped RoPE: factor 16, both
factors 1, L0 8192, base 5e5): a step at the one wavelength L0/lf, as transformers computes it.

Oracle: transformers' own ``ROPE_INIT_FUNCTIONS["llama3"]`` and the ``inv_freq`` buffer of its Llama 4 model's
rotary module, on a config built by transformers' Llama 4 config class.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ropekit
from ropekit.scaling import frequencies
from ropekit.scaling.llama3 import Llama3Scaling
from ropekit.scaling.registry import inv_freq

pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from helpers.hf_models import random_hf_config, random_hf_model

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

SCOUT = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 16.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
}


@pytest.mark.parametrize("head_dim", [128, 64])
def test_scout_llama3_equals_transformers(head_dim: int) -> None:
    config = random_hf_config("llama4", head_dim=head_dim, positions=131072, rope_parameters=dict(SCOUT))
    theirs, factor = ROPE_INIT_FUNCTIONS["llama3"](config)
    rope = ropekit.from_hf_config(config)
    ours = frequencies(rope)
    np.testing.assert_allclose(ours.inv_freq, theirs.double().numpy(), rtol=1e-6, atol=0)
    assert ours.attention_factor == factor == 1.0
    wavelength = 2 * math.pi / inv_freq(rope.dim, rope.base)
    divided = wavelength > 8192  # the step: divided by 16 above L0, kept below, nothing blended
    assert divided.any() and (~divided).any()
    np.testing.assert_allclose(ours.inv_freq * np.where(divided, 16.0, 1.0), inv_freq(rope.dim, rope.base))


def test_scout_model_buffer_equals_ropekit() -> None:
    model = random_hf_model("llama4", head_dim=128, positions=131072, rope_parameters=dict(SCOUT))
    buffer = model.model.rotary_emb.inv_freq.double().numpy()
    ours = frequencies(ropekit.from_hf_config(model.config)).inv_freq
    np.testing.assert_allclose(ours, buffer, rtol=1e-6, atol=0)


def test_a_pair_exactly_at_the_step_is_refused() -> None:
    rope = ropekit.RopeConfig(4, base=10000.0)
    edge = 2 * math.pi / inv_freq(4, 10000.0)[1]  # the step at exactly pair 1's wavelength: 0/0 in transformers
    assert 1 / (1 / edge) == edge
    spec = Llama3Scaling(
        factor=4.0, original_max_position_embeddings=1, low_freq_factor=1 / edge, high_freq_factor=1 / edge
    )
    with pytest.raises(ValueError, match="0/0"):
        frequencies(rope.replace(scaling=spec))
