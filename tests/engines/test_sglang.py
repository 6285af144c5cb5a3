"""SGLang's own rotary module (in the vLLM environment, a subprocess) against transformers, and its by-design
differences. Each case that runs it imports SGLang (about 15 s)."""

from __future__ import annotations

import pytest

from ropekit.engines import sglang, vllm
from ropekit.engines.compare import compare_folder, probe_for
from ropekit.integrations.hf.extend import extend
from ropekit.scaling import DynamicScaling, LinearScaling, YarnScaling

pytest.importorskip("transformers")
if vllm.python() is None:
    pytest.skip("needs the vLLM environment (.venv-vllm or ROPEKIT_VLLM_PYTHON)", allow_module_level=True)

L0 = 64
needs_sglang = pytest.mark.skipif(sglang.version() is None, reason="sglang is not in the vLLM environment")


def _row(folder):
    _, rows = compare_folder(folder, probe_for(folder), engines=("SGLang",))
    return rows[0]


@needs_sglang
def test_sglang_computes_what_transformers_computes_for_yarn(llama_dir, tmp_path) -> None:
    scaling = YarnScaling(factor=4.0, original_max_position_embeddings=L0)
    row = _row(extend(llama_dir, scaling, tmp_path / "out", target_length=4 * L0).out)
    assert row.verdict == "same", row.detail
    assert row.version == sglang.version() and "sglang.launch_server" in row.launch


@needs_sglang
def test_sglangs_dynamic_is_static_ntk_at_the_target_length(llama_dir, tmp_path) -> None:
    """One table with the NTK base of max_position_embeddings (L0) × factor: transformers' at the target length,
    not at the shorter served lengths."""
    scaling = DynamicScaling(factor=4.0, original_max_position_embeddings=L0)
    row = _row(extend(llama_dir, scaling, tmp_path / "out", target_length=4 * L0).out)
    assert row.verdict == "differs" and "static NTK" in row.detail and "from position 1 " in row.detail
    assert row.numbers[f"table_max_diff@{4 * L0}"] < 1e-4


@needs_sglang
def test_a_wrong_rope_is_an_unexplained_difference(llama_dir, tmp_path, monkeypatch) -> None:
    """The verdict can fail: SGLang handed another factor than transformers reads computes another table."""
    from ropekit.engines import transformers_ref

    folder = extend(llama_dir, LinearScaling(factor=4.0), tmp_path / "out", target_length=4 * L0).out
    read = transformers_ref.rope_parameters
    monkeypatch.setattr(transformers_ref, "rope_parameters", lambda *a, **k: {**read(*a, **k), "factor": 2.0})
    row = _row(folder)
    assert row.verdict == "differs" and "not explained" in row.detail and row.numbers["table_max_diff@256"] > 0.1


def test_without_sglang_the_row_says_how_to_get_it(llama_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(vllm, "installed", lambda package: None)
    row = _row(extend(llama_dir, LinearScaling(factor=4.0), tmp_path / "out", target_length=4 * L0).out)
    assert row.verdict == "cannot run here" and "sglang==0.5.23" in row.detail and "--context-length" in row.launch
