"""The conformance matrix script (evidence/engines_matrix): a fast subset here (Llama and Phi-3 through MLX-LM), the
whole list of RoPE architectures under ``-m slow``. The oracle: no cell is a raw traceback, and every refusal is one
line that names what it refuses."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "engines_matrix"))

import matrix
import shipped

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


def _check(rows) -> None:
    for row in rows:
        for cell in row.cells:
            assert cell.verdict != "TRACEBACK", (row.arch, cell)
            if cell.verdict == "refused":
                assert cell.detail and "\n" not in cell.detail


def test_fast_subset_has_no_traceback() -> None:
    rows = matrix.run(["phi3"], engines="MLX-LM")
    _check(rows)
    cells = {(cell.method, cell.engine): cell for cell in rows[0].cells}
    assert "Phi3Config" in cells[("dynamic", "extend")].detail  # refused by name, nothing written
    assert ("linear", "MLX-LM") in cells  # written in a form transformers loads, then compared


@pytest.mark.slow
def test_every_rope_architecture_has_no_traceback() -> None:
    _check(matrix.run(matrix.rope_architectures(), engines="MLX-LM"))


def _yarn_inv_freq(base: float, dim: int, factor: float, original: int, fast: float, slow: float) -> np.ndarray:
    """YaRN's frequencies (arXiv 2309.00071, eq. 23; the correction range rounded outwards, as transformers' default
    ``truncate``), in float64 from the paper's formula."""
    pairs = np.arange(dim // 2)
    plain = base ** (-2.0 * pairs / dim)

    def boundary(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(boundary(fast)), 0), min(math.ceil(boundary(slow)), dim - 1)
    ramp = np.clip((pairs - low) / max(high - low, 1e-3), 0, 1)
    return plain / factor * ramp + plain * (1 - ramp)


def _shipped_oracle(name: str) -> np.ndarray:
    """The frequencies of every pair of the compared layer, from each release's keys by the published formula."""
    pairs = np.arange(32)
    if name in ("qwen3_5", "qwen3_5_moe", "qwen3_next"):  # 256 x 0.25 rotating dims; M-RoPE at text positions
        return 1e7 ** (-2.0 * pairs / 64)
    if name == "gemma4_text":  # its full-attention layer: proportional, 512 x 0.25 rotating of a 512 head
        return np.concatenate([1e6 ** (-2.0 * np.arange(64) / 512), np.zeros(192)])
    if name == "deepseek_v4":  # a compressed layer: the compress rope (base 160,000), YaRN x16 from 65,536
        return _yarn_inv_freq(160_000.0, 64, 16.0, 65_536, 32.0, 1.0)
    base = 1e4 * 1000.0 ** (128 / 126)  # Hunyuan's NTK-alpha: base x alpha^(d / (d - 2))
    return base ** (-2.0 * np.arange(64) / 128)


@pytest.mark.parametrize("name", sorted(shipped.SHIPPED))
def test_each_shipped_family_builds_and_gets_transformers_reference(name, tmp_path) -> None:
    """Each 2026 family built from its shipped keys gives a measured reference: transformers' own rotation of its
    attention layer, equal to the release's frequencies by the published formula (a closed form, in float64)."""
    from ropekit.engines.probe import make_probe, positions_below
    from ropekit.engines.transformers_ref import reference_answer

    folder = matrix.tiny_folder(shipped.SHIPPED[name].model_type, tmp_path / name, shipped.SHIPPED[name].keys)
    probe = make_probe(256, 256, ())
    answer = reference_answer(folder, probe)
    table = answer.tables[256]
    angles = positions_below(probe, 256)[:, None] * _shipped_oracle(name)[None, :]
    expected = np.stack([np.cos(angles), np.sin(angles)], axis=-1)
    assert table.shape == expected.shape
    np.testing.assert_allclose(table, expected, atol=1e-4)
    if name == "deepseek_v4":  # its rope dict is keyed main/compress: the layer's own choice, recorded
        assert answer.rope_key == "compress"


def test_shrunk_hrm_text_has_a_cache_slot_per_layer_and_cycle(tmp_path) -> None:
    """HRM-Text's ``num_hidden_layers`` counts cache slots (layers per stack x H_cycles x (L_cycles + 1)): the shrunk
    stack gets as many slots, so transformers' forward with its cache gives the logits of its forward without."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(matrix.tiny_folder("hrm_text", tmp_path / "hrm"), dtype=torch.float32)
    config = model.config
    assert config.num_layers_per_stack == matrix.SHRINK["num_hidden_layers"]
    assert config.num_hidden_layers == config.num_layers_per_stack * config.H_cycles * (config.L_cycles + 1)
    ids = torch.tensor([[5, 17, 3, 250, 9, 42]])
    with torch.no_grad():
        cached, uncached = model(ids, use_cache=True).logits, model(ids, use_cache=False).logits
    torch.testing.assert_close(cached, uncached)


def test_a_kept_layer_count_keeps_every_per_layer_list(tmp_path) -> None:
    """Given ``num_hidden_layers`` (Llama 4's period of 4), the per-layer lists the class derives from it stay that
    long: 3 chunked RoPE layers, then a full NoPE layer (the class's own rule, every 4th layer)."""
    from transformers import AutoConfig

    folder = matrix.tiny_folder("llama4_text", tmp_path / "llama4", {"num_hidden_layers": 4})
    config = AutoConfig.from_pretrained(folder)
    assert config.num_hidden_layers == 4
    assert config.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    assert config.no_rope_layers == [1, 1, 1, 0]


def test_shrink_keeps_a_mamba_head_size_the_config_class_accepts() -> None:
    """Falcon-H1 sizes its Mamba heads from mamba_d_ssm (heads x head size = d_ssm), not expand x hidden: the shrunk
    config passes transformers' own validation (the oracle), which the matrix's build runs when it saves."""
    from transformers import FalconH1Config

    config = FalconH1Config()
    matrix.shrink(config)
    config.validate()
    assert config.mamba_d_head * config.mamba_n_heads == config.mamba_d_ssm


def test_shrink_keeps_per_layer_lists_when_the_layer_count_is_given() -> None:
    """Keys given with their own layer count (a released pattern of 4 layers) keep every per-layer entry."""
    from transformers import Qwen3NextConfig

    types = ["linear_attention"] * 3 + ["full_attention"]
    config = Qwen3NextConfig(num_hidden_layers=4, layer_types=types)
    matrix.shrink(config, kept={"num_hidden_layers", "layer_types"})
    assert config.num_hidden_layers == 4 and config.layer_types == types
    config.validate()
