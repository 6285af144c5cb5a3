"""The NoPE layout (:func:`ropekit.integrations.hf.rope_layers.rope_layout`) against transformers' own reading: the
``use_rope`` flag of each attention module of a random SmolLM3 / Llama 4 built from the same config, from the
config object, its ``to_dict()`` and a hand-written ``config.json`` that leaves the defaults out."""

from __future__ import annotations

import pytest

from helpers.hf_models import random_hf_model
from ropekit.integrations.hf.rope_layers import RopeLayout, layer_uses_rope, rope_layout

pytest.importorskip("transformers")
pytestmark = pytest.mark.hf

SMALL = {
    "vocab_size": 101,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
LLAMA4 = {"intermediate_size_mlp": 48, "num_local_experts": 2, "attention_chunk_size": 16}


def transformers_flags(model) -> list[bool]:
    return [bool(layer.self_attn.use_rope) for layer in model.model.layers]


def build(kind: str, **config):
    """A random ``kind`` model of :data:`SMALL` sizes and ``config`` (no length: transformers' default), and its
    config."""
    model = random_hf_model(kind, positions=None, **SMALL, **(LLAMA4 if kind == "llama4" else {}), **config)
    return model.config, model


CASES = [
    ("smollm3", {"num_hidden_layers": 8}),  # the default: every 4th layer NoPE
    ("smollm3", {"num_hidden_layers": 6, "no_rope_layer_interval": 3}),
    ("smollm3", {"num_hidden_layers": 4, "no_rope_layers": [0, 1, 0, 1]}),
    ("smollm3", {"num_hidden_layers": 3, "no_rope_layers": [1, 1, 1, 0, 0]}),  # longer than the layers: a prefix
    ("llama4", {"num_hidden_layers": 5}),
    ("llama4", {"num_hidden_layers": 4, "no_rope_layers": [1, 0, 0, 1]}),
    ("llama4", {"num_hidden_layers": 4, "no_rope_layers": []}),  # empty: Llama 4's default
]


@pytest.mark.parametrize(("kind", "config"), CASES)
def test_the_layout_is_what_transformers_builds(kind: str, config: dict) -> None:
    settings, model = build(kind, **config)
    expected = transformers_flags(model)
    for source in (settings, model, settings.to_dict()):
        layout = rope_layout(source)
        assert list(layout.uses_rope) == expected
        assert layout.nope_layers == [i for i, rope in enumerate(expected) if not rope]
        assert layout.rope_layers == [i for i, rope in enumerate(expected) if rope]
    raw = {"model_type": settings.model_type, **SMALL, **config}  # a config.json that leaves the defaults out
    assert list(rope_layout(raw).uses_rope) == expected


def test_a_multimodal_llama4_config_is_read_from_its_text_config() -> None:
    from transformers import Llama4Config

    config = Llama4Config(text_config={**SMALL, **LLAMA4, "num_hidden_layers": 4, "no_rope_layers": [1, 1, 0, 0]})
    assert rope_layout(config).nope_layers == [2, 3]
    assert rope_layout(config.to_dict()).nope_layers == [2, 3]


def test_other_models_rotate_every_layer(llama_config) -> None:
    assert rope_layout(llama_config()) is None
    assert rope_layout({"model_type": "llama", "no_rope_layers": [0, 0]}) is None  # only SmolLM3 and Llama 4 read it
    assert layer_uses_rope(None, 3) and not layer_uses_rope(RopeLayout((True, False)), 1)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"no_rope_layers": [1, 2, 1]}, "no_rope_layers must list 1"),
        ({"no_rope_layers": [1, 1]}, "no_rope_layers must list 1"),
        ({"no_rope_layers": "1,0,1"}, "no_rope_layers must list 1"),
        ({"no_rope_layer_interval": 0}, "no_rope_layer_interval must be a positive integer"),
        ({"num_hidden_layers": None}, "num_hidden_layers must be a positive integer"),
    ],
)
def test_bad_layouts_are_refused_by_name(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rope_layout({"model_type": "smollm3", "num_hidden_layers": 3, **config})


def test_the_layout_describes_itself() -> None:
    layout = RopeLayout((True, True, True, False, True, True, True, False))
    assert layout.describe() == "2 of 8 layers take no RoPE (NoPE: layers 3, 7); the other 6 rotate q and k"
    assert layout.to_dict() == {"layers": 8, "rope_layers": [0, 1, 2, 4, 5, 6], "nope_layers": [3, 7]}
    assert RopeLayout((True,)).describe() == "all 1 layers apply RoPE"
