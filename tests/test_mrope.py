"""M-RoPE (:mod:`ropekit.mrope`): 3-D positions split over the pairs, blocked (Qwen2-VL) and interleaved (Qwen3-VL).

Oracles: transformers' own rotary classes (``Qwen2VLRotaryEmbedding``, ``Qwen2_5_VLRotaryEmbedding``,
``Qwen3VLTextRotaryEmbedding``) and ``apply_rotary_pos_emb`` on small configs and random positions; the 1-D
:func:`ropekit.cos_sin` for text positions (bit for bit); and the swapped layout, which must *not* match.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from ropekit import RopeConfig, cos_sin, frequencies, from_hf_config
from ropekit.config import MRope
from ropekit.hf_format import to_hf_dict
from ropekit.mrope import apply_mrope, mrope_cos_sin, text_positions
from ropekit.scaling import DynamicScaling, LinearScaling

SMALL = {"num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "intermediate_size": 32}
SMALL |= {"vocab_size": 300000, "bos_token_id": None, "eos_token_id": None}

#: (model family, head_dim, sections, rope dict extras)
CASES = [
    ("qwen2_vl", 32, [4, 6, 6], {"rope_type": "default"}),
    ("qwen2_vl", 32, [4, 6, 6], {"rope_type": "linear", "factor": 4.0}),
    ("qwen2_vl", 32, [4, 6, 6], {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    ("qwen2_5_vl", 48, [8, 8, 8], {"rope_type": "default"}),
    ("qwen3_vl", 48, [8, 8, 8], {"rope_type": "default", "mrope_interleaved": True}),
    ("qwen3_vl", 32, [6, 5, 5], {"rope_type": "default", "mrope_interleaved": True}),
    ("qwen3_vl", 48, [8, 8, 8], {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    (
        "qwen3_vl",
        48,
        [8, 8, 8],
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "original_max_position_embeddings": 64,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    ),
]


def hf_rotary(family: str, head_dim: int, sections: list[int], extra: dict[str, Any]):
    """transformers' rotary module of ``family`` from a small config (and the config)."""
    pytest.importorskip("transformers")
    if family == "qwen2_vl":
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig as Config
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding as Rotary
    elif family == "qwen2_5_vl":
        from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig as Config
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding as Rotary
    else:
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig as Config
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding as Rotary
    params = {"rope_theta": 10000.0, "mrope_section": sections, **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Config(
            hidden_size=2 * head_dim, head_dim=head_dim, max_position_embeddings=256, rope_parameters=params, **SMALL
        )
        return Rotary(config), config


def vision_positions(batch: int = 2, seq: int = 40) -> torch.Tensor:
    """Random (3, batch, seq) positions whose three axes differ (image tokens)."""
    generator = torch.Generator().manual_seed(3)
    return torch.randint(0, 200, (3, batch, seq), generator=generator)


@pytest.mark.parametrize(("family", "head_dim", "sections", "extra"), CASES)
def test_tables_and_rotation_equal_transformers(family: str, head_dim: int, sections: list[int], extra: dict) -> None:
    rotary, config = hf_rotary(family, head_dim, sections, extra)
    rope = from_hf_config(config.to_dict())
    assert rope.mrope == MRope(tuple(sections), layout="interleaved" if family == "qwen3_vl" else "blocked")
    positions = vision_positions()
    hf_cos, hf_sin = rotary(torch.zeros(1, dtype=torch.float32), positions)  # (batch, seq, head_dim)
    cos, sin = mrope_cos_sin(positions, frequencies(rope), rope.mrope, dtype=torch.float64)
    half = head_dim // 2
    # transformers forms the angles in float32 (positions < 200: error below 200 · 2**-24)
    torch.testing.assert_close(hf_cos.double(), torch.cat([cos, cos], -1), atol=3e-5, rtol=0)
    torch.testing.assert_close(hf_sin.double(), torch.cat([sin, sin], -1), atol=3e-5, rtol=0)
    assert cos.shape == (2, 40, half)
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb

    q = torch.randn(2, 3, 40, head_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected, _ = apply_rotary_pos_emb(q, q, hf_cos.double(), hf_sin.double())
    got = apply_mrope(q, positions, rope, seq_dim=2, table_dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize(("family", "head_dim", "sections", "extra"), [CASES[0], CASES[4]])
def test_swapped_layout_does_not_match_transformers(family: str, head_dim: int, sections: list, extra: dict) -> None:
    """Blocked vs interleaved is the field's open bug class: right on text, wrong on images. The swap must show."""
    rotary, config = hf_rotary(family, head_dim, sections, extra)
    rope = from_hf_config(config.to_dict())
    swapped = MRope(rope.mrope.sections, layout="blocked" if rope.mrope.layout == "interleaved" else "interleaved")
    positions = vision_positions()
    hf_cos, _ = rotary(torch.zeros(1), positions)
    cos, _ = mrope_cos_sin(positions, frequencies(rope), swapped, dtype=torch.float64)
    assert (hf_cos.double()[..., : head_dim // 2] - cos).abs().max() > 0.5
    text = text_positions(torch.arange(40).expand(2, 40))
    hf_text, _ = rotary(torch.zeros(1), text)
    cos_text, _ = mrope_cos_sin(text, frequencies(rope), swapped, dtype=torch.float64)
    torch.testing.assert_close(hf_text.double()[..., : head_dim // 2], cos_text, atol=3e-5, rtol=0)  # text hides it


@pytest.mark.parametrize("layout", ["blocked", "interleaved"])
def test_text_positions_are_1d_rope_bit_for_bit(layout: str) -> None:
    rope = RopeConfig(64, base=5e5, mrope=MRope((8, 12, 12), layout=layout), scaling=LinearScaling(factor=2.0))
    positions = torch.tensor([[0, 5, 1 << 30, 77], [3, 9, 11, 2**40]])
    cos, sin = mrope_cos_sin(text_positions(positions), frequencies(rope), rope.mrope)
    cos1, sin1 = cos_sin(positions, frequencies(rope))
    assert torch.equal(cos, cos1) and torch.equal(sin, sin1)


def test_vision_positions_differ_from_1d_rope() -> None:
    rope = RopeConfig(64, mrope=MRope((8, 12, 12)))
    positions = torch.stack([torch.full((10,), 100), torch.arange(10) % 5, torch.arange(10) // 5])  # one 2×5 image
    cos, _ = mrope_cos_sin(positions, frequencies(rope), rope.mrope)
    cos_t, _ = cos_sin(positions[0], frequencies(rope))
    assert torch.equal(cos[:, :8], cos_t[:, :8])  # the time pairs read the time row
    assert (cos[:, 8:] - cos_t[:, 8:]).abs().max() > 0.5


def test_axis_of_pairs_layouts() -> None:
    assert MRope((2, 2, 2)).axis_of_pairs() == [0, 0, 1, 1, 2, 2]
    assert MRope((2, 2, 2), layout="interleaved").axis_of_pairs() == [0, 1, 2, 0, 1, 2]
    assert MRope((4, 1, 1), layout="interleaved").axis_of_pairs() == [0, 1, 2, 0, 0, 0]


def test_from_hf_config_forms() -> None:
    qwen2_vl_hub = {  # Qwen2-VL-7B-Instruct's config.json (4.x form, abridged)
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    rope = from_hf_config(qwen2_vl_hub)
    assert rope.mrope == MRope((16, 24, 24)) and rope.scaling is None and rope.base == 1e6
    qwen3_vl = {  # Qwen3-VL: the language model's RoPE nested in text_config
        "model_type": "qwen3_vl",
        "text_config": {
            "model_type": "qwen3_vl_text",
            "head_dim": 128,
            "rope_theta": 5e6,
            "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True},
        },
    }
    rope = from_hf_config(qwen3_vl)
    assert rope.mrope == MRope((24, 20, 20), layout="interleaved") and rope.base == 5e6
    assert from_hf_config({"head_dim": 128, "rope_theta": 1e4}).mrope is None
    written = to_hf_dict(rope)
    assert written["mrope_section"] == [24, 20, 20] and written["mrope_interleaved"] is True
    assert from_hf_config({**qwen3_vl["text_config"], "rope_scaling": written}) == rope


def test_refusals_name_the_problem() -> None:
    with pytest.raises(ValueError, match="no mrope_section"):
        from_hf_config({"model_type": "qwen2_vl", "head_dim": 64, "rope_theta": 1e4})
    with pytest.raises(ValueError, match="cover 16 pairs"):
        RopeConfig(64, mrope=MRope((4, 6, 6)))
    with pytest.raises(ValueError, match="'dynamic' follows the sequence length"):
        RopeConfig(32, mrope=MRope((4, 6, 6)), scaling=DynamicScaling(factor=2.0, original_max_position_embeddings=64))
    with pytest.raises(ValueError, match="layout"):
        MRope((4, 6, 6), layout="interleave")
    with pytest.raises(ValueError, match=r"\(3, seq\)"):
        mrope_cos_sin(torch.zeros(2, 5, dtype=torch.long), frequencies(RopeConfig(32)), MRope((4, 6, 6)))
    with pytest.raises(ValueError, match="mrope set"):
        apply_mrope(torch.zeros(1, 5, 1, 32), torch.zeros(3, 5, dtype=torch.long), RopeConfig(32))
    with pytest.warns(UserWarning, match="runs 'qwen2_vl' blocked"):
        from_hf_config(
            {
                "model_type": "qwen2_vl",
                "head_dim": 32,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1e4,
                    "mrope_section": [4, 6, 6],
                    "mrope_interleaved": True,
                },
            }
        )


def test_extended_config_keeps_the_sections() -> None:
    """``extend`` writes the new scaling beside the model's mrope_section, so transformers keeps the 3-D layout."""
    from ropekit.integrations.hf.model_config import extended_config
    from ropekit.scaling import YarnScaling

    qwen2_vl = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6,
                "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}  # fmt: skip
    written, _ = extended_config(
        qwen2_vl, YarnScaling(factor=4.0, original_max_position_embeddings=32768), target_length=131072
    )
    assert written["rope_parameters"]["mrope_section"] == [16, 24, 24]
    rope = from_hf_config(written)
    assert rope.mrope == MRope((16, 24, 24)) and rope.scaling.factor == 4.0
