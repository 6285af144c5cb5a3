"""`extend` on the RoPE keys released checkpoints ship: the written model rotates exactly the dims and pairs the
source rotates in every layer, scales the layers the source scales and slows the lowest-frequency pair by s, as
measured from transformers' own forward (tiny random models built in code; nothing downloaded).

The keys of each architecture (:data:`SHIPPED`) and where they were read:

* MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json): ``head_dim`` 128, ``rotary_dim`` 64, ``rope_theta`` 5e6, 196,608
  positions; transformers' ``MiniMaxM2Config.convert_rope_params_to_dict`` reads ``rotary_dim`` as partial rotary
  ("Released MiniMax-M2 checkpoints express partial RoPE through a legacy `rotary_dim` field"), its class defaults the
  same sizes.
* OLMo 3 (allenai/Olmo-3-1025-7B config.json): ``rope_theta`` 5e5, ``rope_scaling`` YaRN x8 from 8,192 (attention
  factor 1.2079, beta 32/1), 65,536 positions, three sliding layers then one full; ``Olmo3Config`` gives
  ``rope_scaling`` to the full-attention layers only.
* Hunyuan dense (tencent/Hunyuan-7B-Instruct config.json): ``rope_scaling`` ``{"type": "dynamic", "alpha": 1000, ...}``,
  ``rope_theta`` 1e4, ``head_dim`` 128, 32,768 positions; NTK-alpha in ``modeling_hunyuan_v1_dense.py``. Also with
  256 positions (the engines matrix's size), fewer than the check's forward: beyond them transformers' ``dynamic``
  update recomputes the source's RoPE as dynamic NTK from ``rope_theta``, so the source is measured within them.
* DeepSeek-V4 (deepseek-ai/DeepSeek-V4-Flash config.json): ``head_dim`` 512, ``qk_rope_head_dim`` 64,
  ``compress_ratios`` 0 then 4, ``rope_theta`` 1e4, ``compress_rope_theta`` 1.6e5, ``rope_scaling`` YaRN x16 from
  65,536, 1,048,576 positions; ``DeepseekV4Config`` gives the YaRN to its ``compress`` RoPE (the compressed layers),
  its sliding layers run ``main`` (plain RoPE at 1e4).
* Pythia (EleutherAI/pythia-160m config.json): ``rotary_pct`` 0.25, ``rotary_emb_base`` 1e4, head 64, 2,048 positions.
* StableLM 2 (stabilityai/stablelm-2-1_6b config.json): ``partial_rotary_factor`` 0.25, ``rope_theta`` 1e4, head 64,
  4,096 positions.
* Phi-2 (microsoft/phi-2 config.json): ``partial_rotary_factor`` 0.4, ``rope_theta`` 1e4, head 80, 2,048 positions.
* Gemma 3 (google/gemma-3-4b-it text config): ``rope_theta`` 1e6, ``rope_local_base_freq`` 1e4,
  ``sliding_window_pattern`` 6, ``rope_scaling`` linear x8, head 256, 131,072 positions.
* SmolLM3 (HuggingFaceTB/SmolLM3-3B config.json): ``rope_theta`` 5e6, every fourth layer NoPE
  (``no_rope_layer_interval`` 4), head 128, 65,536 positions.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from ropekit.integrations.hf.extend import extend
from ropekit.integrations.hf.preservation import measured_layers
from ropekit.scaling import LinearScaling, YarnScaling

transformers = pytest.importorskip("transformers")

S = 16.0
_OLMO3_YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192,
               "attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1}  # fmt: skip
_HUNYUAN = {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
            "type": "dynamic"}  # fmt: skip
_DEEPSEEK_V4_YARN = {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32,
                     "beta_slow": 1}  # fmt: skip
#: Phi-3.5-MoE's LongRoPE (microsoft/Phi-3.5-MoE-instruct config.json: 64 factors a list, both mscales 1.2432; it
#: ships max_position_embeddings 131072, 32 x 4096: the tiny model says 65536, so that S = 16 extends it)
_PHIMOE_MSCALE = 1.243163121016122
_PHIMOE_LONGROPE = {"type": "longrope", "short_factor": [1.0 + 0.01 * i for i in range(64)],
                    "long_factor": [1.0 + 0.5 * i for i in range(64)], "short_mscale": _PHIMOE_MSCALE,
                    "long_mscale": _PHIMOE_MSCALE, "original_max_position_embeddings": 4096}  # fmt: skip
#: Hunyuan's NTK-alpha base: rope_theta · alpha^(d / (d − 2)), d = 128
_HUNYUAN_BASE = 1e4 * 1000.0 ** (128 / 126)

#: name → (model type, head size, layers, hub RoPE keys, L0, unscaled base, rotated dims, scaled layer type)
SHIPPED = {
    "minimax-m2": ("minimax_m2", 128, 2, {"head_dim": 128, "rotary_dim": 64, "rope_theta": 5e6,
                   "max_position_embeddings": 196608}, 196608, 5e6, 64, None),
    "olmo3": ("olmo3", 128, 4, {"rope_theta": 5e5, "rope_scaling": _OLMO3_YARN, "max_position_embeddings": 65536,
              "sliding_window": 4096}, 8192, 5e5, 128, "full_attention"),
    "hunyuan-dense": ("hunyuan_v1_dense", 128, 2, {"head_dim": 128, "rope_theta": 1e4, "rope_scaling": _HUNYUAN,
                      "max_position_embeddings": 32768}, 32768, _HUNYUAN_BASE, 128, None),
    "hunyuan-dense-256": ("hunyuan_v1_dense", 128, 2, {"head_dim": 128, "rope_theta": 1e4, "rope_scaling": _HUNYUAN,
                          "max_position_embeddings": 256}, 256, _HUNYUAN_BASE, 128, None),
    "deepseek-v4": ("deepseek_v4", 512, 2, {"head_dim": 512, "qk_rope_head_dim": 64, "compress_ratios": [0, 4],
                    "rope_theta": 10000, "compress_rope_theta": 160000, "rope_scaling": _DEEPSEEK_V4_YARN,
                    "max_position_embeddings": 1048576}, 65536, 160000.0, 64, "compressed_sparse_attention"),
    "pythia": ("gpt_neox", 64, 2, {"rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048},
               2048, 1e4, 16, None),
    "stablelm2": ("stablelm", 64, 2, {"partial_rotary_factor": 0.25, "rope_theta": 10000,
                  "max_position_embeddings": 4096}, 4096, 1e4, 16, None),
    "phi2": ("phi", 80, 2, {"partial_rotary_factor": 0.4, "rope_theta": 10000.0, "max_position_embeddings": 2048},
             2048, 1e4, 32, None),
    "gemma3": ("gemma3_text", 256, 6, {"head_dim": 256, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
               "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
               "max_position_embeddings": 131072, "sliding_window": 1024}, 131072, 1e6, 256, "full_attention"),
    "phi3.5-moe": ("phimoe", 128, 2, {"rope_theta": 1e4, "rope_scaling": _PHIMOE_LONGROPE,
                   "original_max_position_embeddings": 4096, "max_position_embeddings": 65536}, 4096, 1e4, 128, None),
    "smollm3": ("smollm3", 128, 4, {"rope_theta": 5e6, "no_rope_layer_interval": 4,
                "max_position_embeddings": 65536}, 65536, 5e6, 128, None),
}  # fmt: skip
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "rotary_pct", "rotary_emb_base")


def shipped_folder(name: str, path):
    """A tiny random model of :data:`SHIPPED` ``[name]`` saved to ``path``, its config.json holding the hub's keys."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    model_type, head, layers, hub, *_ = SHIPPED[name]
    sizes = {"vocab_size": 64, "hidden_size": head, "intermediate_size": 32, "num_hidden_layers": layers,
             "num_attention_heads": 1, "num_key_value_heads": 1, "bos_token_id": None, "eos_token_id": None,
             "pad_token_id": None}  # fmt: skip
    sizes |= {key: hub[key] for key in ("head_dim", "sliding_window") if key in hub}
    if model_type == "minimax_m2":
        sizes |= {"num_local_experts": 2, "num_experts_per_tok": 1}
    if model_type == "deepseek_v4":
        sizes |= {"n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16, "q_lora_rank": 32,
                  "o_lora_rank": 32, "o_groups": 1, "index_n_heads": 1, "index_head_dim": 64, "hc_mult": 1}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type](**sizes)
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(config).save_pretrained(path)
    written = json.loads((path / "config.json").read_text())
    written = {key: value for key, value in written.items() if key not in (*_ROPE_KEYS, "layer_types")}
    (path / "config.json").write_text(json.dumps(written | hub, indent=2))
    return path


