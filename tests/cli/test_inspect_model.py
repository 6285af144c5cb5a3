"""``ropekit inspect --model``: the layout of a model folder, a config.json or a GGUF file, in one screen.

Oracles: the config.json forms real models ship (abridged to the keys that matter), transformers' own
``yarn_apply_mscale`` for DeepSeek's softmax-scale term, and the SmolLM2 GGUF's own metadata (base 100000, head 64).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

QWEN2_VL = {  # Qwen2-VL-7B-Instruct (4.x form)
    "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": 3584,
    "num_attention_heads": 28, "num_hidden_layers": 28, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}  # fmt: skip
QWEN3_VL = {  # Qwen3-VL: the language model nested in text_config
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "num_hidden_layers": 36, "rope_theta": 5000000,
                    "max_position_embeddings": 262144,
                    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True}},
}  # fmt: skip
GEMMA3 = {  # Gemma 3: one RoPE per layer type, five sliding layers per global one
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 256, "num_hidden_layers": 6,
    "sliding_window": 1024, "max_position_embeddings": 131072,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
}  # fmt: skip
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "num_attention_heads": 128, "num_hidden_layers": 61, "qk_rope_head_dim": 64, "head_dim": 64, "rope_interleave": True,
    "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
}  # fmt: skip
GPT_OSS = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "head_dim": 64, "num_hidden_layers": 24,
    "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "rope_theta": 150000,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                     "beta_slow": 1.0, "truncate": False},
}  # fmt: skip
SMOLLM3 = {
    "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16,
    "num_hidden_layers": 8, "rope_theta": 5000000.0, "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0],
    "max_position_embeddings": 65536,
}  # fmt: skip


def inspect_json(tmp_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["inspect", "--model", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["layout"]


def test_mrope_layouts(tmp_path: Path) -> None:
    qwen2 = inspect_json(tmp_path, QWEN2_VL)
    assert qwen2["mrope"] == {"sections": [16, 24, 24], "layout": "blocked"}
    assert qwen2["rope"]["rotary_dim"] == 128 and qwen2["rope"]["base"] == 1e6
    assert inspect_json(tmp_path, QWEN3_VL)["mrope"] == {"sections": [24, 20, 20], "layout": "interleaved"}


def test_per_layer_type_rope_and_sliding_windows(tmp_path: Path) -> None:
    layout = inspect_json(tmp_path, GEMMA3)
    assert layout["rope.full_attention"]["rope_type"] == "linear"
    assert layout["rope.sliding_attention"]["base"] == 10000.0
    assert layout["layer_types"] == {"sliding_attention": 5, "full_attention": 1}


def test_deepseek_mla_and_softmax_term(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    assert transformers
    layout = inspect_json(tmp_path, DEEPSEEK_V3)
    assert layout["mla"] == 64 and layout["rope"]["pairing"].startswith("interleaved")
    assert layout["softmax_mscale"] == pytest.approx(
        yarn_apply_mscale({**DEEPSEEK_V3["rope_scaling"], "rope_type": "yarn"}, 1.0), rel=1e-15
    )


def test_gpt_oss_sinks_and_untruncated_yarn(tmp_path: Path) -> None:
    layout = inspect_json(tmp_path, GPT_OSS)
    assert layout["sinks"] is True and layout["rope"]["scaling"]["truncate"] is False
    assert layout["layer_types"] == {"sliding_attention": 12, "full_attention": 12}


def test_nope_layers_are_reported(tmp_path: Path) -> None:
    layout = inspect_json(tmp_path, SMOLLM3)
    assert layout["nope"]["nope_layers"] == [3, 7]


def test_folder_and_errors(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN2_VL))
    table = CliRunner().invoke(app, ["inspect", "--model", str(tmp_path)])
    assert table.exit_code == 0 and "M-RoPE" in table.output and "blocked" in table.output
    missing = CliRunner().invoke(app, ["inspect", "--model", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    bare = CliRunner().invoke(app, ["inspect"])
    assert bare.exit_code == 2 and "--train-length is needed" in bare.output
    (tmp_path / "bad.json").write_text(json.dumps({"model_type": "qwen2_vl", "head_dim": 64, "rope_theta": 1e4}))
    refused = CliRunner().invoke(app, ["inspect", "--model", str(tmp_path / "bad.json")])
    assert refused.exit_code == 2 and "no mrope_section" in refused.output


@pytest.mark.real
@pytest.mark.slow
def test_gguf(smollm2_path: Path) -> None:
    result = CliRunner().invoke(app, ["inspect", "--model", str(smollm2_path), "--json"])
    assert result.exit_code == 0, result.output
    rope = json.loads(result.stdout)["layout"]["rope"]
    assert (rope["base"], rope["head_dim"], rope["rotary_dim"]) == (100000.0, 64, 64)


def test_inspect_and_plan_read_the_bundled_tiny_model_as_search_and_eval_do() -> None:
    """``--model tiny``: the tiny model's own RoPE (head 32 = d_model 128 / 4 heads, base 10000, trained at 256),
    read from its checkpoint, not refused as a missing path."""
    from ropekit.model.checkpoint import load_tiny_config

    tiny = load_tiny_config("tiny")
    result = CliRunner().invoke(app, ["inspect", "--model", "tiny", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["head_dim"] == tiny.d_model // tiny.n_heads == data["rotary_dim"]
    assert data["base"] == tiny.rope_base and data["train_length"] == tiny.train_length
    planned = CliRunner().invoke(app, ["plan", "--model", "tiny", "--target-length", "1k"])
    assert planned.exit_code == 0, planned.output
