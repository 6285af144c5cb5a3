"""One RoPE per layer type (Gemma 3) inside transformers: ropekit's adapter scales the layer types asked for, each at
its own base, and reads each type's RoPE.

Oracle: transformers itself, on a small random Gemma 3 whose config scales those layer types (logits at 1e-5);
plain RoPE must differ by far more than the tolerance.
"""

from __future__ import annotations

import pytest

from helpers.hf_logits import ATOL, BASE, HEAD_DIM, MATTERS, gemma3, ids_of, llama, logits, max_diff
from ropekit.config import RopeConfig
from ropekit.integrations.hf.patch_rope import apply_scaling
from ropekit.scaling import LinearScaling, YarnScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


GEMMA3_CASES = [
    pytest.param({"rope_type": "linear", "factor": 4.0}, None, LinearScaling(factor=4.0), id="linear-full"),
    pytest.param(
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
        None,
        YarnScaling(factor=4.0, original_max_position_embeddings=32),
        id="yarn-full",
    ),
    pytest.param(
        None,
        {"rope_type": "linear", "factor": 2.0},
        LinearScaling(factor=2.0),
        id="linear-sliding",
    ),
]


@pytest.mark.parametrize(("full", "sliding", "scaling"), GEMMA3_CASES)
def test_per_layer_type_scaling_equals_transformers(full, sliding, scaling) -> None:
    """transformers applies a Gemma 3 config's scaling to the layer types that carry it, each at its own base."""
    reference_model = gemma3(full, sliding)
    ids = ids_of(100)
    reference = logits(reference_model, ids)
    model = gemma3()
    model.load_state_dict(reference_model.state_dict())
    plain = logits(model, ids)
    types = ("full_attention",) if full else ("sliding_attention",)
    apply_scaling(model, scaling, layer_types=None if full else types)
    assert model.ropekit_scaled_layer_types == list(types)
    assert max_diff(logits(model, ids), reference) < ATOL
    assert max_diff(plain, reference) > MATTERS


def test_per_layer_type_rope_is_read_per_type_and_unscaled_types_keep_their_own() -> None:
    from ropekit.integrations.hf.model_config import layer_types_of, rope_of

    model = gemma3()
    assert layer_types_of(model) == ["full_attention", "sliding_attention"]
    assert rope_of(model) == RopeConfig(HEAD_DIM, base=1e6)  # default: the full-attention layers
    assert rope_of(model, "sliding_attention") == RopeConfig(HEAD_DIM, base=1e4)
    ids = ids_of(60)
    reference = logits(model, ids)
    apply_scaling(model, None)  # plain RoPE on full layers, own RoPE on sliding ones: the model itself
    assert max_diff(logits(model, ids), reference) < ATOL


def test_layer_types_are_checked() -> None:
    with pytest.raises(ValueError, match=r"layer_types must name some of \['full_attention', 'sliding_attention'\]"):
        apply_scaling(gemma3(), LinearScaling(factor=2.0), layer_types=("global",))
    with pytest.raises(ValueError, match="one RoPE for all layers"):
        apply_scaling(llama({"rope_type": "default", "rope_theta": BASE}), None, layer_types=("full_attention",))