def _method(kind: str, original: int):
    return (
        YarnScaling(factor=S, original_max_position_embeddings=original) if kind == "yarn" else LinearScaling(factor=S)
    )


@pytest.mark.parametrize("kind", ["yarn", "linear"])
@pytest.mark.parametrize("name", list(SHIPPED))
def test_extend_preserves_the_shipped_layout(name, kind, tmp_path) -> None:
    _, _, layers, _, original, base, dims, scaled_type = SHIPPED[name]
    source = shipped_folder(name, tmp_path / "source")
    result = extend(source, _method(kind, original), tmp_path / "out")
    assert not [note for note in result.notes if "preservation not checked" in note]
    before = measured_layers(json.loads((source / "config.json").read_text()), layers)
    after = measured_layers(json.loads((tmp_path / "out" / "config.json").read_text()), layers)
    types = transformers.AutoConfig.from_pretrained(source).layer_types if scaled_type else None
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        if old is None:  # NoPE (SmolLM3's every fourth layer) stays NoPE
            assert name == "smollm3" and index % 4 == 3 and new is None
            continue
        assert new.pairs == old.pairs and 2 * len(old.pairs) == dims, (index, old.describe(), new.describe())
        if scaled_type is not None and types[index] != scaled_type:
            np.testing.assert_allclose(new.freqs, old.freqs, rtol=1e-6)  # a sliding layer keeps its own base
            continue
        pairs = dims // 2
        lowest = base ** (-(pairs - 1) / pairs)  # closed form: plain RoPE at the unscaled base
        assert math.isclose(new.by_frequency()[-1], lowest / S, rel_tol=1e-4), (index, new.by_frequency()[-1])
        highest = 1.0 if kind == "yarn" else 1.0 / S
        assert math.isclose(new.by_frequency()[0], highest, rel_tol=1e-5)


