"""The tiny model: shapes, position encodings, scaling swaps and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from ropekit.model import TinyConfig, TinyLM
from ropekit.scaling import DynamicScaling, YarnScaling

SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 64, "train_length": 64}


@pytest.mark.parametrize("position", ["rope", "sinusoidal", "none"])
def test_forward_shapes(seed, position):
    model = TinyLM(TinyConfig(**SMALL, position=position))
    ids = torch.randint(0, 256, (3, 17))
    assert model(ids).shape == (3, 17, model.config.vocab_size)


def test_head_dim_is_derived():
    assert TinyConfig(**SMALL).head_dim == 8


def test_dynamic_scaling_changes_nothing_within_the_original_length(seed):
    model = TinyLM(TinyConfig(**SMALL)).eval()
    ids = torch.randint(0, 256, (2, 64))
    with torch.no_grad():
        plain = model(ids)
        model.set_scaling(DynamicScaling(factor=4, original_max_position_embeddings=64))
        dynamic = model(ids)
    assert torch.equal(plain, dynamic)


def test_yarn_keeps_high_frequency_pairs(seed):
    model = TinyLM(TinyConfig(**SMALL))
    positions = torch.arange(64)
    cos_plain, sin_plain = model.rotary.cos_sin(positions)
    spec = YarnScaling(factor=8, original_max_position_embeddings=64)
    model.set_scaling(spec)
    cos_yarn, sin_yarn = model.rotary.cos_sin(positions)
    keep = torch.from_numpy(spec.keep_fraction(model.config.rope)) == 1
    factor = spec.resolved_attention_factor()
    assert keep.any()
    torch.testing.assert_close(cos_yarn[:, keep], cos_plain[:, keep] * factor, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(sin_yarn[:, keep], sin_plain[:, keep] * factor, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(cos_yarn[:, ~keep], cos_plain[:, ~keep] * factor)


def test_set_scaling_needs_rope():
    model = TinyLM(TinyConfig(**SMALL, position="none"))
    with pytest.raises(ValueError, match="position='rope'"):
        model.set_scaling(YarnScaling(factor=2, original_max_position_embeddings=64))


def test_context_beyond_the_tables_is_an_error():
    model = TinyLM(TinyConfig(**SMALL, max_positions=128))
    with pytest.raises(ValueError, match="max_positions=128"):
        model(torch.zeros(1, 129, dtype=torch.long))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"d_model": 30}, "divisible by n_heads"),
        ({"position": "alibi"}, "position must be one of"),
        ({"rope_base": 1.0}, "rope_base"),
    ],
)
def test_bad_config(changes, match):
    with pytest.raises(ValueError, match=match):
        TinyConfig(**{**SMALL, **changes})


def test_config_round_trip():
    config = TinyConfig(**SMALL, scaling=YarnScaling(factor=4, original_max_position_embeddings=64))
    assert TinyConfig.from_dict(config.to_dict()) == config


def test_sinusoidal_table_matches_closed_form():
    from ropekit.model.tiny import sinusoidal_table

    table = sinusoidal_table(torch.tensor([0, 5, 1000]), 8)
    for row, pos in enumerate([0, 5, 1000]):
        for i in range(4):
            angle = pos * 10000 ** (-2 * i / 8)
            assert table[row, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[row, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
