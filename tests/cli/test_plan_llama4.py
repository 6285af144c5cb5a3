"""``plan --model`` on a Llama 4 config: what its attention temperature and chunked attention do at the target.

Oracles: the temperature's formula in transformers' ``Llama4TextAttention``, 1 + attn_scale · log1p(floor((p + 1) /
floor_scale)) at 0-based position p, written here by hand; the same plan given the numbers by hand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llama4_dir(tmp_path_factory) -> Path:
    from transformers import Llama4TextConfig

    path = tmp_path_factory.mktemp("llama4")
    Llama4TextConfig(
        vocab_size=101,
        hidden_size=64,
        intermediate_size=96,
        intermediate_size_mlp=96,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    ).save_pretrained(path)  # transformers' defaults: every 4th layer NoPE, floor_scale 8192, attn_scale 0.1
    return path


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_plan_says_what_the_temperature_does_at_the_target(llama4_dir: Path) -> None:
    args = ("plan", "--model", str(llama4_dir), "--target-length", "32k", "--no-robust")
    data = json.loads(run(*args, "--json").output)["llama4_long_context"]
    assert data["nope_layers"] == [3, 7] and data["chunked_layers"] == [0, 1, 2, 4, 5, 6]
    assert data["temperature_at_train"] == pytest.approx(1 + 0.1 * math.log1p(math.floor(8192 / 8192)), rel=1e-14)
    assert data["temperature_at_target"] == pytest.approx(1 + 0.1 * math.log1p(math.floor(32768 / 8192)), rel=1e-14)
    text = run(*args)
    assert text.exit_code == 0, text.output
    assert "q × 1.0693 at the last of 8,192 positions, × 1.1609 at the last of 32,768" in text.output
    assert "blocks of 8,192 tokens" in text.output
    by_hand = run("plan", "--head-dim", "16", "--base", "500000", "--original-length", "8k", *args[3:])
    # the same plan after the model's lines; its launch lines name the model where the plan by hand says MODEL
    assert text.output.replace(str(llama4_dir), "MODEL").endswith(by_hand.output)


def test_a_model_without_temperature_gets_no_temperature_line(llama4_dir: Path, tmp_path: Path) -> None:
    config = json.loads((llama4_dir / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "attn_temperature_tuning": False}))
    result = run("plan", "--model", str(tmp_path), "--target-length", "16k", "--no-robust")
    assert result.exit_code == 0 and "temperature" not in result.output and "chunked attention" in result.output
    bad = {**config, "floor_scale": 0}
    (tmp_path / "config.json").write_text(json.dumps(bad))
    result = run("plan", "--model", str(tmp_path), "--target-length", "16k")
    assert result.exit_code == 2 and "floor_scale must be > 0" in result.output and "Traceback" not in result.output
