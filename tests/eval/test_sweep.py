"""Method sweeps on a tiny random checkpoint: rows against direct forward passes, the recorded context against
its sources (sha256 of the shipped text, ropekit's version), CSV against JSON, and determinism."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import ropekit
from ropekit.eval.loader import load_eval_model
from ropekit.eval.sweep import SweepResult, SweepSettings, best_by_length, count_steps, run_sweep
from ropekit.model import load
from ropekit.model.corpus import heldout_bytes

TRAIN_LENGTH = 128  # of the conftest's tiny_checkpoint

SETTINGS = SweepSettings(
    methods=("none", "linear", "yarn", "longrope"),
    multiples=(1, 2),
    passkey_multiples=(1,),
    depths=(0.5,),
    trials=2,
    max_tokens=256,
)


@pytest.fixture(scope="module")
def swept(tiny_checkpoint: Path) -> tuple[SweepResult, list[str]]:
    steps: list[str] = []
    model = load_eval_model(tiny_checkpoint)
    return run_sweep(model, SETTINGS, on_step=steps.append), steps


def test_rows_cover_every_method_and_length_and_longrope_is_skipped(swept) -> None:
    result, steps = swept
    assert [(r["method"], r["length"]) for r in result.perplexity] == [
        (m, n) for m in ("none", "linear", "yarn") for n in (TRAIN_LENGTH, 2 * TRAIN_LENGTH)
    ]
    assert [(r["method"], r["length"], r["depth"], r["trials"]) for r in result.passkey] == [
        (m, TRAIN_LENGTH, 0.5, 2) for m in ("none", "linear", "yarn")
    ]
    assert [s["method"] for s in result.skipped] == ["longrope"]
    assert "short/long factors" in result.skipped[0]["reason"]
    assert len(steps) == count_steps(SETTINGS, TRAIN_LENGTH) == 4 * 2


def test_rows_record_the_method_and_its_parameters(swept) -> None:
    result, _ = swept
    for row in result.perplexity:
        assert row["mode"] == "nonoverlap"
        if row["method"] == "none":  # plain RoPE records s = 1 at every length, not the length ratio
            assert row["scaling"] == {"rope_type": "default"} and row["factor"] == 1.0
        else:
            assert row["scaling"]["rope_type"] == row["method"]
            assert row["scaling"]["factor"] == row["factor"] == max(1.0, row["length"] / TRAIN_LENGTH)
        if row["method"] == "yarn":
            assert row["scaling"]["original_max_position_embeddings"] == TRAIN_LENGTH


def test_perplexity_equals_a_direct_forward_pass(swept, tiny_checkpoint: Path) -> None:
    """none at the training length with 256 scored tokens: windows [0, 129) and [128, 257) of the held-out bytes."""
    result, _ = swept
    model = load(tiny_checkpoint)
    data = torch.frombuffer(bytearray(heldout_bytes()[: 2 * TRAIN_LENGTH + 1]), dtype=torch.uint8).long()
    losses = []
    with torch.no_grad():
        for start in (0, TRAIN_LENGTH):
            window = data[start : start + TRAIN_LENGTH + 1]
            logits = model(window[None, :-1])[0].double()
            losses.append(F.cross_entropy(logits, window[1:], reduction="none"))
    expected = math.exp(float(torch.cat(losses).mean()))
    (row,) = [r for r in result.perplexity if r["method"] == "none" and r["length"] == TRAIN_LENGTH]
    assert row["tokens"] == row["inside_tokens"] == 2 * TRAIN_LENGTH
    assert row["perplexity"] == pytest.approx(expected, rel=1e-5)


def test_scaling_with_factor_one_is_plain_rope(swept) -> None:
    """At the training length auto gives s = 1, and linear with s = 1 is exactly plain RoPE."""
    result, _ = swept
    at_train = {r["method"]: r["perplexity"] for r in result.perplexity if r["length"] == TRAIN_LENGTH}
    assert at_train["linear"] == at_train["none"]


def test_context_names_model_text_hash_and_version(swept, tiny_checkpoint: Path) -> None:
    result, _ = swept
    context = result.context
    assert context["ropekit_version"] == ropekit.__version__
    assert context["eval_text_sha256"] == hashlib.sha256(heldout_bytes()).hexdigest()
    assert context["eval_text_tokens"] == len(heldout_bytes())
    assert context["model"]["name"] == str(tiny_checkpoint)
    assert context["model"]["kind"] == "ropekit-tiny"
    assert context["model"]["config"]["train_length"] == TRAIN_LENGTH
    assert context["settings"]["methods"] == SETTINGS.methods
    assert context["train_length"] == TRAIN_LENGTH


def test_write_json_and_csv_carry_the_full_context(swept, tmp_path: Path) -> None:
    result, _ = swept
    result.write(tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == json.loads(json.dumps(result.to_dict()))
    assert saved["skipped"][0]["method"] == "longrope"
    for name in ("perplexity", "passkey"):
        with (tmp_path / f"{name}.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == len(saved[name])
        for row, original in zip(rows, saved[name], strict=True):
            assert row["method"] == original["method"]
            assert int(row["length"]) == original["length"]
            assert json.loads(row["scaling"]) == original["scaling"]
            assert row["model"] == saved["context"]["model"]["name"]
            assert row["eval_text_sha256"] == saved["context"]["eval_text_sha256"]
            assert row["ropekit_version"] == ropekit.__version__
        if name == "perplexity":
            assert [float(r["perplexity"]) for r in rows] == [r["perplexity"] for r in saved[name]]
        else:
            assert [json.loads(r["ci95"]) for r in rows] == [r["ci95"] for r in saved[name]]


def test_sweeps_are_deterministic(swept, tiny_checkpoint: Path) -> None:
    again = run_sweep(load_eval_model(tiny_checkpoint), SETTINGS)
    assert again.to_dict() == swept[0].to_dict()


def test_only_the_enabled_evaluation_lengths_run(tiny_checkpoint: Path) -> None:
    settings = SweepSettings(methods=("none",), multiples=(2,), passkey_multiples=(1,), max_tokens=64, trials=1)
    steps: list[str] = []
    result = run_sweep(load_eval_model(tiny_checkpoint), settings, passkey=False, on_step=steps.append)
    assert steps == [f"none @ {2 * TRAIN_LENGTH}"]
    assert [r["length"] for r in result.perplexity] == [2 * TRAIN_LENGTH] and result.passkey == []
    assert count_steps(settings, TRAIN_LENGTH, passkey=False) == 1


def test_model_scaling_is_restored_after_the_sweep(tiny_checkpoint: Path) -> None:
    model = load_eval_model(tiny_checkpoint)
    ids = model.encode(heldout_bytes()[:300])[None]
    before = model.logits(ids)
    run_sweep(model, SweepSettings(methods=("yarn",), multiples=(2,), max_tokens=64), passkey=False)
    torch.testing.assert_close(model.logits(ids), before, rtol=0, atol=0)


def test_best_by_length_ignores_missing_and_non_finite_values() -> None:
    rows = [
        {"method": "none", "length": 8, "perplexity": 3.0},
        {"method": "yarn", "length": 8, "perplexity": 2.0},
        {"method": "none", "length": 16, "perplexity": math.inf},
        {"method": "yarn", "length": 16, "perplexity": None},
        {"method": "ntk", "length": 16, "perplexity": 9.0},
    ]
    assert best_by_length(rows) == {8: ("yarn", 2.0), 16: ("ntk", 9.0)}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"methods": ()}, "methods"),
        ({"multiples": (1, 0)}, "multiples"),
        ({"depths": (0.5, -0.1)}, "depths"),
        ({"factor": 0.5}, "factor"),
        ({"factor": "bigger"}, "factor"),
        ({"mode": "strided"}, "mode"),
        ({"trials": 0}, "trials"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stride": 0}, "stride"),
    ],
)
def test_settings_are_validated(changes: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        SweepSettings(**{"methods": ("none",), **changes})
