"""`extend`: the written config.json makes plain transformers compute what ropekit's patched model computes."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.hf_models import ORIGINAL, random_hf_folder  # ORIGINAL: the small models' length
from ropekit.config import RopeConfig
from ropekit.integrations.hf.extend import extend
from ropekit.integrations.hf.model_config import extended_config
from ropekit.integrations.hf.native_rope import native_rope
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    YarnScaling,
)

transformers = pytest.importorskip("transformers")

#: lengths below, at, just above the original length, and beyond the written max_position_embeddings
LENGTHS = (40, ORIGINAL, ORIGINAL + 1, 300)
PAIRS = 8  # head_dim 16


def _logits(model, length: int) -> torch.Tensor:
    ids = torch.arange(length)[None] * 7 % 257  # (1, length)
    with torch.no_grad():
        return model(input_ids=ids).logits[0]


def _native_equals_patched(source, out, scaling) -> list[float]:
    """Relative max difference per length between ropekit's patched model and the natively loaded export."""
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.patch_rope import apply_scaling

    patched = apply_scaling(AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32), scaling).eval()
    native = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    errors = []
    for length in LENGTHS:  # same call order for both: transformers' dynamic/longrope modules keep state
        ours, theirs = _logits(patched, length), _logits(native, length)
        errors.append(float((ours - theirs).abs().max() / theirs.abs().max()))
    return errors


FACTORS = tuple(1.0 + 0.5 * i for i in range(PAIRS))

CASES = {
    "linear": (LinearScaling(factor=2.0), "linear"),
    "yarn": (YarnScaling(factor=4.0, original_max_position_embeddings=ORIGINAL), "yarn"),
    "yarn-paper-ramp": (
        YarnScaling(factor=4.0, original_max_position_embeddings=ORIGINAL, beta_fast=8.0, ramp="paper"),
        "longrope",
    ),
    "ntk": (NTKScaling(factor=4.0), "default"),
    "base": (BaseChange(base=500000.0), "default"),
    "dynamic": (DynamicScaling(factor=2.0, original_max_position_embeddings=ORIGINAL), "dynamic"),
    "dynamic-frozen": (
        DynamicScaling(factor=2.0, original_max_position_embeddings=ORIGINAL, fixed_seq_len=256),
        "default",
    ),
    "llama3": (
        Llama3Scaling(factor=4.0, original_max_position_embeddings=ORIGINAL, low_freq_factor=1.0, high_freq_factor=4.0),
        "llama3",
    ),
    "longrope": (
        LongRopeScaling(
            short_factor=(1.0,) * PAIRS, long_factor=FACTORS, original_max_position_embeddings=ORIGINAL, factor=4.0
        ),
        "longrope",
    ),
    "user-factors-frozen": (
        LongRopeScaling(
            short_factor=(1.0,) * PAIRS,
            long_factor=FACTORS,
            original_max_position_embeddings=ORIGINAL,
            factor=4.0,
            fixed_seq_len=256,
        ),
        "longrope",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_extend_loads_natively_with_equal_logits(name, llama_dir, tmp_path):
    scaling, written_type = CASES[name]
    result = extend(llama_dir, scaling, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_parameters"]["rope_type"] == written_type
    if written_type == "longrope" and name != "longrope":
        params = config["rope_parameters"]
        assert params["short_factor"] == params["long_factor"]  # the list transformers picks cannot matter
    assert (tmp_path / "out" / "tokenizer.json").is_file()
    errors = _native_equals_patched(llama_dir, result.out, scaling)
    assert max(errors) <= 1e-5, dict(zip(LENGTHS, errors, strict=True))


def test_longrope_form_of_paper_ramp_has_ropekits_frequencies():
    """The per-pair factors reproduce ropekit's float64 frequencies (independent of any model)."""
    import numpy as np

    from ropekit.scaling import frequencies, inv_freq

    rope = RopeConfig(16, base=10000.0, scaling=CASES["yarn-paper-ramp"][0])
    params = native_rope(rope, original_length=ORIGINAL).rope_parameters
    rebuilt = 1.0 / (np.asarray(params["long_factor"]) * 10000.0 ** (np.arange(0, 16, 2) / 16))
    expected = frequencies(rope)
    np.testing.assert_allclose(rebuilt, expected.inv_freq, rtol=1e-14)
    assert params["attention_factor"] == pytest.approx(expected.attention_factor, rel=1e-15)
    assert not np.allclose(params["long_factor"], inv_freq(16, 10000.0) / inv_freq(16, 10000.0))


def test_ntk_becomes_default_with_the_ntk_base():
    params = native_rope(RopeConfig(16, base=10000.0, scaling=NTKScaling(factor=4.0)), original_length=64)
    assert params.rope_parameters["rope_type"] == "default"
    assert params.rope_parameters["rope_theta"] == pytest.approx(10000.0 * 4.0 ** (16 / 14), rel=1e-12)


def test_max_position_embeddings():
    config = json.loads(json.dumps({"head_dim": 16, "max_position_embeddings": 64, "rope_theta": 10000.0}))
    yarn, _ = extended_config(config, CASES["yarn"][0], target_length=256)
    assert yarn["max_position_embeddings"] == 256
    dynamic, _ = extended_config(config, CASES["dynamic"][0], target_length=256)
    assert dynamic["max_position_embeddings"] == ORIGINAL  # transformers' dynamic reads its L there


def test_interleaved_cannot_be_written():
    with pytest.raises(ValueError, match="half-split"):
        native_rope(RopeConfig(16, interleaved=True, scaling=LinearScaling(factor=2.0)), original_length=64)


def test_refuses_existing_out_and_non_rope_model(llama_dir, tmp_path):
    out = tmp_path / "out"
    extend(llama_dir, LinearScaling(factor=2.0), out)
    with pytest.raises(FileExistsError, match="force=True"):
        extend(llama_dir, LinearScaling(factor=2.0), out)
    extend(llama_dir, LinearScaling(factor=4.0), out, force=True)
    assert json.loads((out / "config.json").read_text())["rope_parameters"]["factor"] == 4.0
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 1024}))
    with pytest.raises(ValueError, match="not a RoPE model"):
        extend(gpt2, LinearScaling(factor=2.0), tmp_path / "out2")


