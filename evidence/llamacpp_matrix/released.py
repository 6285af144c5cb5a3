"""What a tiny model of some architectures needs beyond its config class's defaults for llama.cpp's converter and
llama.cpp to take it, as the family's released checkpoints have it: keys given to the config class by
``run.py`` (``tiny_folder``'s ``keys``; sizes given here are kept as given, so they are the tiny model's), with
the tokenizer the converter reads. Imported by ``run.py``, which puts ``evidence/engines_matrix`` and ``tests`` on
the path.

Each entry says what needs it and where the released checkpoint has it.
"""

from __future__ import annotations

from typing import Any

from shipped import SHIPPED

from helpers.llamacpp_convert import byte_fallback_tokenizer

#: Gemma 4 as google/gemma-4-E2B-it ships it (:data:`shipped.SHIPPED`: one sliding and one full-attention layer, the
#: full layer's head size from ``global_head_dim``: the converter reads it for its RoPE factors), with a per-layer
#: embedding table the size of the tiny vocabulary (ids below 300; the shipped 262,144 rows would be 0.5 GB here)
GEMMA4_TEXT = {**SHIPPED["gemma4_text"].keys, "vocab_size_per_layer_input": 300}

#: Qwen3.5's and Qwen3-Next's shipped layer pattern, 3 Gated DeltaNet layers then one attention layer
#: (full_attention_interval 4): llama.cpp's converter writes the interval, not the list, so llama.cpp runs the
#: :data:`shipped.HYBRID` two-layer cut as two recurrent layers (and aborts: no layer has a KV cache)
QWEN_HYBRID = {"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
#: Qwen3.5 as Qwen/Qwen3.5-0.8B ships it (:data:`shipped.SHIPPED`: head 256, M-RoPE sections, base 1e7), 4 layers
QWEN3_5_TEXT = {**SHIPPED["qwen3_5"].keys["text_config"], **QWEN_HYBRID}

BUILD: dict[str, dict[str, Any]] = {
    # transformers' DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not declare (so the
    # defaults do not build); databricks/dbrx-instruct's config.json ships attn_config {clip_qkv: 8, kv_n_heads: 8,
    # rope_theta: 500000}, and the converter reads the same keys (kv heads 2 of the tiny model's 4)
    "dbrx": {"attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 500_000}},
    # Dots1Config leaves the expert counts unset (the defaults do not build); rednote-hilab/dots.llm1.inst ships
    # 128 routed experts, 2 shared, 6 per token and one dense first layer: here 4 routed, 1 shared, 2 per token; and
    # as many key/value heads as query heads (32 of 32, no grouped-query attention: llama.cpp's dots1 takes keys and
    # values as wide as queries)
    "dots1": {
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "num_key_value_heads": 4,
        # the router's score function: transformers' Dots1TopkRouter applies a sigmoid whatever the config says;
        # llama.cpp reads the gating function the converter writes from scoring_func, and aborts building the MoE
        # graph without one
        "scoring_func": "sigmoid",
    },
    # the converter reads head_dim, which FalconH1Config does not declare (transformers derives hidden / heads);
    # tiiuae/Falcon-H1-0.5B-Instruct's config.json ships it (64 = 1024 / 16): here 16 = 64 / 4
    "falcon_h1": {"head_dim": 16},
    # Lfm2MoeConfig leaves layer_types unset (the defaults do not build); LiquidAI/LFM2-8B-A1B ships a list of "conv"
    # and "full_attention" layers after 2 dense ones: here one of each kind, the first dense, the second a MoE layer
    "lfm2_moe": {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # NemotronConfig leaves num_key_value_heads unset (the defaults do not build); nvidia/Minitron-8B-Base ships 8 of
    # 48 heads: here 2 of the tiny model's 4
    "nemotron": {"num_key_value_heads": 2},
    # google/gemma-3n-E2B-it ships 30 layers (4 sliding : 1 full), the last 10 reading the keys and values of an
    # earlier layer (num_kv_shared_layers: llama.cpp then expects key and value weights in none of them, which
    # transformers saves for every layer), sparse activations in the first 10: here one sliding and one full layer,
    # unshared (the defaults cut to 2 layers leave 15 shared layers and no full one, and do not build), with a
    # per-layer embedding table the size of the tiny vocabulary
    "gemma3n_text": {
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "num_kv_shared_layers": 0,
        "activation_sparsity_pattern": [0.95, 0.0],
        "intermediate_size": [128, 128],  # per layer, as the class keeps it
        "vocab_size_per_layer_input": 300,
    },
    "gemma4_text": GEMMA4_TEXT,
    # the composite Gemma 4 classes: the same language model under text_config (the converter reads it there);
    # the converter reads moe_intermediate_size for every Gemma 4 (null: no MoE block), which Gemma4UnifiedTextConfig
    # does not declare
    "gemma4": {"text_config": GEMMA4_TEXT},
    "gemma4_unified": {"text_config": {**GEMMA4_TEXT, "moe_intermediate_size": None}},
    "qwen3_5": {"text_config": QWEN3_5_TEXT},
    "qwen3_5_text": QWEN3_5_TEXT,
    "qwen3_5_moe": {"text_config": QWEN3_5_TEXT},
    "qwen3_5_moe_text": QWEN3_5_TEXT,
    "qwen3_next": {**SHIPPED["qwen3_next"].keys, **QWEN_HYBRID},
}

#: the tokenizer each architecture's tiny model is saved with, where not :func:`byte_tokenizer` (256 byte tokens):
#: Gemma 4 ships a SentencePiece-style BPE vocabulary with byte fallback, the only kind its converter reads
TOKENIZER = {model_type: byte_fallback_tokenizer for model_type in ("gemma4", "gemma4_text", "gemma4_unified")}

#: what a measured difference comes from, where it was traced (appended to the source cell's detail)
NOTES = {
    "dbrx": "the RoPE base: transformers 5.18 runs rope_parameters' (absent in the release, so 10000), llama.cpp the "
    "attn_config.rope_theta the release ships (500000); with rope_parameters' base 500000 too the gap is 1.7e-4",
    **dict.fromkeys(
        ("qwen3_5_moe", "qwen3_5_moe_text"),
        "one position of 320 (77) is over the tolerance, the median gap 6.5e-5: a local difference (the extended "
        "linear and yarn models are the same)",
    ),
    **dict.fromkeys(
        ("gemma4", "gemma4_text", "gemma4_unified"),
        "from position 17 on, at scattered positions; not the partial rotation (with partial_rotary_factor 1 on "
        "the full-attention layer it still differs from position 17 on); not traced further",
    ),
}
