"""`extend` on the real SmolLM2-135M GGUF (dequantised): the native load equals ropekit's patched model."""

from __future__ import annotations

import json

import pytest
import torch

from ropekit.integrations.hf.extend import extend
from ropekit.scaling import YarnScaling

pytestmark = [pytest.mark.real, pytest.mark.slow]  # about a minute on an idle machine (GGUF dequantised, saved, loaded)

TRAIN = 8192  # SmolLM2-135M's training length


def test_smollm2_gguf_extends_natively_with_equal_logits(smollm2_path, tmp_path):
    """YaRN with the paper's ramp (no native name: written as longrope) from 8k; logits at 300 positions.

    Oracle: ropekit's patched model built from the same dequantised weights."""
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.load import load_model
    from ropekit.integrations.hf.patch_rope import apply_scaling

    scaling = YarnScaling(factor=4.0, original_max_position_embeddings=TRAIN, ramp="paper")
    result = extend(smollm2_path, scaling, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_parameters"]["rope_type"] == "longrope" and config["max_position_embeddings"] == 4 * TRAIN
    assert (tmp_path / "out" / "tokenizer.json").is_file()
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"  # issue 23 item 17
    native = AutoModelForCausalLM.from_pretrained(result.out, dtype=torch.float32).eval()
    patched, tokenizer = load_model(smollm2_path)
    apply_scaling(patched, scaling)
    ids = torch.tensor([tokenizer("def f(x):\n    return x * 2\n" * 20)["input_ids"][:300]])
    with torch.no_grad():
        ours, theirs = patched(input_ids=ids).logits, native(input_ids=ids).logits
    assert float((ours - theirs).abs().max() / theirs.abs().max()) <= 1e-5
