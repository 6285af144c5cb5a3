"""The older keys (rope_theta, rope_scaling) beside rope_parameters: the same RoPE for transformers (its own
rotary module, with and without them) and for a reader of the older keys, or a note saying why they are left out or
what MLX-LM cannot read from them."""

from __future__ import annotations

import json
import math

import pytest

from ropekit.hf_format import from_hf_config, to_hf_dict
from ropekit.integrations.hf.extend import extend
from ropekit.integrations.hf.model_config import extended_config
from ropekit.scaling import LinearScaling, LongRopeScaling, NTKScaling, YarnScaling

pytest.importorskip("transformers")

ORIGINAL = 64


def _read_without(config: dict, *keys: str) -> dict:
    """transformers' own reading of ``config`` without ``keys`` (the oracle: its config class)."""
    from transformers import CONFIG_MAPPING

    values = {key: value for key, value in json.loads(json.dumps(config)).items() if key not in keys}
    return CONFIG_MAPPING[config["model_type"]].from_dict(values).rope_parameters


def _rotation(config: dict, *drop: str):
    """transformers' own cos and sin (its Llama rotary module) at positions 0..4·L0 for ``config`` without
    ``drop``."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    values = {key: value for key, value in json.loads(json.dumps(config)).items() if key not in drop}
    module = LlamaRotaryEmbedding(LlamaConfig.from_dict(values))
    return module(torch.zeros(1, 1, dtype=torch.float32), torch.arange(4 * ORIGINAL)[None])


def _g(s: float, m: float) -> float:
    """YaRN's g(s, m) = 0.1·m·ln s + 1 (the paper's eq. 22, DeepSeek's two-argument form)."""
    return 0.1 * m * math.log(s) + 1.0 if s > 1 else 1.0


YARN = {"factor": 4.0, "original_max_position_embeddings": ORIGINAL}


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        LinearScaling(factor=4.0),
        NTKScaling(factor=4.0),
        YarnScaling(**YARN),
        YarnScaling(**YARN, attention_factor=1.3),
        YarnScaling(**YARN, mscale=0.7),
        YarnScaling(**YARN, ramp="paper"),
    ],
    ids=["none", "linear", "ntk", "yarn", "yarn-attention", "yarn-mscale", "yarn-paper"],
)
def test_one_rope_writes_the_older_keys_with_the_same_meaning(llama_config, scaling) -> None:
    import torch

    source = llama_config().to_dict()
    new, notes = extended_config(source, scaling, target_length=4 * ORIGINAL)
    params = new["rope_parameters"]
    assert new["rope_theta"] == params["rope_theta"]  # what a reader of the older keys takes as the base
    kind = params["rope_type"]
    assert new["rope_scaling"] == (None if kind == "default" else {**params, "type": kind})
    ours, plain = _rotation(new), _rotation(new, "rope_theta", "rope_scaling")
    assert all(torch.equal(a, b) for a, b in zip(ours, plain, strict=True))
    assert not any("rope_theta/rope_scaling" in note for note in notes)


@pytest.mark.parametrize(("options", "wanted"), [({"attention_factor": 1.3}, 1.3), ({"mscale": 0.7}, _g(4.0, 1.0))])
def test_a_yarn_attention_factor_is_also_said_by_mscale(llama_config, options, wanted) -> None:
    """MLX-LM reads no attention_factor: its A is g(s, mscale)/g(s, mscale_all_dim), which must give transformers' A
    (the explicit one, or g(s, 1) when mscale_all_dim is unset) while transformers' own rotation stays the same."""
    import torch

    new, _ = extended_config(llama_config().to_dict(), YarnScaling(**YARN, **options), target_length=4 * ORIGINAL)
    scaling = new["rope_scaling"]
    assert _g(4.0, scaling["mscale"]) / _g(4.0, scaling["mscale_all_dim"]) == pytest.approx(wanted, rel=1e-12)
    assert scaling["attention_factor"] == pytest.approx(wanted, rel=1e-12)
    rope = from_hf_config(new).replace(scaling=YarnScaling(**YARN, **options))
    as_written = {**new, "rope_parameters": to_hf_dict(rope)}  # what transformers 5 alone would write
    before = _rotation(as_written, "rope_theta", "rope_scaling")
    assert "mscale_all_dim" not in as_written["rope_parameters"]
    assert all(torch.equal(a, b) for a, b in zip(_rotation(new), before, strict=True))


