"""Which layer's RoPE the engines are compared on (``transformers_ref.compared_layer``), read from transformers' own
config of the folder. The oracle: the layer types transformers' config class gives each layer."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")


def _folder(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_hybrid_with_one_rope_dict_is_compared_on_its_first_attention_layer(tmp_path) -> None:
    """Qwen3-Next as it ships (three Gated DeltaNet layers, then attention): layer 0 has no attention, so the first
    full-attention layer is compared, with the one dict every layer shares."""
    from ropekit.engines.transformers_ref import compared_layer, rope_parameters

    rope = {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    folder = _folder(tmp_path, model_type="qwen3_next", num_hidden_layers=4, layer_types=types, rope_parameters=rope)
    assert compared_layer(folder) == (3, None)
    assert rope_parameters(folder)["rope_theta"] == 1e7


def test_a_rope_dict_keyed_main_and_compress_is_compared_on_its_first_compressed_layer(tmp_path) -> None:
    """DeepSeek-V4 (compress_ratios 0, 0, 4): its dict is keyed main/compress, which its model class chooses per
    layer; the first layer that does not slide is compared, and the key the forward gave it picks the dict."""
    from ropekit.engines.transformers_ref import compared_layer, rope_parameters

    folder = _folder(tmp_path, model_type="deepseek_v4", num_hidden_layers=3, compress_ratios=[0, 0, 4])
    assert compared_layer(folder) == (2, None)
    assert rope_parameters(folder, "compress")["rope_theta"] == 160000.0
    with pytest.raises(ValueError, match="model class's choice"):
        rope_parameters(folder)
