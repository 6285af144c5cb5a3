"""Scaling a model with NoPE layers (SmolLM3, Llama 4): ``apply_scaling`` and ``extend`` leave the NoPE layers alone.

Oracles: transformers' own logits (a model whose layers are all NoPE is unchanged by any scaling) and transformers
alone loading the folder ``extend`` wrote (its logits equal the patched model's, so the written config means what
ropekit computes, on the RoPE layers and on the NoPE ones).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers.hf_models import random_hf_model
from ropekit.scaling import LinearScaling, NTKScaling, YarnScaling

pytest.importorskip("transformers")
pytestmark = pytest.mark.hf

ORIGINAL = 32
ATOL = 1e-5


#: both models' config beyond the factory's sizes: 4 heads and 2 KV heads of 16, the default RoPE at 10,000
COMMON = {
    "vocab": 101,
    "intermediate": 96,
    "head_dim": 16,
    "positions": ORIGINAL,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def smollm3(no_rope_layers: list[int], vocab_size: int = 101):
    """A random SmolLM3, its matrices scaled by 3 (``no_rope_layers``: 1 = RoPE, 0 = NoPE)."""
    options = COMMON | {"vocab": vocab_size, "layers": len(no_rope_layers), "no_rope_layers": no_rope_layers}
    return random_hf_model("smollm3", scale=3.0, **options).eval()


def llama4(no_rope_layers: list[int]):
    """A random Llama 4 text model, its matrices scaled by 3 (two experts; chunks longer than the inputs)."""
    options = COMMON | {"layers": len(no_rope_layers), "no_rope_layers": no_rope_layers}
    llama4_only = {"intermediate_size_mlp": 96, "num_local_experts": 2, "attention_chunk_size": 256}
    return random_hf_model("llama4", scale=3.0, **options, **llama4_only).eval()


def logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


IDS = torch.randint(0, 101, (1, 150), generator=torch.Generator().manual_seed(3))

SCALINGS = [
    pytest.param(LinearScaling(factor=4.0), id="linear"),
    pytest.param(YarnScaling(factor=4.0, original_max_position_embeddings=ORIGINAL), id="yarn"),
    pytest.param(
        YarnScaling(factor=4.0, original_max_position_embeddings=ORIGINAL, ramp="paper"), id="yarn-paper-as-longrope"
    ),
    pytest.param(NTKScaling(factor=4.0), id="ntk"),
]


@pytest.mark.parametrize("factory", [smollm3, llama4])
@pytest.mark.parametrize("scaling", SCALINGS)
def test_scaling_a_model_whose_layers_are_all_nope_changes_nothing(factory, scaling) -> None:
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = factory([0, 0])
    plain = logits(model, IDS)
    assert torch.equal(logits(apply_scaling(model, scaling), IDS), plain)


@pytest.mark.parametrize("factory", [smollm3, llama4])
@pytest.mark.parametrize("scaling", SCALINGS)
def test_extend_writes_a_folder_transformers_loads_as_the_patched_model(factory, scaling, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.extend import extend
    from ropekit.integrations.hf.patch_rope import apply_scaling

    factory([1, 0, 1, 0]).save_pretrained(tmp_path / "model")
    result = extend(tmp_path / "model", scaling, tmp_path / "out")
    assert "layers 1, 3: no RoPE (NoPE), unchanged" in result.notes
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["no_rope_layers"] == [1, 0, 1, 0] and written["max_position_embeddings"] == 4 * ORIGINAL
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    source = AutoModelForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32).eval()
    plain = logits(source, IDS)
    patched = logits(apply_scaling(source, scaling), IDS)
    assert float((logits(reloaded, IDS) - patched).abs().max()) < ATOL
    assert float((patched - plain).abs().max()) > 1e-3  # the RoPE layers did change


def test_the_evaluation_model_and_the_report_say_which_layers_take_the_methods(tmp_path: Path) -> None:
    from ropekit.attention import get_attention
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.report import model_line
    from ropekit.integrations.hf.patch_attention import describe_attention

    smollm3([1, 1, 1, 0, 1, 1, 1, 0], vocab_size=257).save_pretrained(tmp_path)  # byte ids without a tokenizer
    model = HFEvalModel(tmp_path)
    described = model.describe()
    assert described["rope_layout"] == {"layers": 8, "rope_layers": [0, 1, 2, 4, 5, 6], "nope_layers": [3, 7]}
    line = model_line(described)
    assert "2 of 8 layers take no RoPE (NoPE: layers 3, 7)" in line and "other 6 layers (0, 1, 2, 4, 5, 6)" in line
    model.set_attention(get_attention("self_extend")(group=2, window=8))
    assert describe_attention(model.model)["layers"] == [0, 1, 2, 4, 5, 6]
    assert "NoPE" not in model_line({"dtype": "float32"})
