"""GGUF out and GGUF in, on small synthetic files written here with the ``gguf`` package.

Oracles: the source file's own bytes (tensors copied unchanged), the ``gguf`` package's reader (what the file says),
and the port of llama.cpp's arithmetic in ``helpers/llamacpp_port.py`` (what llama.cpp computes from what the file
says).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from helpers.gguf_files import BASE, L0, D, fields, tensors, write_source
from helpers.llamacpp_port import llamacpp_reference
from ropekit.config import RopeConfig
from ropekit.hf_format import from_hf_config
from ropekit.integrations.gguf.read_rope import apply_gguf_rope, gguf_rope_parameters, read_file_rope
from ropekit.integrations.gguf.write_rope import extend_gguf, gguf_form, write_gguf
from ropekit.scaling import LinearScaling, Llama3Scaling, YarnScaling, frequencies

gguf = pytest.importorskip("gguf")


def test_tensors_are_copied_byte_for_byte_and_rope_keys_rewritten(tmp_path: Path) -> None:
    source = write_source(tmp_path / "in.gguf", metadata={"rope.scaling.type": "linear", "rope.scaling.factor": 3.0})
    result = extend_gguf(source, YarnScaling(factor=2.0, original_max_position_embeddings=L0), tmp_path / "out.gguf")
    assert tensors(result.out) == tensors(source)  # same names, same quantisation, same bytes
    written, before = fields(result.out), fields(source)
    assert written["llama.rope.scaling.type"] == "yarn" and written["llama.rope.scaling.factor"] == 2.0
    assert written["llama.rope.scaling.original_context_length"] == L0
    assert written["llama.context_length"] == 2 * L0 and "llama.rope.scaling.attn_factor" not in written
    unchanged = {k: v for k, v in before.items() if not k.startswith(("GGUF.", "llama.rope.", "llama.context"))}
    assert {k: written[k] for k in unchanged} == unchanged


@pytest.mark.parametrize(
    "method", [LinearScaling(factor=2.0), YarnScaling(factor=2.0, original_max_position_embeddings=L0)]
)
def test_which_dims_rotate_is_kept(tmp_path: Path, method) -> None:
    """M-RoPE's sections and the sliding layers' rotating dims are the model's: llama.cpp refuses a qwen3vl-style file
    without its sections (``key not found in model: qwen4exp.rope.dimension_sections``)."""
    structure = {"rope.dimension_sections": [8, 12, 12, 0], "rope.dimension_count_swa": D // 2}
    source = write_source(tmp_path / "in.gguf", arch="qwen3vl", metadata=structure)
    written = fields(extend_gguf(source, method, tmp_path / "out.gguf").out)
    assert written["qwen3vl.rope.dimension_sections"] == [8, 12, 12, 0]
    assert written["qwen3vl.rope.dimension_count_swa"] == D // 2
    assert written["qwen3vl.rope.scaling.factor"] == 2.0


def test_per_pair_methods_write_rope_freqs_that_llamacpp_divides_by(tmp_path: Path) -> None:
    spec = Llama3Scaling(factor=4.0, original_max_position_embeddings=L0, low_freq_factor=1.0, high_freq_factor=4.0)
    source = write_source(tmp_path / "in.gguf")
    out = extend_gguf(source, spec, tmp_path / "out.gguf").out
    file = read_file_rope(out)
    assert file.rope.scaling_type == "none" and len(file.rope.freq_factors) == D // 2
    angles, mscale = llamacpp_reference(file.rope)
    np.testing.assert_allclose(angles, frequencies(RopeConfig(D, base=BASE, scaling=spec)).inv_freq, rtol=1e-6)
    assert mscale == 1.0
    again = extend_gguf(out, LinearScaling(factor=2.0), tmp_path / "linear.gguf").out
    assert read_file_rope(again).rope.freq_factors is None  # the old scaling is replaced, rope_freqs included


def test_existing_output_and_the_source_itself_are_refused(tmp_path: Path) -> None:
    source = write_source(tmp_path / "in.gguf")
    form = gguf_form(read_file_rope(source), LinearScaling(factor=2.0))
    (tmp_path / "taken.gguf").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="force=True"):
        write_gguf(source, tmp_path / "taken.gguf", form, context_length=2 * L0)
    assert (tmp_path / "taken.gguf").read_bytes() == b"mine"
    with pytest.raises(ValueError, match="source model"):
        write_gguf(source, source, form, context_length=2 * L0, force=True)
    write_gguf(source, tmp_path / "taken.gguf", form, context_length=2 * L0, force=True)
    assert fields(tmp_path / "taken.gguf")["llama.rope.scaling.factor"] == 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.gguf", "taken.gguf"]  # no partial file left


def test_sliding_window_models_are_scaled_as_llamacpp_scales_them(tmp_path: Path) -> None:
    """Gemma 3: llama.cpp gives sliding layers freq_scale 1; what would reach them (attention, rope_freqs) is refused."""
    source = write_source(tmp_path / "g.gguf", arch="gemma3", metadata={"attention.sliding_window": 512})
    file = read_file_rope(source)
    assert file.sliding
    assert gguf_form(file, LinearScaling(factor=8.0)).scaling_type == "linear"
    assert gguf_form(file, YarnScaling(factor=2.0, original_max_position_embeddings=L0)).attn_factor == 1.0
    with pytest.raises(ValueError, match="never scales sliding-window layers"):
        gguf_form(file, LinearScaling(factor=8.0), layer_types=["sliding_attention"])
    paper = YarnScaling(factor=2.0, original_max_position_embeddings=L0, ramp="paper")
    with pytest.raises(ValueError, match="rope_freqs"):
        gguf_form(file, paper)
    attention = YarnScaling(factor=2.0, original_max_position_embeddings=L0, attention_factor=1.5)
    with pytest.raises(ValueError, match="sliding-window layers too"):
        gguf_form(file, attention)


@pytest.mark.parametrize(
    ("metadata", "rope_freqs"),
    [
        ({"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0, "rope.scaling.original_context_length": 256}, None),
        ({"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0, "rope.scaling.attn_factor": 0.9}, None),
        ({"rope.scaling.type": "linear", "rope.scaling.factor": 2.0}, None),
        ({"rope.scale_linear": 2.0}, None),  # the old key; type linear is llama.cpp's default
        ({"rope.scaling.attn_factor": 1.2}, np.linspace(1.0, 3.0, D // 2)),
        ({"rope.scaling.type": "yarn", "rope.scaling.factor": 2.0}, np.linspace(1.0, 3.0, D // 2)),
    ],
)
def test_reading_gives_what_llamacpp_computes(tmp_path: Path, metadata: dict, rope_freqs) -> None:
    """The transformers rope_parameters ropekit loads a GGUF file with give llama.cpp's frequencies and attention."""
    path = write_source(tmp_path / "in.gguf", metadata=metadata, rope_freqs=rope_freqs)
    params = gguf_rope_parameters(path)
    config = {"rope_parameters": params, "head_dim": D, "max_position_embeddings": L0}
    rope = from_hf_config(json.loads(json.dumps(config)))  # JSON-clean, as a config.json
    ours = frequencies(rope, seq_len=4 * L0)
    angles, mscale = llamacpp_reference(read_file_rope(path).rope)
    np.testing.assert_allclose(ours.inv_freq, angles, rtol=1e-6)
    assert ours.attention_factor == pytest.approx(mscale, rel=1e-6)
    assert not math.isclose(float(np.max(angles / frequencies(RopeConfig(D, base=BASE)).inv_freq)), 0.0)


