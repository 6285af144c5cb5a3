"""The architectures ``ropekit engines`` was found wrong on, each a small random model built in code
(:mod:`helpers.held_out_models`), with the verdict measured for it: transformers' own rotation as the reference (against a
float64 closed form here), each engine's module built as its model file for the architecture builds it. Each case
that runs vLLM or SGLang starts its environment (10-15 s): all but two are ``slow``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers.held_out_models import L0, LINEAR, TARGET, YARN, held_out_folder, longrope
from ropekit.engines import sglang, vllm
from ropekit.engines.compare import compare_engines, compare_folder, probe_for
from ropekit.engines.launch import key_conflict, overrides
from ropekit.engines.transformers_ref import reference_answer

pytest.importorskip("transformers")
needs_vllm = pytest.mark.skipif(vllm.python() is None, reason="needs the vLLM environment (ROPEKIT_VLLM_PYTHON)")
needs_sglang = pytest.mark.skipif(sglang.version() is None, reason="sglang is not in the vLLM environment")
LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
LLAMA3 |= {"original_max_position_embeddings": L0}


def _verdicts(folder, *engines, logits=0):
    return {v.engine: v for v in compare_engines(folder, engines=engines, logit_tokens=logits)}


@pytest.mark.parametrize(
    ("name", "pairs", "interleaved"),
    [("cohere", 8, True), ("glm4", 4, True), ("stablelm", 2, False), ("gpt_neox", 2, False), ("phi4-mini", 6, False)],
)
def test_the_reference_is_transformers_rotation_in_its_own_pairing(name, pairs, interleaved, tmp_path) -> None:
    """Plain RoPE through each modeling file's own rotation: cos/sin of p·10000^(−2i/d) for its rotating pairs
    (partial rotary), in its pairing (Cohere's [f0, f0, f1, f1, …] table read as pairs (2i, 2i + 1))."""
    folder = held_out_folder(name, tmp_path / name)
    probe = probe_for(folder)
    answer = reference_answer(folder, probe)
    inv = 10000.0 ** (-np.arange(pairs) / pairs)
    angles = np.asarray(probe.positions, dtype=np.float64)[:, None] * inv
    expected = np.stack([np.cos(angles), np.sin(angles)], axis=-1)
    assert answer.interleaved is interleaved
    assert np.abs(answer.tables[TARGET] - expected).max() < 1e-5


def test_the_reference_carries_the_attention_factor(tmp_path) -> None:
    """YaRN's attention factor 0.1·ln s + 1 multiplies cos and sin (position 0: the factor itself)."""
    folder = held_out_folder("llama", tmp_path / "llama", YARN)
    answer = reference_answer(folder, probe_for(folder))
    np.testing.assert_allclose(answer.tables[TARGET][0, :, 0], 0.1 * math.log(4.0) + 1.0, rtol=1e-6)


def test_gpt_neox_gives_rows_not_a_traceback(tmp_path) -> None:
    pytest.importorskip("mlx_lm")
    folder = held_out_folder("gpt_neox", tmp_path / "neox", YARN)
    row = _verdicts(folder, "MLX-LM")["MLX-LM"]
    assert row.verdict == "cannot express" and "MLX-LM's gpt_neox reads no scaling" in row.reason


@pytest.mark.parametrize("scaling", [YARN, LINEAR, LLAMA3], ids=["yarn", "linear", "llama3"])
def test_mlx_lms_cohere_reads_no_scaling(scaling, tmp_path) -> None:
    pytest.importorskip("mlx_lm")
    folder = held_out_folder("cohere", tmp_path / "cohere", scaling, rope_theta=10000.0, rope_scaling=scaling)
    row = _verdicts(folder, "MLX-LM")["MLX-LM"]
    assert row.verdict == "cannot express" and "mlx_lm/models/cohere.py" in row.reason


def test_mlx_lm_runs_cohere_as_shipped_the_same(tmp_path) -> None:
    """Cohere's interleaved pairs: MLX-LM's traditional RoPE computes transformers' rotation, and its logits."""
    pytest.importorskip("mlx_lm")
    folder = held_out_folder("cohere", tmp_path / "cohere", rope_theta=10000.0)
    row = _verdicts(folder, "MLX-LM", logits=32)["MLX-LM"]
    assert row.verdict == "same", row.reason
    assert row.largest_difference < 1e-5


def test_disagreeing_key_forms_are_flagged_and_launched_as_read(tmp_path) -> None:
    """transformers reads the older keys where the two forms disagree: the reference row names both values, and
    vLLM's and SGLang's overrides carry the older keys' RoPE."""
    older = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L0}
    folder = held_out_folder("llama", tmp_path / "llama", LINEAR, rope_theta=500000.0, rope_scaling=older)
    config = json.loads((folder / "config.json").read_text())
    conflict = key_conflict(config)
    assert "'rope_type': 'linear'" in conflict and "'rope_type': 'yarn'" in conflict and "500000.0" in conflict
    assert overrides(config)["rope_parameters"] == older | {"rope_theta": 500000.0}
    reference, _ = compare_folder(folder, probe_for(folder), engines=())
    assert conflict in reference.detail
    assert key_conflict(json.loads((held_out_folder("llama", tmp_path / "plain") / "config.json").read_text())) is None


