"""Argument checks (``ropekit._validate``) and the rule that validated values are stored as the checks return them.

Oracles: the rule written out (an even integer in [minimum, head_dim]), and ``json.dumps`` itself, which refuses the
numpy scalars a settings object would otherwise keep.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ropekit._validate import require_rotary_dim


@pytest.mark.parametrize("value", [2, 4, 64, np.int64(128)])
def test_require_rotary_dim_returns_a_plain_int(value):
    result = require_rotary_dim("rotary_dim", value, head_dim=128)
    assert result == int(value) and type(result) is int


@pytest.mark.parametrize(
    ("value", "kwargs", "error", "message"),
    [
        (7, {}, ValueError, r"rotary_dim must be even \(dims rotate in pairs\), got 7"),
        (256, {"head_dim": 128}, ValueError, r"rotary_dim must be <= head_dim \(128\), got 256"),
        (0, {}, ValueError, r"rotary_dim must be an integer >= 2, got 0"),
        (2, {"minimum": 4}, ValueError, r"rotary_dim must be an integer >= 4, got 2"),
        (8.0, {}, TypeError, r"rotary_dim must be an integer, got 8.0"),
        (True, {}, TypeError, r"rotary_dim must be an integer"),
        (7, {"note": " (from head_dim)"}, ValueError, r"got 7 \(from head_dim\)$"),
    ],
)
def test_require_rotary_dim_names_the_rule_it_breaks(value, kwargs, error, message):
    with pytest.raises(error, match=message):
        require_rotary_dim("rotary_dim", value, **kwargs)


def test_a_too_large_rotary_dim_is_not_called_odd():
    """The permutation said "must be even" for an even dim larger than the head."""
    torch = pytest.importorskip("torch")
    from ropekit.permute import interleaved_to_half_split

    with pytest.raises(ValueError, match=r"rotary_dim must be <= head_dim \(8\), got 16"):
        interleaved_to_half_split(torch.zeros(8, 4), 8, rotary_dim=16)


def test_plan_of_numpy_inputs_is_json_ready():
    from ropekit.theory import plan

    result = plan(np.int64(128), np.float64(1e4), np.int64(1024), np.int64(4096), robust=False)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["head_dim"] == 128 and data["target_length"] == 4096 and data["train_length"] == 1024
    assert type(result.head_dim) is int and type(result.rotary_dim) is int and type(result.base) is float


def test_base_bound_of_numpy_inputs_stores_plain_numbers():
    from ropekit.theory import base_bound

    bound = base_bound(np.int64(64), np.int64(16))
    assert type(bound.context_length) is int and type(bound.rotary_dim) is int


def test_settings_of_numpy_inputs_are_json_ready():
    pytest.importorskip("torch")
    from ropekit.eval.passkey import PasskeyCell
    from ropekit.eval.sweep import SweepSettings
    from ropekit.experiments.base_bound.settings import ExperimentSettings
    from ropekit.model.tiny import TinyConfig

    tiny = TinyConfig(d_model=np.int64(64), n_heads=np.int64(4), n_kv_heads=np.int64(2), rope_base=np.float32(500))
    json.dumps(tiny.to_dict())
    assert type(tiny.d_model) is int and type(tiny.rope_base) is float
    sweep = SweepSettings(
        methods=("none",), multiples=(np.float64(1), np.int64(2)), trials=np.int64(3), seed=np.int64(1)
    )
    json.dumps(sweep.to_dict())
    assert sweep.multiples == (1.0, 2.0) and type(sweep.trials) is int
    cell = PasskeyCell(np.int64(128), np.float64(0.5), np.int64(4), np.int64(3))
    json.dumps(cell.to_dict())
    experiment = ExperimentSettings(context=np.int64(512), steps=np.int64(10), lr=np.float32(1e-3))
    json.dumps(experiment.__dict__)
    assert type(experiment.context) is int and type(experiment.lr) is float


def test_finetune_settings_of_numpy_inputs_are_json_ready():
    pytest.importorskip("torch")
    from ropekit.finetune.settings import FinetuneSettings

    settings = FinetuneSettings(target_length=np.int64(256), steps=np.int64(40), lr=np.float32(1e-4), seed=np.int64(3))
    json.dumps(settings.to_dict())
    assert type(settings.steps) is int and type(settings.lr) is float and settings.warmup_steps == 2