def test_target_below_original_is_refused(llama_dir, tmp_path):
    with pytest.raises(ValueError, match="target_length"):
        extend(llama_dir, LinearScaling(factor=2.0), tmp_path / "out", target_length=32)


def test_source_native_scaling_is_replaced(tmp_path, make_llama):
    source = make_llama(
        tmp_path / "scaled",
        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    )
    result = extend(source, CASES["yarn"][0], tmp_path / "out")
    assert result.config["rope_parameters"]["rope_type"] == "yarn"
    assert result.config["rope_scaling"] == {**result.config["rope_parameters"], "type": "yarn"}  # linear is gone


def _save_gemma3(path):
    """A small random Gemma 3 (layers: sliding, full; bases 1e4 and 1e6), saved without a tokenizer."""
    rope = {
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    }
    layer_types = ["sliding_attention", "full_attention"]
    options = {"sliding_window": 32, "layer_types": layer_types, "rope_parameters": rope}
    return random_hf_folder(path, "gemma3", vocab=257, head_dim=16, positions=ORIGINAL, **options)


@pytest.mark.parametrize("name", ["yarn", "ntk", "linear"])
def test_per_layer_type_model_keeps_per_layer_type_rope(name, tmp_path):
    """Gemma 3: the full-attention layers get the method at their own base, sliding layers keep theirs; the native
    load equals ropekit's patched model."""
    source = _save_gemma3(tmp_path / "gemma3")
    scaling, written_type = CASES[name]
    result = extend(source, scaling, tmp_path / "out")
    params = result.config["rope_parameters"]
    assert sorted(params) == ["full_attention", "sliding_attention"]
    assert params["sliding_attention"] == {"rope_type": "default", "rope_theta": 1e4}
    assert params["full_attention"]["rope_type"] == written_type
    if written_type != "default":
        assert params["full_attention"]["rope_theta"] == 1e6
    errors = _native_equals_patched(source, result.out, scaling)
    assert max(errors) <= 1e-5, dict(zip(LENGTHS, errors, strict=True))


def test_per_layer_type_model_refuses_the_longrope_form(tmp_path):
    """transformers cannot run longrope per layer type: the oracle is transformers itself failing."""
    import shutil

    import transformers
    from transformers import AutoModelForCausalLM

    from ropekit._versions import CHECKED

    source = _save_gemma3(tmp_path / "gemma3")
    with pytest.raises(ValueError, match="cannot run per layer type"):
        extend(source, CASES["yarn-paper-ramp"][0], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    shutil.copytree(source, tmp_path / "longrope")  # what the refused config would have been, written by hand
    config = json.loads((tmp_path / "longrope" / "config.json").read_text())
    pairs = 8
    config["rope_parameters"]["full_attention"] = {
        "rope_type": "longrope", "rope_theta": 1e6, "short_factor": [2.0] * pairs, "long_factor": [2.0] * pairs,
        "original_max_position_embeddings": ORIGINAL, "factor": 2.0, "attention_factor": 1.0,
    }  # fmt: skip
    (tmp_path / "longrope" / "config.json").write_text(json.dumps(config))
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "longrope").eval()
    _logits(model, ORIGINAL + 10)
    # the refusal is for the whole declared range, whose low end is the version checked: there transformers fails
    # the second call (later versions may run it; their numbers are not checked against ropekit's)
    if transformers.__version__ == CHECKED["transformers"]:
        with pytest.raises(UnboundLocalError):
            _logits(model, ORIGINAL + 10)


@pytest.mark.parametrize(("base", "keeps"), [(1e6, True), (1e4, False)])
def test_plan_for_training_keeps_a_feasible_base_or_moves_to_one(base, keeps):
    """d = 128, 4k -> 8k (the bound at 8k is about 8.4e4, Men et al. Table 1). Oracle: the exact first negative
    B_m of the chosen base (theory.bound.max_context_length)."""
    from ropekit.integrations.resolve import plan_scaling
    from ropekit.theory.bound import max_context_length

    target = 8192
    scaling, note = plan_scaling(RopeConfig(128, base=base), 4096, target, training=True)
    assert (scaling is None) == keeps
    chosen = base if scaling is None else scaling.base
    first_negative = max_context_length(chosen, 128, limit=target)
    assert first_negative is None or first_negative >= target
    assert note.startswith("plan: base")
    if scaling is None:
        assert "already clears" in note
    else:
        assert scaling.rope_type == "base" and f"{scaling.base:,.0f}" in note
