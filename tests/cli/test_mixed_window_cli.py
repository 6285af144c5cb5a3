"""``--mixed-window`` on ``finetune`` and ``train``: bad options are one-line errors before any work, and what is
given reaches the run.

Oracles: the option each case types (it must appear in the one-line error), the file system (nothing created), and a
recorder standing in for training.
"""

from __future__ import annotations

import json

import pytest

from helpers.cli import assert_error, run

LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]


@pytest.fixture
def factors(tmp_path):
    path = tmp_path / "factors.json"
    path.write_text(json.dumps(LONG))
    return path


def test_finetune_mixed_window_needs_longrope(llama_dir, text_file, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    args = ["finetune", "--model", llama_dir, "--text", text_file, "--target-length", "128", "-o", out]
    assert_error(run(*args, "--scaling", "yarn", "--mixed-window"), "--mixed-window", "longrope", "got yarn")
    assert not out.exists()


def test_finetune_mixed_window_needs_short_and_long_documents(llama_dir, text_file, tmp_path, factors):
    """The shared toy corpus has only documents longer than the byte Llama's 64 tokens."""
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    args = ["finetune", "--model", llama_dir, "--text", text_file, "--target-length", "256", "-o", out]
    result = run(*args, "--scaling", "longrope", "--factors", factors, "--mixed-window")
    assert_error(result, "--text", "mixed windows need documents of at most 64 tokens", "0 short")
    assert not out.exists()


def test_train_mixed_window_without_longrope_is_refused(tmp_path, no_training):
    out = tmp_path / "run"
    assert_error(run("train", "--out", out, "--mixed-window"), "--mixed-window", "got plain RoPE")
    assert_error(run("train", "--out", out, "--mixed-window", "--scaling", "yarn"), "--mixed-window", "got yarn")
    assert_error(run("train", "--out", out, "--param", "factor=2"), "--param needs --scaling")
    assert no_training == [] and not out.exists()


def test_train_mixed_window_reaches_the_run_with_the_original_rope_as_short_list(tmp_path, no_training, factors):
    out = tmp_path / "run"
    args = ["train", "--out", out, "--init", "tiny", "--train-length", "1k", "--d-model", "128"]
    tiny_factors = tmp_path / "tiny.json"
    tiny_factors.write_text(json.dumps([1.0] * 8 + [4.0] * 8))  # the tiny model: head_dim 32, 16 pairs
    result = run(*args, "--scaling", "longrope", "--factors", tiny_factors, "--mixed-window")
    assert result.exit_code == 0, result.output
    ((config, settings, _),) = no_training
    assert settings.mixed_window is True
    assert config.scaling.original_max_position_embeddings == 256  # --init tiny's training length
    assert config.scaling.factor == 4.0 and config.scaling.long_factor == (1.0,) * 8 + (4.0,) * 8


def test_finetune_mixed_window_takes_a_longrope_models_own_lists(make_llama, tmp_path):
    """`--scaling longrope` without lists on a folder whose rope_parameters are longrope trains with those lists and
    writes them back (the model's own short list here is the original RoPE)."""
    pytest.importorskip("transformers")
    from helpers.mixed_text import write_mixed_text

    own = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 8, "long_factor": LONG}
    own |= {"original_max_position_embeddings": 64, "factor": 4.0}
    model = make_llama(tmp_path / "m", rope_parameters=own, positions=256)
    out = tmp_path / "out"
    args = ["finetune", "--model", model, "--text", write_mixed_text(tmp_path / "t.jsonl"), "--target-length", "256"]
    result = run(*args, "--scaling", "longrope", "--mixed-window", "--steps", "1", "--no-evaluate", "-o", out)
    assert result.exit_code == 0, result.output
    written = json.loads((out / "config.json").read_text())["rope_parameters"]
    assert written["long_factor"] == LONG and written["short_factor"] == [1.0] * 8
    assert "rows on the short list (positions below L0 64" in result.stderr
