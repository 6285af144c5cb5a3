"""``ropekit search``: bad options fail with one line before any work; a search on a random transformers model
writes a folder that loads natively with the searched frequencies; ``eval --methods searched`` reads search.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.cli import assert_error, run

SMALL = ("--evaluations", "3", "--samples", "2", "--heldout-samples", "2")


@pytest.fixture
def no_search(monkeypatch):
    """Make loading a model an error: a command refused up front never reaches it."""
    import ropekit.search.run as search_run

    def refuse(*args, **kwargs):
        raise AssertionError("the search started")

    monkeypatch.setattr(search_run, "prepare", refuse)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--budget", "0"), ("--budget", "above 0")),
        (("--budget", "soon"), ("--budget", "30m")),
        (("--budget", "5m", "--evaluations", "3"), ("--budget", "--evaluations")),
        (("--evaluations", "0"), ("--evaluations", ">= 1")),
        (("--samples", "0"), ("--samples",)),
    ],
)
def test_bad_budget_and_sizes_fail_before_any_work(no_search, tmp_path, args, fragments):
    result = run("search", "--target-length", "4x", "--out", tmp_path / "out", *args)
    assert_error(result, *fragments)
    assert not (tmp_path / "out").exists()


def test_target_below_the_original_length_fails_before_any_work(tmp_path):
    assert_error(run("search", "--target-length", "200", "--out", tmp_path / "o"), "--target-length", "256", "200")
    assert_error(run("search", "--target-length", "0.5x", "--out", tmp_path / "o"), "--target-length", "0.5x")
    assert not (tmp_path / "o").exists()


def test_a_target_beyond_the_shipped_text_names_the_target_not_text(tmp_path):
    line = assert_error(run("search", "--target-length", "2M", "--out", tmp_path / "o"), "--target-length", "2,097,152")
    assert "--text '" not in line and "shipped held-out text" in line


def test_a_device_map_for_the_tiny_model_fails_before_it_loads(tmp_path):
    line = assert_error(run("search", "--target-length", "4x", "--out", tmp_path / "o", "--device-map", "auto"))
    assert line.startswith("error: --device-map applies to transformers models; the tiny model 'tiny' runs on the CPU")
    assert not (tmp_path / "o").exists()


def test_model_without_rope_fails_before_any_work(tmp_path):
    from ropekit.model import TinyLM, save
    from ropekit.model.tiny import TinyConfig

    nope = TinyConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64, train_length=64, position="none")
    save(TinyLM(nope), tmp_path / "nope")
    result = run("search", "--model", tmp_path / "nope", "--target-length", "4x", "--out", tmp_path / "o", *SMALL)
    assert_error(result, "--model", "no RoPE")
    assert not (tmp_path / "o").exists()


def test_finished_search_is_not_overwritten_without_force(no_search, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "search.json").write_text("{}")
    assert_error(run("search", "--target-length", "4x", "--out", tmp_path / "out"), "--force")
    assert (tmp_path / "out" / "search.json").read_text() == "{}"


@pytest.mark.hf
@pytest.mark.slow
def test_transformers_folder_loads_natively_with_the_searched_factors(llama_dir: Path, tmp_path: Path):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "searched"
    result = run("search", "--model", llama_dir, "--target-length", "4x", "--out", out, *SMALL)
    assert result.exit_code == 0, result.output
    found = json.loads((out / "search.json").read_text())
    assert found["original_length"] == 64 and found["target_length"] == 256 and found["factor"] == 4.0
    assert found["short_factor"] == found["long_factor"] and len(found["long_factor"]) == 8
    assert {"vLLM", "SGLang"} <= set(found["launch"])
    model = AutoModelForCausalLM.from_pretrained(out)  # plain transformers, no ropekit
    params = model.config.rope_parameters
    assert params["rope_type"] == "longrope" and params["long_factor"] == found["long_factor"]
    # transformers' own rotary module against the closed form 1 / (f_i · b^(2i/d)), float64
    rotary = model.model.rotary_emb
    factors = np.asarray(found["long_factor"])
    expected = 1.0 / (factors * 10000.0 ** (np.arange(0, 16, 2) / 16))
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), expected, rtol=1e-6)
    assert math.isclose(rotary.attention_scaling, math.sqrt(1 + math.log(4) / math.log(64)), rel_tol=1e-6)
    with torch.no_grad():
        assert torch.isfinite(model(torch.arange(250)[None]).logits).all()


def test_eval_runs_the_searched_factors(tmp_path):
    from ropekit.eval.methods import scaling_for

    path = tmp_path / "search.json"
    factors = [1.0 + i / 8 for i in range(16)]
    path.write_text(json.dumps({"long_factor": factors, "short_factor": factors, "original_length": 256, "factor": 4}))
    spec = scaling_for("searched", factor=2.0, train_length=256, extra={"factors": str(tmp_path)})
    assert spec.long_factor == tuple(factors) and spec.original_max_position_embeddings == 256 and spec.factor == 4
    bad = run("eval", "perplexity", "--methods", "yarn,searched", "--param", f"factors={tmp_path / 'none.json'}")
    assert_error(bad, "factors=", "search.json")
    missing = run("eval", "perplexity", "--methods", "yarn,searched")
    assert_error(missing, "--param", "factors=DIR/search.json")


@pytest.mark.slow
def test_a_stopped_search_resumes_to_the_same_result(tmp_path):
    args = ("search", "--target-length", "2x", "--evaluations", "6", "--samples", "2", "--heldout-samples", "2")
    whole = run(*args, "--out", tmp_path / "whole")
    assert whole.exit_code == 0, whole.output
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    lines = (tmp_path / "whole" / "journal.jsonl").read_text().splitlines(keepends=True)
    (stopped / "journal.jsonl").write_text("".join(lines[:4]))  # the header and three scores: stopped there
    resumed = run(*args, "--out", stopped)
    assert resumed.exit_code == 0, resumed.output
    first, second = (json.loads((tmp_path / name / "search.json").read_text()) for name in ("whole", "stopped"))
    assert second["journal"]["resumed_from"] == 3
    assert first["trace"] == second["trace"] and first["long_factor"] == second["long_factor"]


def _search_json(folder: Path, **changes) -> Path:
    """A valid search.json for the bundled model's shape (16 pairs, L0 256), with ``changes`` applied."""
    factors = [1.0 + i / 4 for i in range(16)]
    data = {
        "long_factor": factors,
        "short_factor": factors,
        "original_length": 256,
        "target_length": 1024,
        "factor": 4.0,
        "rope": {"head_dim": 32, "rotary_dim": 32, "base": 10000.0},
        "critical_pair": {"found": 7, "theory": 7},
    }
    for key, value in changes.items():
        data[key] = value(data) if callable(value) else value
    folder.mkdir(exist_ok=True)
    (folder / "search.json").write_text(json.dumps(data))
    return folder / "search.json"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"factor": math.inf}, "factor"),
        ({"rope": None}, "rope"),
        ({"long_factor": lambda d: [math.nan, *d["long_factor"][1:]]}, "long_factor"),
        ({"long_factor": lambda d: [-1.0, *d["long_factor"][1:]]}, "long_factor"),
        ({"original_length": 256.5}, "original_length"),
        ({"critical_pair": {"found": 99, "theory": 7}}, "critical_pair.found"),
        ({"rope": {"rotary_dim": 8, "base": 10000.0}}, "rotary_dim"),
    ],
)
def test_plot_searched_refuses_an_edited_search_json_in_one_line(tmp_path, change, fragment):
    path = _search_json(tmp_path / "s", **change)
    result = run("plot", "searched", "--search", path, "--out", tmp_path / "f.png")
    assert_error(result, "--search", fragment)
    assert not (tmp_path / "f.png").exists()
    if fragment != "critical_pair.found" and fragment != "rope" and fragment != "rotary_dim":  # what eval reads too
        assert_error(run("eval", "perplexity", "--methods", "searched", "--param", f"factors={path}"), fragment)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"original_length": 4096}, "original length 4,096 where the model's is 256"),
        ({"long_factor": [2.0] * 8, "short_factor": [2.0] * 8}, "8 factors where the model has 16 rotary pairs"),
        ({"original_length": 10**12}, "original_length must be <="),
    ],
)
def test_eval_refuses_factors_searched_for_another_model(tmp_path, change, fragment):
    path = _search_json(tmp_path / "s", **change)
    result = run("eval", "perplexity", "--methods", "searched", "--param", f"factors={path}", "--multiples", "2")
    assert_error(result, "factors=", fragment)


@pytest.mark.parametrize("tolerance", ["0.005", "0.5"])
def test_the_plan_says_when_the_attention_factor_alone_is_over_the_tolerance(tmp_path, tolerance):
    """The plan line prints the floor (the 1x change of longrope's attention factor alone) and the total tolerance;
    a second line says no factor list is within it exactly when the printed floor is over it."""
    import re

    flags = ("--samples", "1", "--heldout-samples", "1", "--short-tolerance", tolerance, "--dry-run")
    result = run("search", "--target-length", "8x", "--out", tmp_path / "o", *flags)
    assert result.exit_code == 0, result.output
    floor = float(re.search(r"attention factor alone costs \+([\d.]+)%, and a candidate", result.output).group(1))
    allowed = float(re.search(r"may cost ([\d.]+)% in all", result.output).group(1))
    assert allowed == float(tolerance) * 100
    said = f"no longrope factor list of s = 8 keeps 1x within {allowed:.1f}%" in result.output
    assert said == (floor > allowed) == (tolerance == "0.005") and not (tmp_path / "o").exists()
