"""MLX-LM runs every ``extend`` output as transformers does (its own loader and model; logits to float32 noise),
and where the older keys cannot say a RoPE to it, the row says "cannot express" and why."""

from __future__ import annotations

import json
import shutil

import pytest

from ropekit.engines.compare import compare_folder, probe_for
from ropekit.integrations.hf.extend import extend
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    YarnScaling,
)

pytest.importorskip("mlx_lm")
pytest.importorskip("transformers")

L0 = 64
FACTORS = tuple(1.0 + 0.1 * i for i in range(8))
#: every frequency method extend offers, as MLX-LM runs it from the written folder
SAME = {
    "none": None,
    "linear": LinearScaling(factor=4.0),
    "ntk": NTKScaling(factor=4.0),
    "dynamic": DynamicScaling(factor=4.0, original_max_position_embeddings=L0),
    "dynamic-frozen": DynamicScaling(factor=4.0, original_max_position_embeddings=L0, fixed_seq_len=256),
    "yarn": YarnScaling(factor=4.0, original_max_position_embeddings=L0),
    "yarn-betas": YarnScaling(factor=4.0, original_max_position_embeddings=L0, beta_fast=16.0, beta_slow=2.0),
    "yarn-attention": YarnScaling(factor=4.0, original_max_position_embeddings=L0, attention_factor=1.3),
    "yarn-mscale": YarnScaling(factor=4.0, original_max_position_embeddings=L0, mscale=0.7),
    "llama3": Llama3Scaling(factor=4.0, original_max_position_embeddings=L0),
    "longrope": LongRopeScaling(
        short_factor=FACTORS, long_factor=FACTORS, original_max_position_embeddings=L0, factor=4.0
    ),
    "proportional": ProportionalScaling(factor=4.0),
    "base": BaseChange(base=500000.0),
}
#: what the older keys cannot say to MLX-LM 0.32, with the reason the row must give
CANNOT = {
    "yarn-paper": (YarnScaling(factor=4.0, original_max_position_embeddings=L0, ramp="paper"), "attention_factor"),
    "yarn-no-truncate": (YarnScaling(factor=4.0, original_max_position_embeddings=L0, truncate=False), "truncate"),
    "yarn-attention-below-1": (
        YarnScaling(factor=4.0, original_max_position_embeddings=L0, attention_factor=0.5),
        "no mscale",
    ),
}


def _mlx_row(folder):
    probe = probe_for(folder, logit_tokens=160)
    _, rows = compare_folder(folder, probe, engines=("MLX-LM",))
    return rows[0]


@pytest.mark.parametrize("name", list(SAME))
def test_mlx_runs_the_extend_output_as_transformers(name, llama_dir, tmp_path) -> None:
    folder = extend(llama_dir, SAME[name], tmp_path / "out", target_length=4 * L0).out
    row = _mlx_row(folder)
    assert row.verdict == "same", row.detail
    assert row.numbers["logits_max_diff"] < 1e-4 and row.numbers["argmax_agreement"] == 1.0


@pytest.mark.parametrize("name", list(CANNOT))
def test_what_mlx_cannot_read_is_said_in_the_row_and_by_extend(name, llama_dir, tmp_path) -> None:
    scaling, reason = CANNOT[name]
    result = extend(llama_dir, scaling, tmp_path / "out", target_length=4 * L0)
    assert any(note.startswith("MLX-LM cannot express") and reason in note for note in result.notes), result.notes
    row = _mlx_row(result.out)
    assert row.verdict == "cannot express" and reason in row.detail
    assert row.numbers["logits_max_diff"] > 1e-3  # and it does compute another RoPE: the verdict is not idle


def test_without_the_older_keys_mlx_runs_another_rope(llama_dir, tmp_path) -> None:
    """The verdict can fail: the same folder with only rope_parameters (what transformers 5 alone writes)."""
    folder = extend(llama_dir, YarnScaling(factor=4.0, original_max_position_embeddings=L0), tmp_path / "out").out
    config = json.loads((folder / "config.json").read_text())
    del config["rope_theta"], config["rope_scaling"]
    (folder / "config.json").write_text(json.dumps(config))
    row = _mlx_row(folder)
    assert row.verdict == "differs" and "reads rope_scaling" in row.detail and row.numbers["logits_max_diff"] > 0.1


def test_a_wrong_older_key_is_reported_as_an_unexplained_difference(llama_dir, tmp_path) -> None:
    shutil.copytree(llama_dir, tmp_path / "wrong")
    config = json.loads((tmp_path / "wrong" / "config.json").read_text())
    config["rope_theta"] = 20000.0  # transformers reads rope_parameters' 10,000; MLX-LM reads this
    (tmp_path / "wrong" / "config.json").write_text(json.dumps(config))
    row = _mlx_row(tmp_path / "wrong")
    assert row.verdict == "differs" and "not explained" in row.detail and "from position 1 " in row.detail


def test_a_model_file_that_exits_as_it_loads_is_a_row(llama_dir, tmp_path, monkeypatch) -> None:
    """MLX-LM's olmo.py calls sys.exit where ai2-olmo is missing: the row says so, and the table goes on."""
    from ropekit.engines import mlx_lm

    def exits(*_args, **_kwargs):
        print("To run olmo install ai2-olmo: pip install ai2-olmo")
        raise SystemExit(1)

    monkeypatch.setattr(mlx_lm, "answer", exits)
    rows = dict((row.engine, row) for row in compare_folder(llama_dir, probe_for(llama_dir), engines=("MLX-LM",))[1])
    row = rows["MLX-LM"]
    assert row.verdict == "cannot run here"
    assert row.detail.endswith("exits as it loads: To run olmo install ai2-olmo: pip install ai2-olmo")


def test_the_file_rules_hold_for_the_installed_files() -> None:
    """``mlx_lm.file_rule`` is read from mlx-lm's own files: each rule's cause is still in the installed file (an
    upgrade that changes one fails here, not silently in a verdict)."""
    import re
    from pathlib import Path

    from ropekit.engines.model_class import mlx_model_file

    source = {kind: Path(mlx_model_file(kind)).read_text() for kind in ("minicpm3", "qwen2_moe", "gemma3_text")}
    assert "SuScaledRoPE(" in source["minicpm3"] and "initialize_rope" not in source["minicpm3"]
    assert "currently only supports 'linear'" in source["qwen2_moe"]
    rope = re.search(r"self\.rope = nn\.RoPE\((.*?)\)", source["qwen2_moe"], re.S).group(1)
    assert "scale" not in rope and "factor" not in rope
    sliding = source["gemma3_text"].split("if self.is_sliding:")[1].split("else:")[0]
    assert "rope_local_base_freq" in sliding and "scaling_config" not in sliding


def test_mlx_lms_longrope_drops_the_models_traditional_pairs() -> None:
    """MLX-LM's initialize_rope builds SuScaledRoPE without ``traditional``, which DeepSeek-V3's file passes as
    True: the rule names it, for interleaved models only."""
    import inspect

    from mlx_lm.models import rope_utils

    from ropekit.engines.mlx_lm import file_rule

    source = inspect.getsource(rope_utils.initialize_rope)
    longrope = source.split('rope_type == "longrope"')[1].split("elif")[0]
    assert "SuScaledRoPE(" in longrope and "traditional" not in longrope
    assert "rotates pairs (i, i + d/2)" in file_rule("deepseek_v3", "longrope", None, interleaved=True)
    assert file_rule("deepseek_v3", "longrope", None, interleaved=False) is None