@needs_sglang
@pytest.mark.parametrize(
    "scaling",
    [YARN, pytest.param(LINEAR, marks=pytest.mark.slow), pytest.param(LLAMA3, marks=pytest.mark.slow)],
    ids=["yarn", "linear", "llama3"],
)
def test_sglangs_stablelm_passes_no_scaling(scaling, tmp_path) -> None:
    row = _verdicts(held_out_folder("stablelm", tmp_path / "stablelm", scaling), "SGLang")["SGLang"]
    assert row.verdict == "cannot express" and "sglang/srt/models/stablelm.py" in row.reason
    assert "passes no scaling" in row.reason and row.largest_difference > 1.0


@pytest.mark.slow
@needs_sglang
def test_sglangs_stablelm_longrope_passes_no_scaling(tmp_path) -> None:
    folder = held_out_folder("stablelm", tmp_path / "stablelm", longrope(2))
    row = _verdicts(folder, "SGLang")["SGLang"]
    assert row.verdict == "cannot express" and "passes no scaling" in row.reason


@pytest.mark.slow
@needs_sglang
@pytest.mark.parametrize("factor", [32.0, 64.0])
def test_sglang_keeps_the_short_list_for_a_batch_ending_at_l0(factor, tmp_path) -> None:
    """L0 + 1 tokens (last position L0): transformers takes the long list, SGLang the short one."""
    folder = held_out_folder("phi4-mini", tmp_path / "phi", longrope(6, factor))
    _, rows = compare_folder(folder, probe_for(folder), engines=("SGLang",))
    row = rows[0]
    assert row.verdict == "differs" and "exceeds L0" in row.detail
    assert row.numbers[f"table_max_diff@{L0 + 1}"] > 1.0 > 2 * row.numbers[f"table_max_diff@{L0}"]


@pytest.mark.slow
@needs_sglang
def test_glm4_longrope_cannot_be_built_by_either_engine(tmp_path) -> None:
    rows = _verdicts(held_out_folder("glm4", tmp_path / "glm4", longrope(4)), "vLLM", "SGLang")
    for engine, file in (("vLLM", "vllm/model_executor/models/glm4.py"), ("SGLang", "sglang/srt/models/glm4.py")):
        assert rows[engine].verdict == "cannot express" and file in rows[engine].reason
        assert "only supports neox_style" in rows[engine].reason


@pytest.mark.slow
@needs_sglang
@pytest.mark.parametrize("scaling", [None, YARN, LINEAR, LLAMA3], ids=["shipped", "yarn", "linear", "llama3"])
def test_vllm_and_sglang_run_cohere_the_same(scaling, tmp_path) -> None:
    rows = _verdicts(held_out_folder("cohere", tmp_path / "cohere", scaling), "vLLM", "SGLang")
    for row in rows.values():
        assert row.verdict == "same" and row.largest_difference < 1e-5, row.reason


