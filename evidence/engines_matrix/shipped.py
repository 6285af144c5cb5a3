"""The 2026 families as their released checkpoints ship them: the RoPE keys (and the head and layer layout they
apply to) of each family's ``config.json``, with where each was read. The matrix builds each as a tiny random model
from these keys (its rows are named ``<model_type>@shipped``), beside the row of its config class's defaults.

Only what sizes the model shrinks (hidden size 64, 4 heads, 2 layers, :data:`matrix.SHRINK`); the head size, the
RoPE keys and the kind of each kept layer are the checkpoint's: a hybrid keeps one recurrent and one attention layer,
a per-layer-type model one layer of each type. The keys are given as config-class arguments, so the config class
derives what it derives from them (Gemma 4's per-layer head size from ``global_head_dim``, DeepSeek-V4's
``main``/``compress`` rope dicts from its older keys) as it does when it reads the checkpoint.

M-RoPE (Qwen3.5) is probed at text positions (t = h = w, as for every text token): ropekit's reference replays
transformers' rotary module on one row of position ids, so the sections are measured as text tokens meet them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Shipped:
    """One family's shipped keys.

    Attributes:
        model_type: transformers' model type the checkpoint names.
        keys: config-class arguments (a composite config's text part under ``text_config``).
        source: where the keys were read.
    """

    model_type: str
    keys: dict[str, Any] = field(default_factory=dict)
    source: str = ""


#: Qwen3.5's text RoPE as Qwen/Qwen3.5-0.8B's and -4B's config.json ship it (text_config.rope_parameters)
QWEN3_5_ROPE = {
    "rope_type": "default",
    "rope_theta": 10_000_000,
    "partial_rotary_factor": 0.25,
    "mrope_interleaved": True,
    "mrope_section": [11, 11, 10],
}
#: one recurrent (Gated DeltaNet) layer and one attention layer: the shipped 3:1 pattern cut to two layers
HYBRID = ["linear_attention", "full_attention"]

SHIPPED: dict[str, Shipped] = {
    "qwen3_5": Shipped(
        "qwen3_5",
        {
            "text_config": {
                "head_dim": 256,
                "layer_types": HYBRID,
                "num_hidden_layers": 2,
                "rope_parameters": QWEN3_5_ROPE,
            }
        },
        "Qwen/Qwen3.5-0.8B and Qwen/Qwen3.5-4B config.json, text_config (head_dim 256, full_attention_interval 4, "
        "rope_parameters); the same rope_parameters in the Qwen3.5 model cards' YaRN override",
    ),
    "qwen3_5_moe": Shipped(
        "qwen3_5_moe",
        {
            "text_config": {
                "head_dim": 256,
                "layer_types": HYBRID,
                "num_hidden_layers": 2,
                "rope_parameters": QWEN3_5_ROPE,
            }
        },
        "Qwen/Qwen3.5-35B-A3B and Qwen/Qwen3.5-397B-A17B config.json, text_config: the rope_parameters and head_dim "
        "of the dense Qwen3.5 checkpoints",
    ),
    "qwen3_next": Shipped(
        "qwen3_next",
        {
            "head_dim": 256,
            "layer_types": HYBRID,
            "num_hidden_layers": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10_000_000, "partial_rotary_factor": 0.25},
        },
        "Qwen/Qwen3-Next-80B-A3B-Instruct config.json (head_dim 256, full_attention_interval 4, rope_theta 1e7, "
        "partial_rotary_factor 0.25, rope_scaling null)",
    ),
    "gemma4_text": Shipped(
        "gemma4_text",
        {
            "head_dim": 256,
            "global_head_dim": 512,
            "layer_types": ["sliding_attention", "full_attention"],
            "num_hidden_layers": 2,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
            },
        },
        "google/gemma-4-E2B-it and google/gemma-4-12B-it config.json, text_config (head_dim 256 on sliding layers, "
        "global_head_dim 512 on full-attention layers, 5 sliding : 1 full, per-layer-type rope_parameters), as the "
        "language model's own folder (ropekit extends a composite's text part there)",
    ),
    "deepseek_v4": Shipped(
        "deepseek_v4",
        {
            "head_dim": 512,
            "qk_rope_head_dim": 64,
            "compress_ratios": [0, 4],
            "num_hidden_layers": 2,
            "rope_theta": 10_000,
            "compress_rope_theta": 160_000,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 16,
                "original_max_position_embeddings": 65_536,
                "beta_fast": 32,
                "beta_slow": 1,
            },
        },
        "deepseek-ai/DeepSeek-V4-Flash config.json (head_dim 512, qk_rope_head_dim 64, compress_ratios 0 on the first "
        "layers then 4/128, rope_theta 1e4, compress_rope_theta 1.6e5, rope_scaling YaRN x16 from 65,536), its "
        "rope_scaling given as transformers' DeepseekV4Config reads it (rope_parameters before its split into "
        "main/compress)",
    ),
    "hunyuan_v1_dense": Shipped(
        "hunyuan_v1_dense",
        {
            "head_dim": 128,
            "rope_parameters": {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10_000.0},
        },
        "tencent/Hunyuan-7B-Instruct config.json (head_dim 128, rope_theta 1e4, rope_scaling {type: dynamic, "
        "alpha: 1000, factor: 1}: NTK-alpha, computed in transformers' modeling_hunyuan_v1_dense.py)",
    ),
}
