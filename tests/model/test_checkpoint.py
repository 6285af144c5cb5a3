"""Checkpoints: safetensors + JSON round trip, the bundled model, and clear errors."""

from __future__ import annotations

import json

import pytest
import torch

from ropekit.model import TinyConfig, TinyLM, load, metadata, save
from ropekit.model.checkpoint import resolve
from ropekit.model.train import heldout_bpb

SMALL = {"d_model": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_dim": 64, "train_length": 64}


def test_save_load_round_trip_gives_identical_logits(seed, tmp_path):
    model = TinyLM(TinyConfig(**SMALL)).eval()
    save(model, tmp_path / "m")
    ids = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        assert torch.equal(model(ids), load(tmp_path / "m")(ids))
    assert not list(tmp_path.glob("m/*.pt")) and not list(tmp_path.glob("m/*.bin"))


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load(tmp_path / "nothing")


def test_config_that_does_not_match_the_weights(tmp_path):
    save(TinyLM(TinyConfig(**SMALL)), tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["model"]["d_model"] = 64
    config["model"]["ffn_dim"] = 128
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"does not match model\.safetensors"):
        load(tmp_path / "m")


def test_bundled_checkpoint_matches_its_recorded_bits_per_byte():
    resolve("tiny")
    model = load("tiny")
    recorded = metadata("tiny")["heldout_bpb"]
    assert heldout_bpb(model, model.config.train_length) == pytest.approx(recorded, rel=0.01)
    assert model.num_parameters() == metadata("tiny")["parameters"]