@pytest.mark.slow
@needs_sglang
def test_gpt_neox_is_served_through_the_transformers_backend(tmp_path) -> None:
    rows = _verdicts(held_out_folder("gpt_neox", tmp_path / "neox", YARN), "vLLM", "SGLang")
    for row in rows.values():
        assert row.verdict == "same" and "Transformers backend" in row.reason


@pytest.mark.slow
@needs_sglang
def test_dual_chunk_over_yarn_is_not_yarn(tmp_path) -> None:
    """With dual_chunk_attention_config, vLLM's and SGLang's Qwen2 build DualChunkRotaryEmbedding from the base."""
    dual = {"chunk_size": 128, "local_size": 32, "original_max_position_embeddings": L0}
    folder = held_out_folder("qwen2", tmp_path / "qwen2", YARN, dual_chunk_attention_config=dual)
    for engine, row in _verdicts(folder, "vLLM", "SGLang").items():
        assert row.verdict == "cannot express" and "DualChunkRotaryEmbedding" in row.reason, (engine, row.reason)


@needs_vllm
def test_a_flipped_pairing_turns_the_row_to_differs(tmp_path, monkeypatch) -> None:
    """The check has teeth: vLLM's module built with is_neox_style flipped for Llama pairs other dimensions than
    transformers' rotation, and the row says so (through the source-reading fallback, where ropekit passes the
    pairing; the built class's own recorded arguments: tests/engines/test_vllm_built.py)."""
    folder = held_out_folder("llama", tmp_path / "llama", YARN)
    assert _verdicts(folder, "vLLM")["vLLM"].verdict == "same"
    made, built = vllm.request_for, vllm.model_rope
    monkeypatch.setattr(vllm, "request_for", lambda case: {k: v for k, v in made(case).items() if k != "folder"})
    flipped = lambda *a: {**built(*a), "is_neox_style": False, "class_rule": "ropekit"}  # noqa: E731
    monkeypatch.setattr(vllm, "model_rope", flipped)
    row = _verdicts(folder, "vLLM")["vLLM"]
    assert row.verdict == "differs" and "not explained" in row.reason and row.largest_difference > 0.5


def test_the_reference_reads_llama4s_complex_rotation(tmp_path) -> None:
    """Llama 4 rotates by complex multiplication on pairs (2i, 2i + 1) (its rotary module returns freqs_cis)."""
    from helpers.hf_models import random_hf_model

    plain = {"rope_type": "default", "rope_theta": 10000.0}
    options = {"num_local_experts": 2, "num_experts_per_tok": 1, "intermediate_size_mlp": 64, "no_rope_layers": [1, 1]}
    random_hf_model("llama4", head_dim=16, positions=TARGET, rope_parameters=plain, **options).save_pretrained(tmp_path)
    probe = probe_for(tmp_path, original_length=L0)
    answer = reference_answer(tmp_path, probe)
    angles = np.asarray(probe.positions, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(8) / 8)
    assert answer.interleaved
    assert np.abs(answer.tables[TARGET] - np.stack([np.cos(angles), np.sin(angles)], axis=-1)).max() < 1e-5


def test_mlx_lms_glm_rotates_the_whole_head(tmp_path) -> None:
    """GLM rotates half of each head (partial_rotary_factor 0.5, pairs (2i, 2i + 1)); MLX-LM's glm.py builds its
    RoPE over the whole head: plain RoPE already differs, and the row says why."""
    pytest.importorskip("mlx_lm")
    from helpers.hf_models import random_hf_model

    plain = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    glm = random_hf_model("glm", head_dim=16, positions=TARGET, rope_parameters=plain, pad_token_id=0)
    glm.save_pretrained(tmp_path)
    row = _verdicts(tmp_path, "MLX-LM")["MLX-LM"]
    assert row.verdict == "differs" and "glm.py rotates the whole head (16 dims" in row.reason
    assert row.largest_difference > 0.5


