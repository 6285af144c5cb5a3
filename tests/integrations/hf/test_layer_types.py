"""One rule for the layer types a method scales, shared by ``extend``, ``eval``, ``finetune`` and ``apply_scaling``.

Oracle: transformers loading what ``extend`` wrote (no ropekit involved) — the training-free method that
``eval`` (and ``finetune``'s before/after table) applies to the source model must give the same logits. The models
are small random Gemma 3 models built in code; one of them has no ``full_attention`` layer, and its ``config.json``
has no ``full_attention`` RoPE (transformers adds one when it loads the config, which no layer runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers.hf_models import random_hf_folder
from ropekit.scaling import LinearScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

VOCAB = 300  # the factory's default vocabulary
BASES = {"full_attention": 1e6, "sliding_attention": 1e4}


def save_gemma3(path: Path, layer_types: list[str]) -> Path:
    """A random 2-layer Gemma 3 (4 heads of 16, initialised at 0.05, matrices scaled by 3) whose ``config.json`` has
    a RoPE for exactly the layer types its layers run."""
    used = sorted(set(layer_types))
    rope = {t: {"rope_type": "default", "rope_theta": BASES[t]} for t in used}
    options = {"head_dim": 16, "initializer_range": 0.05, "scale": 3.0, "sliding_window": 512}
    random_hf_folder(path, "gemma3", layer_types=layer_types, rope_parameters=rope, **options)
    written = json.loads((path / "config.json").read_text())
    written["rope_parameters"] = {t: written["rope_parameters"][t] for t in used}  # as the checkpoint ships it
    (path / "config.json").write_text(json.dumps(written))
    return path


@pytest.fixture(scope="module")
def all_sliding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sliding") / "model"
    return save_gemma3(path, ["sliding_attention", "sliding_attention"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_gemma3(tmp_path_factory.mktemp("mixed") / "model", ["sliding_attention", "full_attention"])


def test_the_rule_agrees_on_the_raw_and_the_loaded_config(all_sliding: Path, mixed: Path) -> None:
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import scaled_layer_types

    for path, expected in ((all_sliding, ["sliding_attention"]), (mixed, ["full_attention"])):
        loaded = transformers.AutoConfig.from_pretrained(path)
        assert scaled_layer_types(load_config(path)) == scaled_layer_types(loaded) == expected
    assert "full_attention" in transformers.AutoConfig.from_pretrained(all_sliding).rope_parameters  # added, unused
    assert scaled_layer_types(load_config(mixed), ["sliding_attention", "full_attention"]) == [
        "full_attention",
        "sliding_attention",
    ]
    with pytest.raises(ValueError, match="layer_types must name some of"):
        scaled_layer_types(load_config(mixed), ["global"])


def test_extend_output_without_full_attention_is_what_eval_applies(all_sliding: Path, tmp_path: Path) -> None:
    """``extend`` scales the sliding layers of a model without full-attention layers; ``eval`` applies the same
    method to the same layers (so its training-free row is the extended model), and the extended model can be
    evaluated and scaled again."""
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.integrations.hf.extend import extend

    scaling = LinearScaling(factor=2.0)
    out = extend(all_sliding, scaling, tmp_path / "out").out
    written = json.loads((out / "config.json").read_text())["rope_parameters"]
    assert written["sliding_attention"]["rope_type"] == "linear"
    ids = torch.randint(0, VOCAB, (1, 100), generator=torch.Generator().manual_seed(0))
    native = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        theirs = native(input_ids=ids).logits
    source = HFEvalModel(all_sliding)
    plain = source.logits(ids)
    source.set_scaling(scaling)
    assert source.describe()["scaled_layer_types"] == ["sliding_attention"]
    scale = float(theirs.abs().max())
    assert float((source.logits(ids) - theirs).abs().max()) < 1e-5 * scale
    assert float((plain - theirs).abs().max()) > 1e-2 * scale  # the method matters on these layers

    extended = HFEvalModel(out)
    assert extended.native_scaling == scaling and extended.rope.base == BASES["sliding_attention"]
    assert extended.describe()["scaled_layer_types"] == ["sliding_attention"]
    extended.set_scaling(extended.native_scaling)
    assert float((extended.logits(ids) - theirs).abs().max()) < 1e-5 * scale


def test_eval_json_names_the_scaled_layer_types(mixed: Path) -> None:
    """the sweep records the model before any method is applied; its ``scaled_layer_types``
    must name the layers every method of the sweep goes to, not ``null``."""
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.sweep import SweepSettings, run_sweep

    model = HFEvalModel(mixed)
    assert model.describe()["scaled_layer_types"] == ["full_attention"]
    settings = SweepSettings(methods=("linear",), multiples=(1.0,), passkey_multiples=(1.0,), max_tokens=256)
    result = run_sweep(model, settings, passkey=False)
    recorded = json.loads(json.dumps(result.context))["model"]
    assert recorded["layer_types"] == ["full_attention", "sliding_attention"]
    assert recorded["scaled_layer_types"] == ["full_attention"]