def test_minimax_m2_is_read_with_its_64_rotated_dims(tmp_path) -> None:
    from ropekit.integrations.hf.model_layout import model_layout

    source = shipped_folder("minimax-m2", tmp_path / "source")
    shown = dict(
        (label, value) for label, value, _ in model_layout(json.loads((source / "config.json").read_text())).rows
    )
    assert "rotary dim 64 of head 128" in shown["RoPE"]
    result = extend(source, YarnScaling(factor=S, original_max_position_embeddings=196608), tmp_path / "out")
    assert result.config["rotary_dim"] == 64  # the user's key, kept


def test_olmo3_writes_the_per_layer_form(tmp_path) -> None:
    source = shipped_folder("olmo3", tmp_path / "source")
    result = extend(source, YarnScaling(factor=32.0, original_max_position_embeddings=8192), tmp_path / "out")
    read = transformers.AutoConfig.from_pretrained(tmp_path / "out").rope_parameters
    assert read["full_attention"]["rope_type"] == "yarn" and read["full_attention"]["factor"] == 32.0
    assert read["sliding_attention"]["rope_type"] == "default" and read["sliding_attention"]["rope_theta"] == 5e5
    assert "rope_local_base_freq" not in result.config  # a Gemma 3 key OLMo 3 does not read


def test_hunyuan_ntk_alpha_is_transformers_own_rotary(tmp_path) -> None:
    """float64 against transformers' own HunYuanDenseV1RotaryEmbedding (its modeling file's NTK-alpha)."""
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding

    from ropekit.integrations.hf.model_config import rope_of
    from ropekit.scaling.registry import frequencies

    source = shipped_folder("hunyuan-dense", tmp_path / "source")
    theirs = HunYuanDenseV1RotaryEmbedding(transformers.AutoConfig.from_pretrained(source)).inv_freq.double().numpy()
    ours = frequencies(rope_of(json.loads((source / "config.json").read_text()))).inv_freq
    np.testing.assert_allclose(ours, theirs, rtol=2e-6)
    np.testing.assert_allclose(ours, SHIPPED["hunyuan-dense"][5] ** (-np.arange(64) / 64), rtol=1e-12)


