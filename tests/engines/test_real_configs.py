"""Real architectures' RoPE configs (their public config.json keys on small random models) through every engine that
runs here, each with the verdict its own code earns: the same, or a documented difference, or what it cannot
express. The vLLM rows start its environment once per config (tens of seconds each): ``slow``."""

from __future__ import annotations

import json

import pytest

from helpers.real_configs import REAL, real_folder
from ropekit.engines import vllm
from ropekit.engines.compare import compare_folder, probe_for

pytest.importorskip("transformers")

#: config → engine → (verdict, a phrase of the reason); engines left out say "same"
EXPECTED = {
    "gpt-oss": {"MLX-LM": ("cannot express", "truncate: false")},
    "phi3-longrope": {
        "MLX-LM": ("differs", "always uses long_factor"),
        "vLLM": ("differs", "once by --max-model-len"),
        "llama.cpp": ("differs", "n_ctx"),
    },
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    built = {}

    def folder(name):
        if name not in built:
            built[name] = real_folder(name, tmp_path_factory.mktemp(name) / "model")
        return built[name]

    return folder


def _row(folder, engine):
    _, rows = compare_folder(folder, probe_for(folder, logit_tokens=48), engines=(engine,))
    return rows[0]


def _check(row, name, engine) -> None:
    verdict, reason = EXPECTED.get(name, {}).get(engine, ("same", ""))
    assert row.verdict == verdict and reason in row.detail, f"{name}: {row.verdict}: {row.detail}"


@pytest.mark.parametrize("name", list(REAL))
def test_mlx_lm(name, folders) -> None:
    pytest.importorskip("mlx_lm")
    row = _row(folders(name), "MLX-LM")
    _check(row, name, "MLX-LM")
    if row.verdict == "same":  # the model ran: logits compared too
        assert row.numbers["logits_max_diff"] < 1e-4 and row.numbers["argmax_agreement"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REAL))
def test_vllm(name, folders) -> None:
    if vllm.python() is None:
        pytest.skip("needs the vLLM environment (.venv-vllm or ROPEKIT_VLLM_PYTHON)")
    _check(_row(folders(name), "vLLM"), name, "vLLM")


@pytest.mark.parametrize("name", list(REAL))
def test_llama_cpp_says_what_it_can_without_a_gguf(name, folders) -> None:
    """Without a GGUF of the model, llama.cpp's row is decided from its RoPE form alone: Phi-3's short/long switch
    is its n_ctx behaviour; the rest need the file (this random model has none)."""
    row = _row(folders(name), "llama.cpp")
    if name in EXPECTED and "llama.cpp" in EXPECTED[name]:
        _check(row, name, "llama.cpp")
    else:
        assert row.verdict == "cannot run here" and ("GGUF" in row.detail or "not installed" in row.detail)


def test_the_configs_keep_the_hub_keys(folders) -> None:
    """The folders hold what the hub configs hold (the older keys), so the harness reads them as users' files."""
    config = json.loads((folders("deepseek-v3") / "config.json").read_text())
    assert "rope_parameters" not in config and config["rope_scaling"]["mscale_all_dim"] == 1.0


def test_an_extended_phi3_loads_in_mlx_lm(folders, tmp_path) -> None:
    """MLX-LM's Phi-3 refuses a rope_scaling without the 4.x key ``type``, which extend writes beside rope_type."""
    pytest.importorskip("mlx_lm")
    from ropekit.integrations.hf.extend import extend
    from ropekit.scaling import LongRopeScaling

    factors = tuple(1.0 + 4.0 * i for i in range(8))  # one list: the same at every length, in every engine
    scaling = LongRopeScaling(
        short_factor=factors, long_factor=factors, original_max_position_embeddings=4096, factor=32.0
    )  # factor M/L0: MLX-LM's attention factor is transformers' (without it, "cannot express")
    folder = extend(folders("phi3-longrope"), scaling, tmp_path / "out", target_length=131072).out
    assert json.loads((folder / "config.json").read_text())["rope_scaling"]["type"] == "longrope"
    _check(_row(folder, "MLX-LM"), "phi3-one-list", "MLX-LM")
