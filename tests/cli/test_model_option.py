"""``inspect --model`` and ``plan --model``: the model's RoPE and training length, and its NoPE layers.

Oracles: the config transformers writes for a SmolLM3 (``save_pretrained``), whose layers' ``use_rope`` flags
transformers reads as the ``no_rope_layers`` list, and the same commands given the numbers by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.hf_models import random_hf_config
from ropekit.cli.app import app

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def smollm3_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("smollm3")
    random_hf_config(
        "smollm3",
        vocab=101,
        intermediate=96,
        layers=8,
        positions=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ).save_pretrained(path)  # no_rope_layers left to transformers: every 4th layer NoPE
    return path


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_inspect_reads_the_model_and_lists_its_nope_layers(smollm3_dir: Path) -> None:
    result = run("inspect", "--model", str(smollm3_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["model"]["rope_layout"]["nope_layers"] == [3, 7]
    assert data["model"]["rope_layout"]["rope_layers"] == [0, 1, 2, 4, 5, 6]
    by_hand = json.loads(run("inspect", "--head-dim", "16", "--base", "50000", "--train-length", "4k", "--json").output)
    assert data["layout"]["nope"]["nope_layers"] == [3, 7]  # the layout table's NoPE row
    assert {k: v for k, v in data.items() if k not in ("model", "layout")} == by_hand
    text = run("inspect", "--model", str(smollm3_dir))
    assert text.exit_code == 0 and "NoPE layers" in text.output and "layout of" in text.output


def test_plan_reads_the_model_and_says_what_nope_layers_mean(smollm3_dir: Path) -> None:
    result = run("plan", "--model", str(smollm3_dir), "--target-length", "16k", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["model"]["rope_layout"]["nope_layers"] == [3, 7]
    by_hand = run("plan", "--head-dim", "16", "--base", "50000", "--original-length", "4k", "--target-length", "16k")
    text = run("plan", "--model", str(smollm3_dir), "--target-length", "16k")
    assert text.exit_code == 0 and "NoPE: layers 3, 7" in text.output and "RoPE layers only" in text.output
    # the same plan, after the model's line; its launch lines name the model where the plan by hand says MODEL
    assert text.output.replace(str(smollm3_dir), "MODEL").endswith(by_hand.output)


def test_a_plain_model_has_no_nope_layers_and_options_win(llama_dir: Path) -> None:
    data = json.loads(run("inspect", "--model", str(llama_dir), "--base", "20000", "--json").output)
    assert data["model"]["rope_layout"] is None and data["base"] == 20000.0 and data["head_dim"] == 16
    assert "every layer applies RoPE" in run("plan", "--model", str(llama_dir), "--target-length", "8k").output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect"], "--train-length is needed"),
        (["plan", "--target-length", "8k"], "--original-length is needed"),
        (["inspect", "--model", "/nonexistent/model"], "--model"),
    ],
)
def test_missing_lengths_and_models_are_one_line_errors(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output