@pytest.mark.slow
@needs_sglang
def test_ernie_pairs_as_its_config_says_in_both_engines(tmp_path) -> None:
    """Ernie 4.5 rotates pairs (2i, 2i + 1). vLLM's ernie45.py builds Llama's attention, then sets its module's
    ``is_neox_style = False`` (its class built and its module read as built); SGLang's ernie4.py builds Llama's attention with ``getattr(config,
    "rope_is_neox_style", False)``: both compute transformers' rotation (a probe that took Llama's own pairing, or
    followed the MLP's import to DeepSeek's file, said "differs")."""
    from helpers.hf_models import random_hf_model

    plain = {"rope_type": "default", "rope_theta": 10000.0}
    random_hf_model("ernie4_5", head_dim=16, positions=TARGET, rope_parameters=plain).save_pretrained(tmp_path / "d")
    row = _verdicts(tmp_path / "d", "vLLM")["vLLM"]
    assert row.verdict == "same" and "ernie45.py, built class" in row.reason, row.reason
    experts = {"moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32}
    moe = random_hf_model("ernie4_5_moe", head_dim=16, positions=TARGET, rope_parameters=plain, **experts)
    moe.save_pretrained(tmp_path / "moe")
    row = _verdicts(tmp_path / "moe", "SGLang")["SGLang"]
    assert row.verdict == "same" and "ernie4.py" in row.reason, row.reason


@pytest.mark.slow
@needs_sglang
def test_llama4_text_pairs_as_each_engine_loads_its_weights(tmp_path) -> None:
    """vLLM's llama4.py permutes transformers' interleaved q/k weights into NeoX order at load, so its NeoX module
    computes transformers' rotation ("same", read in that order); SGLang's text-only llama4.py loads them as they are
    into a NeoX module ("differs", with that reason)."""
    from helpers.hf_models import random_hf_model

    plain = {"rope_type": "default", "rope_theta": 10000.0}
    options = {"num_local_experts": 2, "num_experts_per_tok": 1, "intermediate_size_mlp": 64, "no_rope_layers": [1, 1]}
    random_hf_model("llama4", head_dim=16, positions=TARGET, rope_parameters=plain, **options).save_pretrained(tmp_path)
    rows = _verdicts(tmp_path, "vLLM", "SGLang")
    assert rows["vLLM"].verdict == "same" and "permuted to NeoX order" in rows["vLLM"].reason
    assert rows["SGLang"].verdict == "differs" and "loads q/k weights as they are" in rows["SGLang"].reason
    assert rows["SGLang"].largest_difference > 0.5


@pytest.mark.slow  # extends the model and loads it twice (about 30 s on a busy machine)
def test_engines_on_gpt_neox_prints_rows(tmp_path) -> None:
    """``ropekit engines`` on GPT-NeoX (its decoder is ``gpt_neox``, its attention ``attention``): rows, exit 0."""
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    folder = held_out_folder("gpt_neox", tmp_path / "neox")
    args = ["engines", "--model", str(folder), "--scaling", "yarn", "--factor", "4", "--engines", "llama.cpp"]
    result = CliRunner().invoke(app, [*args, "--logits", "0", "--json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    summary = json.loads(result.stdout)
    assert summary["reference"]["verdict"] == "reference" and summary["engines"][0]["engine"] == "llama.cpp"


@pytest.mark.slow
@needs_sglang
def test_sglang_misreads_position_l0_even_with_equal_lists(tmp_path) -> None:
    """short_factor = long_factor (what ``ropekit search`` writes so that every engine computes the same): SGLang's
    own module still differs, only at position L0 of a batch ending there, which reads the long cache's position 0."""
    lists = longrope(6)
    folder = held_out_folder("phi4-mini", tmp_path / "phi", {**lists, "short_factor": lists["long_factor"]})
    _, rows = compare_folder(folder, probe_for(folder), engines=("SGLang",))
    row = rows[0]
    assert row.verdict == "differs" and "exactly L0" in row.detail and f"from position {L0} " in row.detail
    assert row.numbers[f"table_max_diff@{L0 + 1}"] > 0.5 and row.numbers[f"table_max_diff@{L0}"] < 1e-5
