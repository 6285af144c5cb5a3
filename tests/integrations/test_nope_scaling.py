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

from ropekit.scaling import LinearScaling, NTKScaling, YarnScaling

pytest.importorskip("transformers")
pytestmark = pytest.mark.hf

ORIGINAL = 32
ATOL = 1e-5


def smollm3(no_rope_layers: list[int], vocab_size: int = 101):
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    config = SmolLM3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=len(no_rope_layers),
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=ORIGINAL,
        no_rope_layers=no_rope_layers,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = SmolLM3ForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(3.0)
    return model


def llama4(no_rope_layers: list[int]):
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    config = Llama4TextConfig(
        vocab_size=101,
        hidden_size=64,
        intermediate_size=96,
        intermediate_size_mlp=96,
        num_local_experts=2,
        num_hidden_layers=len(no_rope_layers),
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=ORIGINAL,
        attention_chunk_size=256,
        no_rope_layers=no_rope_layers,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = Llama4ForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(3.0)
    return model


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
    from ropekit.integrations.hf import apply_scaling

    model = factory([0, 0])
    plain = logits(model, IDS)
    assert torch.equal(logits(apply_scaling(model, scaling), IDS), plain)


@pytest.mark.parametrize("factory", [smollm3, llama4])
@pytest.mark.parametrize("scaling", SCALINGS)
def test_extend_writes_a_folder_transformers_loads_as_the_patched_model(factory, scaling, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.finetune.export import extend
    from ropekit.integrations.hf import apply_scaling

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
    from ropekit.eval.methods import set_attention
    from ropekit.eval.models import HFEvalModel
    from ropekit.eval.report import model_line
    from ropekit.integrations.hf_attention import describe_attention

    smollm3([1, 1, 1, 0, 1, 1, 1, 0], vocab_size=257).save_pretrained(tmp_path)  # byte ids without a tokenizer
    model = HFEvalModel(tmp_path)
    described = model.describe()
    assert described["rope_layout"] == {"layers": 8, "rope_layers": [0, 1, 2, 4, 5, 6], "nope_layers": [3, 7]}
    line = model_line(described)
    assert "2 of 8 layers take no RoPE (NoPE: layers 3, 7)" in line and "other 6 layers (0, 1, 2, 4, 5, 6)" in line
    set_attention(model, get_attention("self_extend")(group=2, window=8))
    assert describe_attention(model.model)["layers"] == [0, 1, 2, 4, 5, 6]
    assert "NoPE" not in model_line({"dtype": "float32"})