@pytest.mark.parametrize(
    ("scaling", "reason"),
    [
        (YarnScaling(**YARN, truncate=False), "truncate: false"),
        (YarnScaling(**YARN, ramp="paper"), "reads neither attention_factor"),
        (YarnScaling(**YARN, attention_factor=0.5), "no mscale >= 0"),
        (
            LongRopeScaling(short_factor=(2.0,) * 8, long_factor=(2.0,) * 8, original_max_position_embeddings=ORIGINAL),
            "reads neither attention_factor nor factor",
        ),
    ],
    ids=["truncate-false", "paper-ramp", "attention-below-1", "longrope-factor-1-at-4x"],
)
def test_what_mlx_cannot_read_is_a_note(llama_config, scaling, reason) -> None:
    new, notes = extended_config(llama_config().to_dict(), scaling, target_length=4 * ORIGINAL)
    assert new["rope_scaling"]["type"] == new["rope_parameters"]["rope_type"]  # the older keys are still written
    assert any(note.startswith("MLX-LM cannot express this RoPE") and reason in note for note in notes), notes


def test_truncate_false_with_whole_ramp_ends_is_no_gap(llama_config) -> None:
    """With beta_fast = L0/(2π·b^(2k/d)) the ramp's low end is the whole pair k, so floor/ceil change nothing and
    MLX-LM runs it (here k = 2 and, with beta_slow large enough to end the ramp within the pairs, the high end 4)."""
    dim, base = 16, 10000.0
    beta = [ORIGINAL / (2 * math.pi * base ** (2 * k / dim)) for k in (2, 4)]
    scaling = YarnScaling(**YARN, truncate=False, beta_fast=beta[0], beta_slow=beta[1])
    _, notes = extended_config(llama_config().to_dict(), scaling, target_length=4 * ORIGINAL)
    assert not any("MLX-LM" in note for note in notes), notes


def test_extend_json_says_what_mlx_cannot_read(llama_dir, tmp_path) -> None:
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    args = ["extend", "--model", llama_dir, "--scaling", "yarn", "--factor", "4", "--param", "truncate=false"]
    result = CliRunner().invoke(app, [str(a) for a in [*args, "--out", tmp_path / "out", "--json"]])
    assert result.exit_code == 0, result.output
    assert any("MLX-LM cannot express" in line and "truncate" in line for line in json.loads(result.stdout)["how"])


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
    assert (new["rope_theta"], new["rope_local_base_freq"], new["rope_scaling"]) == (
        1e6,
        1e4,
        {**full, "type": "linear"},
    )
    read = _read_without(new), _read_without(new, "rope_theta", "rope_scaling", "rope_local_base_freq")
    assert read[0]["full_attention"].pop("type") == "linear"  # the 4.x spelling, which transformers keeps
    assert read[0] == read[1]


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

    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = apply_scaling(
        AutoModelForCausalLM.from_pretrained(llama_dir),
        YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL),
    )
    model.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["rope_scaling"] == {**written["rope_parameters"], "type": "yarn"}
    assert written["rope_theta"] == 10000.0


def test_the_added_keys_leave_the_gguf_form_as_it_was(llama_config) -> None:
    """llama.cpp's metadata for an extended folder (ropekit's reading of it) is the same with the added mscale keys
    as without them."""
    from ropekit.integrations.gguf.llamacpp_rope import to_llamacpp

    scaling = YarnScaling(**YARN, attention_factor=1.3)
    new, _ = extended_config(llama_config().to_dict(), scaling, target_length=4 * ORIGINAL)
    plain = {**new, "rope_scaling": None, "rope_parameters": to_hf_dict(from_hf_config(new).replace(scaling=scaling))}
    forms = [to_llamacpp(from_hf_config(config), rope_freqs=True, betas=False) for config in (new, plain)]
    assert forms[0] == forms[1] and forms[0].scaling_type == "yarn"