def _wrong_writer(monkeypatch, edit) -> None:
    """``extend`` writes its config through ``edit`` (given a copy of the config dict, changed in place)."""
    from ropekit.integrations.hf import extend as extend_module

    written = extend_module.write_config

    def writing(out, config):
        config = json.loads(json.dumps(dict(config)))
        edit(config)
        written(out, config)

    monkeypatch.setattr(extend_module, "write_config", writing)


def test_a_writer_that_drops_the_partial_rotary_key_is_refused(tmp_path, monkeypatch) -> None:
    def dropping(config):
        for params in (config, config.get("rope_parameters") or {}, config.get("rope_scaling") or {}):
            params.pop("partial_rotary_factor", None)

    _wrong_writer(monkeypatch, dropping)
    source = shipped_folder("phi2", tmp_path / "source")  # without the key, PhiConfig's default 0.5 applies
    with pytest.raises(ValueError, match=r"^layer 0: the output rotates 40 dims .*, the source 32 dims"):
        extend(source, LinearScaling(factor=S), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_source_transformers_cannot_run_is_not_checked_and_says_why() -> None:
    """LongCat-Flash's ``qk_head_dim`` (saved in config.json) left at 192 while its two parts are 16 each: transformers'
    own forward of that config raises (its attention splits 192 dims into 16 + 16). The check says so in one note,
    never a traceback."""
    import torch

    from ropekit.integrations.hf.preservation import Request, check_preserved

    sizes = {"vocab_size": 64, "hidden_size": 64, "num_layers": 1, "num_attention_heads": 4, "kv_lora_rank": 32,
             "q_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16,
             "n_routed_experts": 4, "ffn_hidden_size": 64, "expert_ffn_hidden_size": 32}  # fmt: skip
    config = transformers.LongcatFlashConfig(**sizes).to_dict() | {"qk_head_dim": 192}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="split_with_sizes"):  # the oracle: transformers' own forward
            measured = transformers.LongcatFlashConfig.from_dict(config)
            transformers.AutoModelForCausalLM.from_config(measured)(torch.zeros(1, 4, dtype=torch.long))
        note = check_preserved(config, config, Request(None, None, 256))
    assert note is not None and note.startswith("preservation not checked: transformers' forward of ")
    assert "RuntimeError: split_with_sizes" in note and "\n" not in note


def _giving(message: str) -> float:
    """The frequency a refusal says the layer's pair should turn at."""
    import re

    return float(re.search(r"\(giving ([0-9.e+-]+)\)", message).group(1))


@pytest.mark.parametrize("kind", ["yarn", "linear"])
def test_a_writer_that_drops_hunyuans_alpha_is_refused(kind, tmp_path, monkeypatch) -> None:
    """The method on the plain ``rope_theta`` rather than on NTK-alpha's base; the source is measured within its
    256 positions, where transformers runs its NTK-alpha (beyond them it recomputes a dynamic NTK from rope_theta)."""

    def plain_base(config):
        for params in (config, config.get("rope_parameters") or {}, config.get("rope_scaling") or {}):
            if "rope_theta" in params:
                params["rope_theta"] = 1e4

    _wrong_writer(monkeypatch, plain_base)
    source = shipped_folder("hunyuan-dense-256", tmp_path / "source")
    with pytest.raises(ValueError, match=r"^layer 0: its lowest-frequency pair turns at ") as refused:
        extend(source, _method(kind, 256), tmp_path / "out")
    wanted = _HUNYUAN_BASE ** (-63 / 64) / S  # closed form: NTK-alpha's lowest pair slowed by s
    assert math.isclose(_giving(str(refused.value)), wanted, rel_tol=1e-4)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["yarn", "linear"])
