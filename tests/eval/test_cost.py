"""Cost up front: forward tokens said before a sweep, and a warning where the longest length will not fit.

Oracles: token counts worked out by hand for the settings below, and the estimate's own terms (weights, per-token
activations) recomputed from the model's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from ropekit.eval import sweep
from ropekit.eval.models import TinyEvalModel
from ropekit.eval.sweep import SweepSettings, cost_lines, peak_memory_estimate


def test_cost_lines_say_the_forward_tokens(tiny_checkpoint: Path) -> None:
    model = TinyEvalModel(tiny_checkpoint)  # training length 128
    settings = SweepSettings(methods=("none", "yarn"), multiples=(1,), passkey_multiples=(1,), depths=(0.5,), trials=2)
    lines = cost_lines(model, settings, 100_000)
    # length 128: windows until max_tokens (16384) tokens are scored; passkey: 1 depth x 2 trials x 127 inputs
    windows = sweep.perplexity_windows(128, 100_000, settings)
    assert windows == 16384 // 128
    expected = 2 * (windows * 128 + 2 * 127)
    assert lines[0].startswith(f"forward tokens: {expected:,} over 2 method(s)")


def test_a_length_that_cannot_fit_is_announced(tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = TinyEvalModel(tiny_checkpoint)
    settings = SweepSettings(methods=("none",), multiples=(1, 64), passkey_multiples=(1,))
    config = model.model.config
    estimate = peak_memory_estimate(model, 128 * 64)
    per_token = (7 * config.d_model + 3 * config.ffn_dim) * 4
    assert estimate == model.model.num_parameters() * 4 + 128 * 64 * per_token + 3 * 64 * 2**20
    monkeypatch.setattr(sweep, "available_memory", lambda _: estimate - 1)
    lines = cost_lines(model, settings, 100_000)
    assert "warning: length 8,192 needs about" in lines[1] and "run out of memory" in lines[1]
    monkeypatch.setattr(sweep, "available_memory", lambda _: estimate + 1)
    assert len(cost_lines(model, settings, 100_000)) == 1
