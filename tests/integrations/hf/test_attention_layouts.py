"""gpt-oss and DeepSeek YaRN forms: the cos/sin factor, DeepSeek's softmax-scale term and the attention layouts
ropekit's attention methods refuse.

Oracles: transformers' own rotary classes (``GptOssRotaryEmbedding``, ``DeepseekV3RotaryEmbedding``), its
``yarn_apply_mscale``, and a DeepSeek-V3 model transformers builds from the new config (same weights).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from helpers.hf_models import random_hf_config, random_hf_model
from ropekit import frequencies, from_hf_config
from ropekit.scaling import YarnScaling

pytestmark = pytest.mark.hf

GPT_OSS = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
           "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0}  # fmt: skip
DEEPSEEK = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
            "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 10000.0}  # fmt: skip


#: a small DeepSeek-V3 beyond the factory's sizes: 2 heads of multi-head latent attention (RoPE part 8, the rest 16),
#: four routed experts after one dense layer
DEEPSEEK_SIZES = {"vocab": 64, "intermediate": 64, "heads": 2, "positions": 163840, "moe_intermediate_size": 32,
                  "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "q_lora_rank": None,
                  "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
                  "first_k_dense_replace": 1}  # fmt: skip


def quietly(build, *args, **kwargs):
    """``build(*args, **kwargs)`` without the warnings transformers gives about these small configs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(*args, **kwargs)


def deepseek_config(params: dict):
    return quietly(random_hf_config, "deepseek_v3", rope_parameters=dict(params), **DEEPSEEK_SIZES)


def deepseek(params: dict):
    return quietly(random_hf_model, "deepseek_v3", rope_parameters=dict(params), **DEEPSEEK_SIZES).eval()


def test_gpt_oss_truncate_false_equals_transformers():
    pytest.importorskip("transformers")
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

    sizes = {"vocab": None, "intermediate": None, "layers": 1, "heads": 2, "kv_heads": 1, "head_dim": 64}
    config = quietly(random_hf_config, "gpt_oss", positions=131072, rope_parameters=dict(GPT_OSS), **sizes)
    rotary = GptOssRotaryEmbedding(config)
    rope = from_hf_config(config.to_dict())
    assert rope.scaling.truncate is False
    freqs = frequencies(rope)
    torch.testing.assert_close(torch.from_numpy(freqs.inv_freq).float(), rotary.inv_freq, rtol=1e-6, atol=0)
    assert math.isclose(freqs.attention_factor, rotary.attention_scaling, rel_tol=1e-12)
    # truncate changes the ramp's ends: the truncated form is a different set of frequencies
    truncated = frequencies(rope.replace(scaling=rope.scaling.__class__(**{**vars(rope.scaling), "truncate": True})))
    assert abs(truncated.inv_freq - freqs.inv_freq).max() > 1e-6


def test_deepseek_cos_sin_factor_equals_transformers():
    pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RotaryEmbedding

    config = deepseek_config(DEEPSEEK)
    rotary = DeepseekV3RotaryEmbedding(config)
    freqs = frequencies(from_hf_config(config.to_dict()))
    torch.testing.assert_close(torch.from_numpy(freqs.inv_freq).float(), rotary.inv_freq, rtol=1e-6, atol=0)
    assert math.isclose(freqs.attention_factor, rotary.attention_scaling, rel_tol=1e-12)
    assert freqs.attention_factor == 1.0  # mscale == mscale_all_dim: the ratio is 1


@pytest.mark.parametrize(
    "extra",
    [{}, {"mscale_all_dim": 0.707}, {"mscale_all_dim": 0.0}, {"mscale": 0.5, "mscale_all_dim": 1.0},
     {"mscale_all_dim": 1.0, "attention_factor": 1.5}, {"factor": 1.0, "mscale_all_dim": 1.0}],
)  # fmt: skip
def test_softmax_term_equals_yarn_apply_mscale(extra):
    pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    params = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, **extra}
    scaling = from_hf_config({"head_dim": 64, "rope_parameters": params}).scaling
    assert math.isclose(scaling.softmax_mscale(), yarn_apply_mscale(params, 1.0), rel_tol=1e-15)


def test_apply_scaling_resets_deepseek_softmax_scale_as_transformers_builds_it():
    """A DeepSeek-V3 model patched to another YaRN factor equals the model transformers builds with that factor."""
    pytest.importorskip("transformers")
    from ropekit.integrations.hf.patch_rope import apply_scaling

    model = deepseek(DEEPSEEK)
    new = {**DEEPSEEK, "factor": 8.0}
    rebuilt = deepseek(new)
    rebuilt.load_state_dict(model.state_dict())
    before = model.model.layers[0].self_attn.scaling
    apply_scaling(model, YarnScaling(factor=8.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=1.0))
    assert model.model.layers[0].self_attn.scaling == pytest.approx(
        rebuilt.model.layers[0].self_attn.scaling, rel=1e-12
    )
    assert model.model.layers[0].self_attn.scaling != pytest.approx(before)
    ids = torch.randint(0, 64, (1, 48), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, rebuilt(ids).logits, atol=2e-5, rtol=0)
        apply_scaling(model, None)  # plain RoPE: no term at all
        assert model.model.layers[0].self_attn.scaling == pytest.approx(24**-0.5, rel=1e-12)


def test_attention_methods_refuse_mla_and_sinks_by_name():
    pytest.importorskip("transformers")
    from ropekit.attention import SelfExtend
    from ropekit.integrations.hf.attention_layouts import refuse_sinks
    from ropekit.integrations.hf.patch_attention import apply_attention

    model = deepseek(DEEPSEEK)
    with pytest.raises(ValueError, match=r"multi-head latent attention \(qk_rope_head_dim=8\)"):
        apply_attention(model, SelfExtend(group=2, window=16))
    with pytest.raises(ValueError, match="learned attention sinks"):
        refuse_sinks(torch.nn.Module(), {"s_aux": torch.zeros(2)})


def test_gpt_oss_model_is_refused_by_name():
    """gpt-oss's rotary tables are half-width and its attention has learned sinks: both refused before any work."""
    pytest.importorskip("transformers")
    from ropekit.attention import SelfExtend
    from ropekit.integrations.hf.patch_attention import apply_attention
    from ropekit.integrations.hf.patch_rope import apply_scaling

    options = {"num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": 16, "rope_parameters": dict(GPT_OSS)}
    model = quietly(random_hf_model, "gpt_oss", vocab=64, intermediate=32, head_dim=16, positions=512, **options).eval()
    with pytest.raises(ValueError, match="learned attention sinks"):
        apply_attention(model, SelfExtend(group=2, window=8))
    with pytest.raises(ValueError, match="half-width cos/sin tables"):
        apply_scaling(model, YarnScaling(factor=8.0, original_max_position_embeddings=4096))
