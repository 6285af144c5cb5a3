"""vLLM's own rotary module (its environment, a subprocess) against transformers, and its by-design differences."""

from __future__ import annotations

import json

import pytest

from ropekit.engines import vllm
from ropekit.engines.compare import compare_folder, probe_for
from ropekit.integrations.hf.extend import extend
from ropekit.scaling import DynamicScaling, LinearScaling, YarnScaling

pytest.importorskip("transformers")
if vllm.python() is None:
    pytest.skip("needs the vLLM environment (.venv-vllm or ROPEKIT_VLLM_PYTHON)", allow_module_level=True)

L0 = 64


def _row(folder):
    _, rows = compare_folder(folder, probe_for(folder), engines=("vLLM",))
    return rows[0]


@pytest.mark.parametrize(
    "scaling",
    [  # each case starts vLLM (about 12 s); the default suite runs the one that carries the most keys
        pytest.param(LinearScaling(factor=4.0), marks=pytest.mark.slow),
        pytest.param(YarnScaling(factor=4.0, original_max_position_embeddings=L0), marks=pytest.mark.slow),
        YarnScaling(factor=4.0, original_max_position_embeddings=L0, attention_factor=1.3),
    ],
    ids=["linear", "yarn", "yarn-attention"],  # the last carries mscale/mscale_all_dim for MLX-LM too
)
def test_vllm_computes_what_transformers_computes(scaling, llama_dir, tmp_path) -> None:
    row = _row(extend(llama_dir, scaling, tmp_path / "out", target_length=4 * L0).out)
    assert row.verdict == "same", row.detail
    assert f"--max-model-len {4 * L0}" in row.launch and "--hf-overrides" in row.launch


def test_vllms_dynamic_tables_only_the_original_length(llama_dir, tmp_path) -> None:
    """vLLM 0.33's Llama class passes max_position_embeddings (L0 in a dynamic folder) to get_rope, and its dynamic
    class tables that many positions (plain RoPE's there: the base kept): served at 4·L0, positions past L0 index
    out of its table. Measured on the class built as vLLM builds it."""
    scaling = DynamicScaling(factor=4.0, original_max_position_embeddings=L0)
    row = _row(extend(llama_dir, scaling, tmp_path / "out", target_length=4 * L0).out)
    assert row.verdict == "cannot express" and f"tables {L0} positions" in row.detail, row.detail
    assert row.numbers["recorded"]["max_position"] == L0 and row.numbers[f"table_max_diff@{L0}"] < 1e-5


def test_it_reads_the_folder_as_transformers_reads_it(llama_dir, tmp_path) -> None:
    """A folder with only the older keys (as hub configs have them): vLLM gets transformers' reading of them."""
    folder = extend(llama_dir, LinearScaling(factor=4.0), tmp_path / "out", target_length=4 * L0).out
    config = json.loads((folder / "config.json").read_text())
    del config["rope_parameters"]
    (folder / "config.json").write_text(json.dumps(config))
    assert _row(folder).verdict == "same"


def test_a_wrong_rope_is_an_unexplained_difference(llama_dir, tmp_path, monkeypatch) -> None:
    """The verdict can fail: vLLM handed another factor than transformers reads (a wrong --hf-overrides), its class
    built with it computes another table."""
    from ropekit.engines import launch

    folder = extend(llama_dir, LinearScaling(factor=4.0), tmp_path / "out", target_length=4 * L0).out
    made = launch.overrides

    def wrong(config):
        given = made(config)
        return {**given, "rope_parameters": {**given["rope_parameters"], "factor": 2.0}}

    monkeypatch.setattr(launch, "overrides", wrong)
    row = _row(folder)
    assert row.verdict == "differs" and "not explained" in row.detail and row.numbers["table_max_diff@256"] > 0.1


def test_a_per_layer_type_rope_dict_is_given_as_the_compared_layer_runs_it(tmp_path) -> None:
    """A Gemma 3 whose kept layers all slide: the engines are given the sliding layers' dict (base 10,000), the one
    transformers runs on layer 0, never the dict keyed by layer type (vLLM cannot hash it)."""
    pytest.importorskip("transformers")
    from helpers.hf_models import random_hf_model
    from ropekit.engines.transformers_ref import compared_layer, rope_parameters

    nested = {
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    }
    sliding = ["sliding_attention", "sliding_attention"]
    random_hf_model("gemma3", head_dim=16, rope_parameters=nested, layer_types=sliding).save_pretrained(tmp_path)
    assert compared_layer(tmp_path) == (0, "sliding_attention")
    assert rope_parameters(tmp_path) == {"rope_type": "default", "rope_theta": 10000.0}
