"""Attention methods in an evaluation sweep: parameters per length, recorded in every row, model restored after."""

from __future__ import annotations

import math

from ropekit.attention.self_extend import suggest
from ropekit.eval.loader import load_eval_model
from ropekit.eval.sweep import SweepSettings, run_sweep


def test_sweep_rows_record_the_method_and_the_model_is_restored():
    model = load_eval_model("tiny")
    settings = SweepSettings(methods=("none", "self_extend"), multiples=(1, 2), max_tokens=256)
    result = run_sweep(model, settings, passkey=False)
    rows = {(r["method"], r["length"]): r for r in result.perplexity}
    train = model.train_length
    for length in (train, 2 * train):
        expected = suggest(train, length)
        attention = rows[("self_extend", length)]["attention"]
        assert attention == {
            "attention": "self_extend",
            "group": expected["group"],
            "window": expected["window"],
            "layer_types": None,
        }
        assert rows[("none", length)]["attention"] is None
    # at the training length the rule gives group 1: Self-Extend is plain attention there
    assert math.isclose(rows[("self_extend", train)]["perplexity"], rows[("none", train)]["perplexity"], rel_tol=1e-6)
    assert rows[("self_extend", 2 * train)]["perplexity"] < rows[("none", 2 * train)]["perplexity"]
    assert all(block.attn.method is None for block in model.model.blocks)
