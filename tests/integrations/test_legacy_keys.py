"""The older keys (rope_theta, rope_scaling) beside rope_parameters: the same RoPE for transformers 5.18 and for a
reader of the older keys, or a note saying why they are left out."""

from __future__ import annotations

import json

import pytest

from ropekit.finetune.export import extend
from ropekit.integrations.hf_config import extended_config
from ropekit.scaling import LinearScaling, NTKScaling, YarnScaling

pytest.importorskip("transformers")

ORIGINAL = 64


def _read_without(config: dict, *keys: str) -> dict:
    """transformers' own reading of ``config`` without ``keys`` (the oracle: its config class)."""
    from transformers import CONFIG_MAPPING

    values = {key: value for key, value in json.loads(json.dumps(config)).items() if key not in keys}
    return CONFIG_MAPPING[config["model_type"]].from_dict(values).rope_parameters


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        LinearScaling(factor=4.0),
        NTKScaling(factor=4.0),
        YarnScaling(factor=4.0, original_max_position_embeddings=ORIGINAL, ramp="paper"),
    ],
    ids=["none", "linear", "ntk", "yarn-paper"],
)
def test_one_rope_writes_the_older_keys_with_the_same_meaning(llama_config, scaling) -> None:
    source = llama_config().to_dict()
    new, notes = extended_config(source, scaling, target_length=4 * ORIGINAL)
    params = new["rope_parameters"]
    assert new["rope_theta"] == params["rope_theta"]  # what a reader of the older keys takes as the base
    assert new["rope_scaling"] == (None if params["rope_type"] == "default" else params)
    assert _read_without(new) == _read_without(new, "rope_theta", "rope_scaling")
    assert not any("rope_theta/rope_scaling" in note for note in notes)


def _gemma3_config(sliding_theta: float = 1e4) -> dict:
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(
        vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=ORIGINAL, sliding_window=32,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": sliding_theta},
        },
    ).to_dict()  # fmt: skip


def test_gemma3_gets_its_older_form_when_only_full_attention_is_scaled() -> None:
    new, _ = extended_config(_gemma3_config(), LinearScaling(factor=2.0), target_length=2 * ORIGINAL)
    full = new["rope_parameters"]["full_attention"]
    assert (new["rope_theta"], new["rope_local_base_freq"], new["rope_scaling"]) == (1e6, 1e4, full)
    assert _read_without(new) == _read_without(new, "rope_theta", "rope_scaling", "rope_local_base_freq")


def test_a_scaled_sliding_layer_has_no_older_form_and_says_so() -> None:
    layers = ["full_attention", "sliding_attention"]
    new, notes = extended_config(_gemma3_config(), LinearScaling(factor=2.0), target_length=128, layer_types=layers)
    assert "rope_scaling" not in new and "rope_theta" not in new
    assert any("rope_theta/rope_scaling not written" in note and "sliding" in note for note in notes)


def test_extend_writes_them_into_config_json(llama_dir, tmp_path) -> None:
    result = extend(llama_dir, NTKScaling(factor=4.0), tmp_path / "out")
    written = json.loads((result.out / "config.json").read_text())
    assert written["rope_theta"] == written["rope_parameters"]["rope_theta"] > 10000.0
    assert written["rope_scaling"] is None


def test_apply_scaling_then_save_pretrained_writes_them(llama_dir, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf import apply_scaling

    model = apply_scaling(
        AutoModelForCausalLM.from_pretrained(llama_dir),
        YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL),
    )
    model.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["rope_scaling"] == written["rope_parameters"] and written["rope_scaling"]["rope_type"] == "yarn"
    assert written["rope_theta"] == 10000.0
