"""``ropekit extend`` writes only folders transformers loads, with the RoPE ropekit means, on small random models.

Oracles: transformers itself (the written folder loaded by ``AutoModelForCausalLM``; its rotary module's buffer
against transformers' own ``ROPE_INIT_FUNCTIONS`` for the method on a Llama config with the same dict), MLX-LM's own
``ModelArgs`` where mlx_lm is installed, and the config's own values.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("transformers")
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from helpers.cli import assert_error, run
from helpers.hf_models import random_hf_config, random_hf_folder

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

PHI = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "positions": 256}
#: Phi-3 (full rotary) and a Phi-4-mini-like partial rotary 0.75 (head size 16: 12 rotary dims)
PHI_FAMILY = {"phi3": {}, "phi4-mini": {"partial_rotary_factor": 0.75}}


@pytest.fixture(scope="module")
def phi_folders(tmp_path_factory):
    folders = {}
    for name, extra in PHI_FAMILY.items():
        rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0, **extra}
        path = tmp_path_factory.mktemp(name)
        folders[name] = random_hf_folder(
            path, "phi3", rope_parameters=rope, original_max_position_embeddings=256, **PHI
        )
    return folders


def _method_dict(method: str, partial: float) -> dict:
    base = {"rope_type": method, "rope_theta": 10000.0, "partial_rotary_factor": partial, "factor": 4.0}
    extra = {
        "linear": {},
        "llama3": {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
        "yarn": {"original_max_position_embeddings": 256},
    }[method]
    return base | extra


@pytest.mark.parametrize("name", sorted(PHI_FAMILY))
@pytest.mark.parametrize("method", ["linear", "llama3", "yarn"])
def test_phi3_family_extends_to_a_folder_transformers_loads(phi_folders, tmp_path, name, method) -> None:
    out = tmp_path / "out"
    result = run("extend", "--model", phi_folders[name], "--scaling", method, "--factor", "4", "-o", out)
    assert result.exit_code == 0, result.output
    assert "static form" in result.output  # Phi3Config takes default and longrope only: said, not hidden
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    rotary = model.model.rotary_emb
    partial = PHI_FAMILY[name].get("partial_rotary_factor", 1.0)
    oracle = random_hf_config("llama", positions=1024, rope_parameters=_method_dict(method, partial))
    inv_freq, factor = ROPE_INIT_FUNCTIONS[method](oracle)
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), inv_freq.double().numpy(), rtol=1e-5)
    assert rotary.attention_scaling == pytest.approx(factor, rel=1e-6)


def test_phi3_dynamic_is_refused_by_name_before_anything_is_written(phi_folders, tmp_path) -> None:
    out = tmp_path / "out"
    result = run("extend", "--model", phi_folders["phi3"], "--scaling", "dynamic", "--factor", "4", "-o", out)
    assert_error(result, "phi3", "Phi3Config", "dynamic")
    assert not out.exists()


def test_llama4_scout_rope_extends(tmp_path) -> None:
    scout = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
    }
    source = random_hf_folder(tmp_path / "scout", "llama4", rope_parameters=scout, positions=1024)
    result = run("extend", "--model", source, "--scaling", "yarn", "--factor", "32", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    loaded = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert loaded.rope_parameters["rope_type"] == "yarn"


@pytest.fixture(scope="module")
def neox_folder(tmp_path_factory):
    """A GPT-NeoX folder whose config.json also has the hub's older keys (Pythia's rotary_emb_base, rotary_pct)."""
    path = random_hf_folder(tmp_path_factory.mktemp("neox"), "gpt_neox", positions=256)
    config = json.loads((path / "config.json").read_text())
    config.update(rotary_emb_base=10000.0, rotary_pct=0.25)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_base_change_updates_every_spelling_of_the_base(neox_folder, tmp_path) -> None:
    out = tmp_path / "out"
    result = run("extend", "--model", neox_folder, "--base", "500000", "-o", out)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["rotary_emb_base"] == config["rope_theta"] == config["rope_parameters"]["rope_theta"] == 500000.0
    assert config["rotary_pct"] == config["rope_parameters"]["partial_rotary_factor"] == 0.25
    gpt_neox = pytest.importorskip("mlx_lm.models.gpt_neox")
    args = gpt_neox.ModelArgs.from_dict(config)  # MLX-LM's own reading of the written file
    assert args.rotary_emb_base == 500000.0


def test_disagreeing_keys_are_refused_naming_both_values(tmp_path) -> None:
    source = random_hf_folder(tmp_path / "src", "llama", positions=256)
    config = json.loads((source / "config.json").read_text())
    config["rope_theta"] = 500000.0  # rope_parameters says 10000
    (source / "config.json").write_text(json.dumps(config))
    result = run("extend", "--model", source, "--scaling", "linear", "--factor", "2", "-o", tmp_path / "out")
    assert_error(result, "rope_theta = 500000.0", "rope_parameters.rope_theta = 10000.0")
    assert not (tmp_path / "out").exists()


def test_a_stale_dual_chunk_config_is_dropped_and_said(tmp_path) -> None:
    source = random_hf_folder(tmp_path / "src", "qwen2", positions=256)
    config = json.loads((source / "config.json").read_text())
    config["dual_chunk_attention_config"] = {"chunk_size": 200, "local_size": 20, "original_max_position_embeddings": 0}
    (source / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    result = run("extend", "--model", source, "--scaling", "yarn", "--factor", "4", "-o", out)
    assert result.exit_code == 0, result.output
    assert "dual_chunk_attention_config" not in json.loads((out / "config.json").read_text())
    assert "dual_chunk_attention_config dropped" in result.output


def test_gemma_scaling_says_mlx_lm_reads_none(tmp_path) -> None:
    source = random_hf_folder(tmp_path / "src", "gemma", positions=256)
    result = run("extend", "--model", source, "--scaling", "linear", "--factor", "4", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "gemma.py reads no rope_scaling" in result.output


def test_yarn_note_names_the_transformers_versions_that_differ(tmp_path) -> None:
    source = random_hf_folder(tmp_path / "src", "llama", positions=256)
    result = run("extend", "--model", source, "--scaling", "yarn", "--factor", "4", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "transformers 4.x releases that place the ramp at max_position_embeddings" in result.output
    # the claim, by transformers' own function: without original_max_position_embeddings in the dict (the older
    # reading) the ramp sits at max_position_embeddings = 1024 and the frequencies differ
    written = json.loads((tmp_path / "out" / "config.json").read_text())["rope_parameters"]
    older = {
        key: value for key, value in written.items() if key not in ("original_max_position_embeddings", "truncate")
    }
    ours = ROPE_INIT_FUNCTIONS["yarn"](random_hf_config("llama", positions=1024, rope_parameters=written))[0]
    theirs = ROPE_INIT_FUNCTIONS["yarn"](random_hf_config("llama", positions=1024, rope_parameters=older))[0]
    assert not np.allclose(ours.numpy(), theirs.numpy(), rtol=1e-3)
