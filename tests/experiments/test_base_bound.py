"""The base-bound experiment: B_m against a direct sum, the conclusion logic, and the --quick run end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from ropekit.experiments.base_bound import conclusion
from ropekit.theory.decay import similarity_margin


def test_the_experiments_b_m_is_the_direct_sum():
    values = similarity_margin(np.array([0, 1, 1707]), 128, 10000.0)
    direct = [sum(math.cos(m * 10000.0 ** (-2 * i / 128)) for i in range(64)) for m in (0, 1, 1707)]
    assert values == pytest.approx(direct, rel=1e-12, abs=1e-9)
    assert values[2] < 0 < values[1]


def _row(label, base, ppl, correct, trials=100):
    from ropekit.experiments.base_bound import overall_accuracy

    rows = [{"trials": trials, "correct": correct}]
    return {
        "label": label,
        "base": base,
        "smallest_base": 1000.0,
        "robust_base": 2000.0,
        "heldout": {"perplexity": ppl},
        "retrieval_overall": overall_accuracy(rows),
    }


def test_conclusion_says_reproduced_only_when_the_numbers_say_so():
    reproduced = conclusion([_row("low", 10.0, 3.0, 20), _row("high", 5000.0, 2.9, 95)])
    assert reproduced[0].startswith("Reproduced")
    not_reproduced = conclusion([_row("low", 10.0, 3.0, 93), _row("high", 5000.0, 2.9, 95)])
    assert not_reproduced[0].startswith("Not reproduced")
    partly = conclusion([_row("low", 10.0, 4.0, 20), _row("high", 5000.0, 2.9, 95)])
    assert partly[0].startswith("Partly")
    # nothing learned retrieval above the bound: the run cannot test the claim, whatever the ratio
    inconclusive = conclusion([_row("low", 10.0, 3.0, 1), _row("high", 5000.0, 2.9, 2)])
    assert inconclusive[0].startswith("Inconclusive")


@pytest.mark.slow
def test_quick_mode_end_to_end(tmp_path):
    from ropekit.cli.app import app

    result = CliRunner().invoke(app, ["experiment", "base-bound", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "results.json").read_text())
    assert [m["label"] for m in payload["models"]] == ["base 100", "bound for L/4", "robust bound", "NoPE"]
    assert (tmp_path / "index.html").is_file() and (tmp_path / "retrieval_vs_distance.png").stat().st_size > 10_000


def _binned(first_negative, before, after, trials=50):
    """A row with two distance bins, split at ``first_negative``."""
    return {
        "label": "b",
        "base": 1000.0,
        "first_negative_m": first_negative,
        "retrieval": [
            {"low_distance": 0.0, "high_distance": 128.0, "trials": trials, "correct": before},
            {"low_distance": 128.0, "high_distance": 256.0, "trials": trials, "correct": after},
        ],
    }


def test_within_model_compares_distances_before_and_after_the_first_negative_m():
    from ropekit.experiments.base_bound import within_model

    assert "collapses past that distance" in within_model(_binned(128, 45, 2))
    assert "does not change significantly" in within_model(_binned(128, 48, 47))
    assert within_model(_binned(None, 48, 47)) is None  # feasible over the whole context: nothing to compare
    assert within_model(_binned(300, 48, 47)) is None  # no bin lies beyond the first negative m


def test_planned_models_follow_the_bound_and_the_subset():
    from ropekit.experiments.base_bound import ExperimentSettings, planned_models
    from ropekit.theory import max_context_length

    rows = planned_models(ExperimentSettings())
    labels = [r["label"] for r in rows]
    assert labels[0] == "base 10" and labels[-1] == "NoPE" and "tiny's own base" in labels
    by_key = {r["key"]: r for r in rows}
    # the L/4 and L/2 bases turn negative part-way into the context (at or after L/4 and L/2), the bound's do not
    assert 128 <= max_context_length(by_key["quarter"]["base"], 32) < 512
    assert 256 <= max_context_length(by_key["half"]["base"], 32) < 512
    assert max_context_length(by_key["smallest"]["base"], 32, limit=512) is None
    subset = planned_models(ExperimentSettings(models=("100", "nope")))
    assert [r["key"] for r in subset] == ["100", "nope"]


def test_init_with_another_shape_is_a_clear_error(tmp_path):
    from ropekit.model.tiny import TinyConfig
    from ropekit.model.train import TrainConfig, train

    corpus = np.zeros(4096, dtype=np.uint8)
    with pytest.raises(ValueError, match="init='tiny' has a different shape"):
        train(
            TinyConfig(d_model=64, n_heads=2, n_kv_heads=1), TrainConfig(steps=1), tmp_path, corpus=corpus, init="tiny"
        )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--models", "100,bogus"], "models must be keys from 10, 100, quarter"),
        (["--models", ","], "models must be keys from"),
        (["--lr", "-1"], "lr must be > 0.0, got -1.0"),
        (["--batch-size", "0"], "--batch-size must be an integer >= 1, got 0"),
        (["--steps", "0"], "steps must be an integer >= 1, got 0"),
        (["--init", "/no/such/checkpoint"], "no checkpoint at '/no/such/checkpoint'"),
    ],
)
def test_bad_experiment_options_fail_cleanly_before_training(tmp_path, args, fragment):
    from ropekit.cli.app import app

    result = CliRunner().invoke(app, ["experiment", "base-bound", "--out", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert fragment in " ".join(result.output.split())
    assert not (tmp_path / "models").exists()  # nothing was trained