def test_a_writer_that_scales_deepseek_v4s_sliding_layers_is_refused(kind, tmp_path, monkeypatch) -> None:
    """DeepSeek-V4's sliding layers run its ``main`` RoPE, whose base the model keeps: a writer that gives ``main`` the
    method too is refused at the sliding layer (the compressed one, on ``compress``, is scaled as asked)."""

    def main_scaled(config):
        params = config["rope_parameters"]
        params["main"] = {**params["compress"], "rope_theta": params["main"]["rope_theta"]}

    _wrong_writer(monkeypatch, main_scaled)
    source = shipped_folder("deepseek-v4", tmp_path / "source")
    with pytest.raises(ValueError, match=r"^layer 0 \(sliding_attention, RoPE 'main'\): the request leaves this layer"):
        extend(source, _method(kind, 65536), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_writer_that_keeps_deepseek_v4s_shipped_yarn_is_refused(tmp_path, monkeypatch) -> None:
    """``compress`` left at the shipped YaRN x16 when x32 is asked for: the compressed layer's lowest pair turns at
    1/16, not 1/32, of plain RoPE's at compress_rope_theta."""

    def shipped_kept(config):
        config["rope_parameters"]["compress"] |= {"rope_type": "yarn", "factor": 16.0}

    _wrong_writer(monkeypatch, shipped_kept)
    source = shipped_folder("deepseek-v4", tmp_path / "source")
    where = r"^layer 1 \(compressed_sparse_attention, RoPE 'compress'\): its lowest-frequency pair turns at "
    with pytest.raises(ValueError, match=where) as refused:
        extend(source, YarnScaling(factor=32.0, original_max_position_embeddings=65536), tmp_path / "out")
    assert math.isclose(_giving(str(refused.value)), 160000.0 ** (-31 / 32) / 32, rel_tol=1e-4)  # closed form
    assert not (tmp_path / "out").exists()


def _compress_amplitude(folder) -> float:
    """A of DeepSeek-V4's ``compress`` RoPE: cos at position 0 of transformers' own DeepseekV4RotaryEmbedding."""
    import torch
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rotary = DeepseekV4RotaryEmbedding(transformers.AutoConfig.from_pretrained(folder))
    cos, _ = rotary(torch.zeros(1, 1, 4), torch.zeros(1, 1, dtype=torch.long), layer_type="compress")
    return float(cos.flatten()[0])


def test_extend_keeps_deepseek_v4s_compress_amplitude(tmp_path) -> None:
    """DeepseekV4Config gives a YaRN ``compress`` RoPE attention_factor 1.0 (its reference does not multiply cos/sin
    by YaRN's 0.1·ln s + 1); the written model keeps A = 1 on its compressed layers at x32."""
    source = shipped_folder("deepseek-v4", tmp_path / "source")
    result = extend(source, YarnScaling(factor=32.0, original_max_position_embeddings=65536), tmp_path / "out")
    assert _compress_amplitude(source) == 1.0 and _compress_amplitude(tmp_path / "out") == 1.0
    layers = measured_layers(json.loads((tmp_path / "out" / "config.json").read_text()), 2)
    assert [layer.rope_key for layer in layers] == ["main", "compress"]
    assert [layer.amplitude for layer in layers] == pytest.approx([1.0, 1.0], rel=1e-6)
    assert result.config["rope_parameters"]["compress"]["attention_factor"] == 1.0


def test_a_writer_that_drops_deepseek_v4s_attention_factor_is_refused(tmp_path, monkeypatch) -> None:
    """Without ``attention_factor`` transformers multiplies the compressed layers' cos/sin by 0.1·ln 32 + 1."""

    def dropped(config):
        for params in (config["rope_parameters"]["compress"], config.get("rope_scaling") or {}):
            params.pop("attention_factor", None)

    _wrong_writer(monkeypatch, dropped)
    source = shipped_folder("deepseek-v4", tmp_path / "source")
    where = r"^layer 1 \(compressed_sparse_attention, RoPE 'compress'\): its rotation's amplitude is 1.34657"
    with pytest.raises(ValueError, match=where):
        extend(source, YarnScaling(factor=32.0, original_max_position_embeddings=65536), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_writer_that_changes_the_amplitude_of_a_layer_left_alone_is_refused(tmp_path, monkeypatch) -> None:
    """DeepSeek-V4's ``main`` written as YaRN x1 (its frequencies unchanged) with attention_factor 2: its sliding
    layer's rotation is 2·R, not the source's R."""

    def main_doubled(config):
        main = config["rope_parameters"]["main"]
        main |= {"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 65536, "attention_factor": 2.0}

    _wrong_writer(monkeypatch, main_doubled)
    source = shipped_folder("deepseek-v4", tmp_path / "source")
    where = (
        r"^layer 0 \(sliding_attention, RoPE 'main'\): the request leaves this layer as it is, but its rotation's "
        r"amplitude is 2, not the source's 1;"
    )
    with pytest.raises(ValueError, match=where):
        extend(source, YarnScaling(factor=32.0, original_max_position_embeddings=65536), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_minimax_m3s_unread_rotary_dim_is_not_read(tmp_path) -> None:
    """MiniMax-M3-VL's text config declares ``rotary_dim`` (8 of a 16 head here) that its modeling file never reads:
    transformers rotates the whole head. ``extend`` writes that (the check measured 8 written dims against the
    source's 16 and refused, when ropekit read the key as MiniMax-M2's config class does)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[3] / "evidence" / "engines_matrix"))
    import matrix

    source = matrix.tiny_folder("minimax_m3_vl_text", tmp_path / "source")
    config = json.loads((source / "config.json").read_text())
    assert config["rotary_dim"] < config["head_dim"]
    extend(source, LinearScaling(factor=S), tmp_path / "out")
    layers = config["num_hidden_layers"]
    before = measured_layers(config, layers)[0]
    after = measured_layers(json.loads((tmp_path / "out" / "config.json").read_text()), layers)[0]
    assert 2 * len(before.pairs) == config["head_dim"] and after.pairs == before.pairs
    np.testing.assert_allclose(after.by_frequency(), np.array(before.by_frequency()) / S, rtol=1e-6)


@pytest.mark.parametrize("kind", ["yarn", "linear"])
def test_phimoe_writes_its_amplitude_as_the_mscale_pair(kind, tmp_path) -> None:
    """Phi-3.5-MoE's rotary multiplies cos/sin by ``short_mscale``/``long_mscale`` in place of the method's attention
    factor, and its config class refuses a non-default dict without them: the source's pair is read as its amplitude
    (1.2432, measured from transformers' forward), and ``extend`` writes the method's own (YaRN 0.1·ln s + 1, linear
    1) as the pair, measured the same way."""
    from ropekit.hf_format import from_hf_config

    source = shipped_folder("phi3.5-moe", tmp_path / "source")
    config = json.loads((source / "config.json").read_text())
    assert math.isclose(from_hf_config(config).scaling.attention_factor, _PHIMOE_MSCALE)
    assert math.isclose(measured_layers(config, 2)[0].amplitude, _PHIMOE_MSCALE, rel_tol=1e-5)
    extend(source, _method(kind, 4096), tmp_path / "out")
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    expected = 0.1 * math.log(S) + 1 if kind == "yarn" else 1.0
    assert math.isclose(measured_layers(written, 2)[0].amplitude, expected, rel_tol=1e-5)
    pair = {key: written["rope_parameters"][key] for key in ("short_mscale", "long_mscale")}
    assert pair == dict.fromkeys(pair, pytest.approx(expected))
    assert from_hf_config(written).scaling.rope_type == kind  # read back (inspect, engines) as the method written


def test_a_phimoe_mscale_pair_that_differs_is_refused() -> None:
    from ropekit.hf_format import from_hf_config

    rope = {**_PHIMOE_LONGROPE, "long_mscale": 1.5}
    with pytest.raises(ValueError, match="short_mscale and long_mscale must be two equal numbers"):
        from_hf_config({"model_type": "phimoe", "head_dim": 128, "max_position_embeddings": 131072,
                        "rope_scaling": rope})  # fmt: skip


def test_a_phimoe_mscale_pair_on_a_method_without_an_amplitude_is_refused() -> None:
    """Linear scales no cos/sin in ropekit: a Phi-3.5-MoE linear dict whose pair is not 1 is refused by name."""
    from ropekit.hf_format import from_hf_config

    rope = {"rope_type": "linear", "factor": 4.0, "short_mscale": 1.2, "long_mscale": 1.2,
            "original_max_position_embeddings": 4096}  # fmt: skip
    with pytest.raises(ValueError, match=r"short_mscale/long_mscale 1\.2 on a method whose cos/sin ropekit does not"):
        from_hf_config({"model_type": "phimoe", "head_dim": 128, "rope_parameters": rope})