def test_plain_files_load_unchanged_and_unmodelled_ones_are_refused(tmp_path: Path) -> None:
    plain = write_source(tmp_path / "plain.gguf")
    assert gguf_rope_parameters(plain) is None
    assert apply_gguf_rope({"rope_theta": BASE}, plain) == {"rope_theta": BASE}
    deepseek = write_source(tmp_path / "ds.gguf", metadata={"rope.scaling.yarn_log_multiplier": 0.1})
    with pytest.raises(ValueError, match="does not model"):
        gguf_rope_parameters(deepseek)
    longrope = write_source(tmp_path / "phi.gguf", metadata={"rope.scaling.type": "longrope"})
    with pytest.raises(ValueError, match="does not model"):
        gguf_rope_parameters(longrope)


def test_layer_typed_configs_get_the_scaling_on_full_attention_only(tmp_path: Path) -> None:
    path = write_source(tmp_path / "g.gguf", metadata={"rope.scaling.type": "linear", "rope.scaling.factor": 8.0})
    config = {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": BASE},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        }
    }
    apply_gguf_rope(config, path)
    assert config["rope_parameters"]["full_attention"]["rope_type"] == "linear"
    assert config["rope_parameters"]["sliding_attention"] == {"rope_type": "default", "rope_theta": 10000.0}


def _chain_specs() -> dict:
    from ropekit.scaling import NTKScaling
    from ropekit.scaling.base_change import BaseChange

    return {
        "linear4": LinearScaling(factor=4.0),
        "ntk4": NTKScaling(factor=4.0),
        "none": None,
        "base": BaseChange(base=1e6),
    }


@pytest.mark.parametrize("name", ["linear4", "ntk4", "none", "base"])
def test_an_extended_file_extends_from_its_original_length(tmp_path: Path, name: str) -> None:
    # llama.cpp takes context_length as the trained length; an extended file keeps its pre-training length only in
    # rope.scaling.original_context_length, and every factor is relative to that length
    source = write_source(tmp_path / "in.gguf")
    yarn2 = extend_gguf(source, YarnScaling(factor=2.0, original_max_position_embeddings=L0), tmp_path / "y2.gguf")
    assert fields(yarn2.out)["llama.context_length"] == 2 * L0
    spec = _chain_specs()[name]
    result = extend_gguf(yarn2.out, spec, tmp_path / f"{name}.gguf")
    expected = {"linear4": 4 * L0, "ntk4": 4 * L0, "none": L0, "base": L0}[name]
    assert result.context_length == expected and fields(result.out)["llama.context_length"] == expected
    assert extend_gguf(yarn2.out, spec, tmp_path / "given.gguf", original_length=2 * L0).context_length == (
        expected * 2
    )  # an explicit original length wins


@pytest.mark.parametrize("name", ["linear4", "ntk4", "none"])
def test_the_folder_path_extends_an_extended_model_to_the_same_length(tmp_path: Path, make_llama, name: str) -> None:
    pytest.importorskip("transformers")
    from ropekit.integrations.hf.extend import extend

    yarn2 = {"rope_type": "yarn", "rope_theta": BASE, "factor": 2.0, "original_max_position_embeddings": L0}
    folder = make_llama(tmp_path / "y2", rope_parameters=yarn2, max_position_embeddings=2 * L0)
    written = extend(folder, _chain_specs()[name], tmp_path / "out").config
    gguf_file = extend_gguf(
        extend_gguf(
            write_source(tmp_path / "in.gguf"),
            YarnScaling(factor=2.0, original_max_position_embeddings=L0),
            tmp_path / "y2.gguf",
        ).out,
        _chain_specs()[name],
        tmp_path / "chained.gguf",
    )
    assert written["max_position_embeddings"] == gguf_file.context_length
