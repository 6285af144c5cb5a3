"""vLLM's rows from its own model class, built on CPU as vLLM builds it with its ``get_rope`` calls recorded
(``ropekit.engines._vllm_build``), not from its model file read as text. The oracle: transformers' own rotation of
the same folder, and what the class's arguments would compute were they wrong."""

from __future__ import annotations

import pytest

from helpers.held_out_models import L0, LINEAR, TARGET, YARN, held_out_folder, longrope
from ropekit.engines import vllm
from ropekit.engines.compare import compare_folder, probe_for

pytest.importorskip("transformers")
if vllm.python() is None:
    pytest.skip("needs the vLLM environment (.venv-vllm or ROPEKIT_VLLM_PYTHON)", allow_module_level=True)


def _row(folder):
    _, rows = compare_folder(folder, probe_for(folder), engines=("vLLM",))
    return rows[0]


def test_ernie_with_longrope_is_served_wrong_not_refused(tmp_path) -> None:
    """Ernie 4.5 rotates pairs (2i, 2i + 1). vLLM's ernie45.py builds Llama's attention (get_rope with NeoX pairs:
    LongRoPE builds), then sets ``rotary_emb.is_neox_style = False`` on the built module; LongRoPE's forward does
    not read it and rotates (i, i + d/2): vLLM serves the model wrong (a source reading said it refuses it)."""
    from helpers.hf_models import random_hf_model

    rope = {**longrope(8), "rope_theta": 10000.0}
    random_hf_model("ernie4_5", head_dim=16, positions=TARGET, rope_parameters=rope).save_pretrained(tmp_path)
    row = _row(tmp_path)
    assert row.verdict == "differs", row.detail
    assert "serves this wrong" in row.detail and "built class" in row.detail
    assert row.numbers["source"] == "built class" and row.numbers["neox"] is False and row.numbers["neox_found"]
    assert max(v for k, v in row.numbers.items() if k.startswith("table_max_diff@")) > 1.0  # O(1): other pairs


def test_a_wrong_recorded_argument_turns_the_row_to_differs(tmp_path, monkeypatch) -> None:
    """The class built with another base than the folder's (as a wrong --hf-overrides would give it): its recorded
    get_rope call carries that base and its module computes another table."""
    folder = held_out_folder("llama", tmp_path / "llama", LINEAR)
    right = _row(folder)
    assert right.verdict == "same" and right.numbers["source"] == "built class", right.detail
    assert right.numbers["recorded"]["rope_parameters"]["rope_theta"] == 10000.0
    made = vllm.request_for

    def wrong_base(case):
        request = made(case)
        request["hf_overrides"]["rope_parameters"] = {**request["hf_overrides"]["rope_parameters"], "rope_theta": 5e5}
        return request

    monkeypatch.setattr(vllm, "request_for", wrong_base)
    row = _row(folder)
    assert row.verdict == "differs" and "not explained" in row.detail, row.detail
    assert row.numbers["recorded"]["rope_parameters"]["rope_theta"] == 5e5
    assert row.numbers[f"table_max_diff@{4 * L0}"] > 0.1


def test_a_class_that_cannot_be_built_is_read_from_source_and_says_so(tmp_path, monkeypatch) -> None:
    """Without the folder to build from, the probe reads the model file as text: the row says "read from source"."""
    folder = held_out_folder("llama", tmp_path / "llama", LINEAR)
    made = vllm.request_for
    monkeypatch.setattr(vllm, "request_for", lambda case: {k: v for k, v in made(case).items() if k != "folder"})
    row = _row(folder)
    assert row.verdict == "same" and row.numbers["source"] == "read from source" and "read from source" in row.detail


def test_llama_with_longrope_is_measured_from_the_built_class(tmp_path) -> None:
    """vLLM's LongRoPE module keeps no ``is_neox_style`` (it builds NeoX pairs only): the built class's row is still
    measured (the pairing it says is the one its get_rope call passed), and differs from transformers' tables by
    vLLM's known choice of the long list at every position (served past L0)."""
    folder = held_out_folder("llama", tmp_path / "llama", longrope(8))
    row = _row(folder)
    assert row.verdict == "differs" and "chooses LongRoPE's list once" in row.detail, row.detail
    assert row.numbers["source"] == "built class" and row.numbers["class"] == "Phi3LongRoPEScaledRotaryEmbedding"
    assert row.numbers["neox"] is True and row.numbers["neox_found"] is True
    assert row.numbers[f"table_max_diff@{L0}"] > 1.0  # the long list at positions below L0: O(1)


def test_a_moe_class_builds_after_a_dense_one_in_the_same_probe_process(tmp_path) -> None:
    """The probe process sets up vLLM's parallel groups once, for the first model it builds; a dense model first
    must not leave out the expert-parallel group every MoE class asks for (its row would fall back to the source)."""
    from helpers.hf_models import random_hf_model
    from ropekit.engines import probe_worker

    probe_worker.close()  # a fresh probe process: a dense class is the first it builds
    dense = _row(held_out_folder("llama", tmp_path / "llama", LINEAR))
    assert dense.numbers["source"] == "built class", dense.detail
    moe = tmp_path / "ernie4_5_moe"
    rope = {**LINEAR, "rope_theta": 10000.0}
    sizes = {"moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32, "moe_layer_start_index": 0}
    random_hf_model("ernie4_5_moe", head_dim=16, positions=TARGET, rope_parameters=rope, **sizes).save_pretrained(moe)
    row = _row(moe)
    assert row.verdict == "same" and row.numbers["source"] == "built class", row.detail


def test_qwen3_5_as_shipped_with_yarn_is_built_and_same(tmp_path) -> None:
    """Qwen3.5's model file imports transformers' image processors, which import torchvision (absent here): the build
    stands in empty modules for it and builds the class. Its rotary (M-RoPE sections at text positions, partial
    rotary 0.25, base 1e7) with YaRN x4 on top gives transformers' tables: "same", from the built class (a source
    reading followed qwen3_next.py and said "differs")."""
    import copy
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "evidence" / "engines_matrix"))
    import matrix
    import shipped

    family = shipped.SHIPPED["qwen3_5"]
    keys = copy.deepcopy(family.keys)
    text = keys["text_config"]
    text["max_position_embeddings"] = TARGET
    text["rope_parameters"] = {**text["rope_parameters"], **YARN}
    folder = matrix.tiny_folder(family.model_type, tmp_path / "qwen3_5", keys)
    row = _row(folder)
    assert row.verdict == "same", row.detail
    assert row.numbers["source"] == "built class" and "torchvision (empty modules)" in row.numbers["stubbed"]
