"""What makes a tiny random model the architecture as released, for llama.cpp's column: per architecture, the keys,
their spelling in ``config.json``, the tokenizer and the trained weights that llama.cpp's converter or llama.cpp
needs and the config class's defaults (``matrix.tiny_folder``) do not give, each as the family's released checkpoints
have it and with why (:data:`RELEASED`); and, where llama.cpp's row still differs for a reason traced to llama.cpp or
to the release, that reason (``Released.explained``, printed beside the verdict in ``summary.md``).

Where a default, the cut to 2 layers or transformers' random initialisation gives a model no released checkpoint
looks like (a sliding window with no sliding layer, no expert routed, every layer of one kind in a family llama.cpp
builds from two, an all-zero router that ties every expert), llama.cpp, which runs what checkpoints ship, computes
another model or refuses it. The keys are config-class arguments (a composite config's text part under
``text_config``) and are kept as given, as :mod:`shipped`'s are; a family's shipped RoPE parameters are
:mod:`shipped`'s, and a RoPE key is here only where the converter reads a legacy key the release ships. Imported by
``run.py``, which puts ``evidence/engines_matrix`` and ``tests`` on the path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shipped import QWEN3_5_ROPE, SHIPPED

#: one layer of each kind, in the order the released pattern starts (3 sliding : 1 full, cut to two layers)
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]
#: granite-4.0-micro's layer kinds as its config.json spells them (every layer attention)
GRANITE_ATTENTION = ["attention", "attention"]


@dataclass(frozen=True)
class Released:
    """One architecture as released, for llama.cpp.

    Attributes:
        keys: config-class arguments (a composite config's text part under ``text_config``).
        why: what llama.cpp (or its converter) requires, and where the released checkpoint has it.
        tokenizer: ``"bytes"`` (byte-level BPE), ``"sentencepiece"`` (a ``tokenizer.model``) or ``"byte_fallback"``
            (a SentencePiece-style BPE ``tokenizer.json``, as Gemma 4 ships): ``tests/helpers/llamacpp_convert.py``.
        spelled: keys written into the saved ``config.json`` as the release spells them, where transformers reads
            the release's spelling and saves its own, which the converter does not read the same.
        router: the name suffix of a router transformers initialises to zeros and a release has trained (an
            all-zero router ties every expert for every token; transformers' topk and llama.cpp's argsort break the
            tie by different indices): filled as transformers initialises the other linear layers.
        explained: why llama.cpp's row is not ``same`` for the architecture as released, with the measurement.
        legacy: keys the release's ``config.json`` carries beside what transformers 5 writes (key → its value, from
            the tiny model's own ``config.json``, so transformers, ropekit and the converter read one model).
        tensors: the release's tensor names where transformers saves others (regex → replacement on the saved names).
        tokens: special tokens the family's tokenizer has, added after the byte tokens.
        unconvertible: why the converter cannot convert the family's released layout here at all.
    """

    keys: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    tokenizer: str = "bytes"
    spelled: dict[str, Any] = field(default_factory=dict)
    router: str | None = None
    explained: str = ""
    legacy: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    tensors: tuple[tuple[str, str], ...] = ()
    tokens: tuple[str, ...] = ()
    unconvertible: str = ""


#: Llama 4's layers as llama.cpp builds them: it fixes the pattern (a period of 4), so a model of two layers has no
#: full layer, its non-chunked cache none, and llama.cpp aborts (GGML_ASSERT "tensor buffer not set")
LLAMA4_LAYERS = {"num_hidden_layers": 4}
LLAMA4_WHY = (
    "llama.cpp fixes Llama 4's layers as 3 chunked + 1 full (a period of 4); Llama-4-Scout ships 48 layers, every "
    "4th full and NoPE"
)

#: Gemma 3's text model as llama.cpp builds it: one period of its layer pattern, and its attention scale
GEMMA3_TEXT = {"num_hidden_layers": 6, "query_pre_attn_scalar": 16}
GEMMA3_WHY = (
    "Gemma 3 ships a SentencePiece tokenizer.model, whose vocabulary the converter pads to vocab_size as it keeps "
    "the embedding (from a tokenizer.json it pads the vocabulary but cuts the embedding to the tokenizer's count, "
    "and llama.cpp refuses the two lengths); llama.cpp fixes the layers as "
    "5 sliding + 1 full (gemma3.cpp: load_swa_pattern(ml, 6)) and scales q by head_dim^-1/2, as google/gemma-3-1b-pt "
    "ships (26 layers, sliding_window_pattern 6, query_pre_attn_scalar 256 = head_dim)"
)

#: Gemma 4 as google/gemma-4-E2B-it ships it (:data:`shipped.SHIPPED`: one sliding and one full-attention layer, the
#: full layer's head size from ``global_head_dim``: the converter reads it for its RoPE factors), with a per-layer
#: embedding table the size of the tiny vocabulary (ids below 300; the shipped 262,144 rows would be 0.5 GB here)
GEMMA4_TEXT = {**SHIPPED["gemma4_text"].keys, "vocab_size_per_layer_input": 300}
GEMMA4_WHY = (
    "Gemma 4 ships a SentencePiece-style BPE vocabulary with byte fallback, the only kind its converter reads; the "
    "shipped keys of shipped.py"
)
GEMMA4_DIFFERS = (
    "from position 17 on, at scattered positions; not the partial rotation (with partial_rotary_factor 1 on the "
    "full-attention layer it still differs from position 17 on); not traced further"
)
#: Qwen3.5's and Qwen3-Next's shipped layer pattern, 3 Gated DeltaNet layers then one attention layer
#: (full_attention_interval 4)
QWEN_HYBRID = {"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
#: Qwen3.5 as Qwen/Qwen3.5-0.8B ships it (:data:`shipped.SHIPPED`: head 256, M-RoPE sections, base 1e7), 4 layers
QWEN3_5_TEXT = {**SHIPPED["qwen3_5"].keys["text_config"], **QWEN_HYBRID}
QWEN_WHY = (
    "llama.cpp's converter writes the layer interval, not the list, so llama.cpp runs shipped.py's two-layer cut as "
    "two recurrent layers (and aborts: no layer has a KV cache): the shipped pattern of 3 Gated DeltaNet layers then "
    "one attention layer (full_attention_interval 4); converted with --no-mtp (CONVERTER_FLAGS)"
)
QWEN3_5_MOE_DIFFERS = (
    "one position of 320 (77) is over the tolerance, the median gap 6.5e-5: a local difference (the extended linear "
    "and yarn models are the same)"
)

#: Qwen3.8-Flash-Next's attention (head 256, a quarter rotated, M-RoPE sections 11/11/10: the QSA index head must
#: hold the rotated dims), its QSA indexer and a two-layer cut of its layer pattern (config-class arguments)
QWEN4_EXP_TEXT = {
    "head_dim": 256,
    "rope_parameters": QWEN3_5_ROPE,  # as Qwen3.5's
    "num_hidden_layers": 2,
    "layer_types": ["linear_attention", "full_attention"],
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
}

#: GLM-4's added tokens (zai-org/glm-4-9b-chat-hf tokenizer_config.json, ids 151329-151338 in this order)
GLM4_TOKENS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
)

#: DeepSeek-V4's compress ratio of each attention layer type (transformers' configuration_deepseek_v4.py)
_COMPRESS_RATIO = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _leading(types: list[str], kind: str) -> int:
    return next((i for i, t in enumerate(types) if t != kind), len(types))


def _rotary_pct(config: dict[str, Any]) -> float:
    return float(config["rope_parameters"].get("partial_rotary_factor", 1.0))


def _rotary_dim(config: dict[str, Any]) -> int:
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return int(head * _rotary_pct(config))


QWEN4_WHY = (
    "qwen4exp.py writes the QSA indexer's sizes (None in the class's defaults) and reads full-attention layers, which "
    "the defaults cut to two layers lack: Qwen/Qwen3.8-Flash-Next's indexer (4 heads, 1 key head, head 128, budget "
    "2048, ratio 4) and one recurrent and one attention layer of its 3:1 pattern"
)
QWEN4_DIFFERS = "0.093, already 0.012 at position 0, so not from RoPE; the cause was not found"
GLM_MOE_WHY = (
    "base.py's _set_vocab_glm (Glm4Moe, Glm4MoeLite, GlmMoeDsa) looks up [gMASK], <|user|>, <|endoftext|>, "
    "<|observation|>: GLM-4.5/4.7/5's tokenizer has GLM-4's added tokens"
)

UNTRACED_ONE_METHOD = (
    "one extended method differs while the source and the other methods are same: not traced (a MoE routing flip "
    "shows as one position over the tolerance; a YaRN ramp difference would show in every YaRN row)"
)

RELEASED: dict[str, Released] = {
    "bamba": Released(
        {"vocab_size": 304, "attn_rotary_emb": 8},
        "the converter pads a hybrid's vocabulary to a multiple of 8 and llama.cpp then wants the embedding as long, "
        "and it writes rope.dimension_count only from the legacy attn_rotary_emb (without it llama.cpp rotates the "
        "whole head, transformers half); ibm-ai-platform/Bamba-9B ships vocab_size 128256 and attn_rotary_emb 64 of "
        "a 128 head (here 8 of 16)",
        explained="a converter defect: it un-permutes q and k over the whole head while only attn_rotary_emb dims "
        "rotate (8 of 16 here, 64 of 128 in Bamba-9B); with the whole head rotating the gap is 1.1e-4",
    ),
    "granitemoehybrid": Released(
        {
            "num_hidden_layers": 2,
            "layer_types": GRANITE_ATTENTION,
            "position_embedding_type": "rope",
            "vocab_size": 304,
        },
        "the class's defaults are all Mamba layers and no RoPE (llama.cpp aborts on a hybrid with no attention "
        "layer: GGML_ASSERT buffer); the class's RoPE release, ibm-granite/granite-4.0-micro, ships attention "
        "layers only, position_embedding_type rope and vocab_size 100352 (the converter pads the vocabulary to a "
        "multiple of 8 and llama.cpp wants the embedding as long). Its layer_types are spelled 'attention' in its "
        "config.json: transformers saves 'full_attention', which the converter takes for Mamba layers",
        spelled={"layer_types": GRANITE_ATTENTION},
    ),
    "olmoe": Released(
        {"num_key_value_heads": 4},
        "llama.cpp's OLMoE normalises k over n_embd (as many key/value heads as query heads); "
        "allenai/OLMoE-1B-7B-0924 ships 16 key/value heads for 16 query heads",
    ),
    "phi": Released(
        {"num_key_value_heads": 4, "intermediate_size": 256},
        "llama.cpp's phi2 has no grouped keys (k and v n_embd wide) and an MLP 4 x n_embd wide; microsoft/phi-2 "
        "ships no num_key_value_heads (32 for its 32 heads) and intermediate_size 10240 (4 x 2560)",
    ),
    "exaone_moe": Released(
        {"scoring_func": "sigmoid"},
        "llama.cpp requires exaone-moe.expert_gating_func, which the converter writes from scoring_func; "
        "K-EXAONE-236B-A23B ships scoring_func sigmoid (its config as TensorRT-LLM's test_modeling_exaone_moe.py "
        "copies it), the gate transformers' ExaoneMoe applies",
    ),
    "deepseek_v2": Released(
        {"num_experts_per_tok": 2},
        "llama.cpp asserts experts used > 0 where there are experts; the class's default is None, "
        "deepseek-ai/DeepSeek-V2-Lite ships 6 of 64",
        explained="linear and yarn differ at one position each (91 and 267; median 5e-4): a routing tie flipped by "
        "float32 noise, not RoPE (the source and none are same)",
    ),
    "deepseek_v3": Released(
        {"n_group": 2, "topk_group": 1},
        "llama.cpp asserts fewer expert groups than experts, a whole number of experts per group and fewer groups "
        "used than groups; deepseek-ai/DeepSeek-V3 ships 8 groups of 32 experts, 4 used (here 2 groups of 2, 1 used)",
    ),
    "lfm2": Released(
        {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"]},
        "with no short-convolution layer llama.cpp's recurrent cache has no layer and it aborts (GGML_ASSERT "
        "buffer); LiquidAI/LFM2-1.2B ships 10 conv layers and 6 attention layers (full_attn_idxs 2, 5, 8, ...)",
    ),
    "llama4": Released({"text_config": LLAMA4_LAYERS}, LLAMA4_WHY),
    "llama4_text": Released(LLAMA4_LAYERS, LLAMA4_WHY),
    "mellum": Released(
        {"num_hidden_layers": 2, "layer_types": SLIDING_THEN_FULL},
        "the converter writes the sliding window whenever sliding_window is set, and llama.cpp then asserts a "
        "sliding layer; Mellum 2 ships 3 sliding : 1 full layers (window 1024; SGLang's "
        "test_mellum2_layer_types_are_hybrid_swa)",
        explained="llama.cpp: mellum.cpp rotates the sliding layers with the full layers' base and ignores "
        "rope.freq_base_swa; with both bases equal the gap is 1.7e-4, and the release ships 500000 for both (SGLang's "
        "test config), so a real Mellum 2 agrees",
    ),
    "gemma3": Released({"text_config": GEMMA3_TEXT}, GEMMA3_WHY, "sentencepiece"),
    "gemma3_text": Released(GEMMA3_TEXT, GEMMA3_WHY, "sentencepiece"),
    # from here: the keys, routers and traced differences of the rows that were measured and differed
    "olmo3": Released(
        {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]},
        "OLMo 3 scales only its full-attention layers (transformers: rope_parameters keyed by layer type; llama.cpp's "
        "olmo2 graph gives sliding layers plain RoPE); the 2-layer cut of the shipped 3-sliding-1-full pattern "
        "(allenai/Olmo-3-7B-Instruct layer_types) keeps no full layer, so one of each (the converter writes the list)",
    ),
    "laguna": Released(
        {"num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"]},
        "the converter writes no layer pattern for Laguna: llama.cpp's laguna loader takes layer 0 of every 4 as full "
        "and the rest as sliding (its own base and rotary dims) whenever sliding_window > 0, as Laguna-XS.2 ships; "
        "the class default pairs sliding_window 512 with every layer full",
        router="mlp.gate.weight",
    ),
    "qwen3_moe": Released(
        {"norm_topk_prob": True},
        "llama.cpp's qwen3moe always renormalises the top-k expert weights; Qwen/Qwen3-30B-A3B ships norm_topk_prob "
        "true (the config class's default is false)",
    ),
    "afmoe": Released(
        {"route_norm": True, "mup_enabled": True},
        "transformers' AFMoE router always renormalises the top-k scores; llama.cpp does so only when the file says "
        "expert_weights_norm, which the converter writes from route_norm, a key arcee-ai's Trinity configs ship "
        "(true); llama.cpp's afmoe always scales the embeddings by sqrt(hidden) (MuP), as the Trinity configs' "
        "mup_enabled true",
        router="mlp.router.gate.weight",
    ),
    "gemma2": Released(
        {"query_pre_attn_scalar": 16},
        "llama.cpp's gemma2 scales queries by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the 27B only); "
        "google/gemma-2-2b and -9b ship query_pre_attn_scalar = head_dim (256); the tiny head is 16",
    ),
    "ernie4_5_moe": Released(router="mlp.gate.weight", why="Ernie4_5_MoeTopKRouter.weight is initialised to zeros"),
    "gpt_oss": Released(
        explained="GPT-OSS ships YaRN with truncate: false; llama.cpp always rounds YaRN's correction range "
        "(floor/ceil) and the converter drops the key: the source is same (1.1e-4) built with truncate: true; extend "
        "writes truncating YaRN on both sides, so its cells are same"
    ),
    "ministral3": Released(
        explained="extend refuses the GGUF file, rightly: llama.cpp's mistral3 reads rope.scaling.yarn_log_multiplier "
        "(the converter's mscale_all_dim, replacing YaRN's 1 + 0.1 ln s) and attention.temperature_scale "
        "(llama_4_scaling_beta), whose length is rope.scaling.original_context_length; ropekit models neither, so a "
        "rewritten RoPE would move the temperature's length too"
    ),
    "dbrx": Released(
        {"attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 500_000}},
        "transformers' DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not declare (so the "
        "defaults do not build); databricks/dbrx-instruct's config.json ships attn_config {clip_qkv: 8, kv_n_heads: "
        "8, rope_theta: 500000}, and the converter reads the same keys (kv heads 2 of the tiny model's 4)",
        explained="the RoPE base: transformers 5.18 runs rope_parameters' (absent in the release, so 10000), "
        "llama.cpp the attn_config.rope_theta the release ships (500000); with rope_parameters' base 500000 too the "
        "gap is 1.7e-4",
    ),
    "dots1": Released(
        {
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "first_k_dense_replace": 1,
            "num_key_value_heads": 4,
            "scoring_func": "sigmoid",
        },
        "Dots1Config leaves the expert counts unset (the defaults do not build); rednote-hilab/dots.llm1.inst ships "
        "128 routed experts, 2 shared, 6 per token and one dense first layer (here 4, 1, 2, 1), and as many key/value "
        "heads as query heads (llama.cpp's dots1 takes keys and values as wide as queries); llama.cpp reads the "
        "gating function the converter writes from scoring_func (transformers' router applies a sigmoid whatever "
        "the config says) and aborts without one",
        explained=UNTRACED_ONE_METHOD,
    ),
    "falcon_h1": Released(
        {"head_dim": 16},
        "the converter reads head_dim, which FalconH1Config does not declare (transformers derives hidden / heads); "
        "tiiuae/Falcon-H1-0.5B-Instruct's config.json ships it (64 = 1024 / 16): here 16 = 64 / 4",
    ),
    "lfm2_moe": Released(
        {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
        "Lfm2MoeConfig leaves layer_types unset (the defaults do not build); LiquidAI/LFM2-8B-A1B ships a list of "
        "conv and full_attention layers after 2 dense ones: here one of each kind, the first dense",
    ),
    "nemotron": Released(
        {"num_key_value_heads": 2},
        "NemotronConfig leaves num_key_value_heads unset (the defaults do not build); nvidia/Minitron-8B-Base ships 8 "
        "of 48 heads: here 2 of the tiny model's 4",
    ),
    "gemma3n_text": Released(
        {
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "num_kv_shared_layers": 0,
            "activation_sparsity_pattern": [0.95, 0.0],
            "intermediate_size": [128, 128],
            "vocab_size_per_layer_input": 300,
        },
        "google/gemma-3n-E2B-it ships 30 layers (4 sliding : 1 full), the last 10 reading the keys and values of an "
        "earlier layer (llama.cpp then expects key and value weights in none of them, which transformers saves for "
        "every layer), sparse activations in the first 10: here one sliding and one full layer, unshared (the "
        "defaults cut to 2 layers leave 15 shared layers and no full one, and do not build), with a per-layer "
        "embedding table the size of the tiny vocabulary",
    ),
    "gemma4_text": Released(GEMMA4_TEXT, GEMMA4_WHY, "byte_fallback", explained=GEMMA4_DIFFERS),
    "gemma4": Released({"text_config": GEMMA4_TEXT}, GEMMA4_WHY, "byte_fallback", explained=GEMMA4_DIFFERS),
    "gemma4_unified": Released(
        {"text_config": {**GEMMA4_TEXT, "moe_intermediate_size": None}},
        GEMMA4_WHY + "; the converter reads moe_intermediate_size for every Gemma 4 (null: no MoE block), which "
        "Gemma4UnifiedTextConfig does not declare",
        "byte_fallback",
        explained=GEMMA4_DIFFERS,
    ),
    "qwen3_5": Released({"text_config": QWEN3_5_TEXT}, QWEN_WHY),
    "qwen3_5_text": Released(QWEN3_5_TEXT, QWEN_WHY),
    "qwen3_5_moe": Released({"text_config": QWEN3_5_TEXT}, QWEN_WHY, explained=QWEN3_5_MOE_DIFFERS),
    "qwen3_5_moe_text": Released(QWEN3_5_TEXT, QWEN_WHY, explained=QWEN3_5_MOE_DIFFERS),
    "qwen3_next": Released({**SHIPPED["qwen3_next"].keys, **QWEN_HYBRID}, QWEN_WHY, explained=UNTRACED_ONE_METHOD),
    # from here: what the converter reads of the released folder (legacy keys, tensor names, tokens, tokenizer)
    "bitnet": Released(
        {"tie_word_embeddings": True},
        "bitnet.py maps no output tensor (llama.cpp's BitNet reads the tied embedding); "
        "microsoft/bitnet-b1.58-2B-4T's config.json has tie_word_embeddings: true",
        unconvertible="the converter maps 1bitLLM's BitNet names (inner_attn_ln, ffn_layernorm), not transformers' "
        "attn_sub_norm / ffn_sub_norm (microsoft/bitnet-b1.58-2B-4T's names)",
    ),
    "falcon": Released(
        {"num_kv_heads": 1, "ffn_hidden_size": 4 * 64},
        "falcon.py reads num_kv_heads from FalconConfig, which sets it to the head count where config.json has none "
        "(tiiuae/falcon-7b), though multi_query computes one key/value head; llama.cpp's Falcon takes the "
        "feed-forward width as 4 x hidden, as FalconConfig derives it where config.json has no ffn_hidden_size",
        explained=UNTRACED_ONE_METHOD,
    ),
    "hy_v4": Released(
        {"initializer_range": 0.02},
        "not a release key but the random init: HY-V4's initializer_range 0.006 leaves a tiny random model's "
        "attention near uniform, so RoPE moves its logits by 7e-6 (linear x4), far under the tolerance; at 0.02 "
        "linear x4 moves them by 0.054. hy_v4.py and gguf-py map tencent's HY-V4 tensor names, which transformers' "
        "renaming (reversed on save) does not give back",
        tensors=(
            (r"^model\.hc_pre\.hc_head\.", "model.hc_head."),
            (r"\.hc_pre\.(hc_(?:attn|mlp)_layer)\.(hc_(?:fn|base|scale))$", r".\1.hc_pre.\2"),
            (r"\.mlp\.(shared_experts\.)?linear_gate\.", r".mlp.\1gate_proj."),
        ),
        explained="linear and yarn differ (0.054): transformers' linear x4 moves the logits by 0.054, llama.cpp's "
        "(the extended file, a runtime freq scale 0.25 or freq_base 1e6) by about 0.0015; not traced (llama.cpp's "
        "hy_v4 graph source is not here): extend's GGUF for HY-V4 is not trusted",
    ),
    "qwen4_exp_text": Released(
        QWEN4_EXP_TEXT,
        QWEN4_WHY,
        explained=QWEN4_DIFFERS,
    ),
    "qwen4_exp": Released({"text_config": QWEN4_EXP_TEXT}, QWEN4_WHY, explained=QWEN4_DIFFERS),
    "glm": Released(
        why="chatglm.py's set_vocab (GlmForCausalLM) looks up <|endoftext|> and <|user|>: GLM-4's added tokens",
        tokens=GLM4_TOKENS,
        explained="a converter defect: chatglm.py reads layernorm_epsilon, not the rms_norm_eps (1.5625e-07) "
        "zai-org/glm-4-9b-chat-hf ships; with that epsilon forced into llama.cpp the gap is 1.5e-4",
    ),
    "glm4": Released(why="glm.py's Glm4Model.set_vocab looks up <|endoftext|> and <|user|>", tokens=GLM4_TOKENS),
    "glm4_moe": Released(
        why=GLM_MOE_WHY,
        tokens=GLM4_TOKENS,
        explained="one position of 320 (23) over the tolerance, the extended linear and yarn same (1e-4): a router "
        "near-tie",
    ),
    "glm4_moe_lite": Released(
        why=GLM_MOE_WHY + "; deepseek.py's DeepseekV2Model (GLM-4.7-Flash's converter) counts the leading dense layers "
        "from first_k_dense_replace, which zai-org/GLM-4.7-Flash's config.json ships (transformers 5 writes "
        "mlp_layer_types)",
        tokens=GLM4_TOKENS,
        legacy={"first_k_dense_replace": lambda c: _leading(c["mlp_layer_types"], "dense")},
        explained="llama.cpp's deepseek2 routes by softmax where the file has no gating key and the model is not "
        "47 layers deep (GLM-4.7-Flash's own check); with sigmoid forced the gap is 1.5e-4",
    ),
    "glm_moe_dsa": Released(why=GLM_MOE_WHY, tokens=GLM4_TOKENS),
    "solar_open": Released(
        why="glm.py's SolarOpenModel.set_vocab looks up <|endoftext|>, <unk>, <|startoftext|> "
        "(upstage/Solar-Open-100B's added tokens); its Glm4MoeModel rotates half the head unless the config says "
        "otherwise: the release's config.json ships partial_rotary_factor 1.0",
        tokens=("<unk>", "<|startoftext|>", "<|endoftext|>"),
        legacy={"partial_rotary_factor": _rotary_pct},
    ),
    "phi3": Released(
        why="phi.py's Phi3MiniModel.set_vocab reads tokenizer.model (microsoft/Phi-3-mini-4k-instruct ships Llama "
        "2's); llama.cpp's vocabulary loader sets attributes on <|endoftext|> by name for phi3 (and throws where it "
        "is missing): Phi-3-mini's added tokens, ids 32000-32010 in this order",
        tokenizer="llama_sentencepiece",
        tokens=(
            "<|endoftext|>",
            "<|assistant|>",
            "<|placeholder1|>",
            "<|placeholder2|>",
            "<|placeholder3|>",
            "<|placeholder4|>",
            "<|system|>",
            "<|end|>",
            "<|placeholder5|>",
            "<|placeholder6|>",
            "<|user|>",
        ),
        explained=UNTRACED_ONE_METHOD,
    ),
    "gpt_neox": Released(
        why="gptneox.py reads rotary_pct; EleutherAI/pythia-* config.json ship rotary_pct 0.25",
        legacy={"rotary_pct": _rotary_pct},
        unconvertible="gptneox.py reads hparams['rotary_pct'], and transformers 5's GPTNeoXConfig folds Pythia's "
        "rotary_pct into rope_parameters: AutoConfig(...).to_dict(), which the converter reads, has none",
    ),
    "cohere2": Released(
        why="command_r.py's Cohere2Model reads rotary_pct; CohereLabs/c4ai-command-r7b-12-2024's config.json ships 1.0",
        legacy={"rotary_pct": _rotary_pct},
    ),
    "minimax_m2": Released(
        why="minimax.py's MiniMaxM2Model reads rotary_dim; MiniMaxAI/MiniMax-M2's config.json ships rotary_dim 64 of "
        "head_dim 128; llama.cpp aborts building the MoE graph without a gating function, which the converter reads "
        "from scoring_func: the release ships sigmoid (transformers' MiniMaxM2 routes by sigmoid)",
        legacy={"rotary_dim": _rotary_dim, "scoring_func": lambda c: "sigmoid"},
    ),
    "mimo_v2_flash": Released(
        why="mimo.py reads the sliding layers' sizes, the layer pattern (1 = sliding) and the router's method as "
        "XiaomiMiMo/MiMo-V2-Flash's config.json ships them",
        legacy={
            "hybrid_layer_pattern": lambda c: [int(t == "sliding_attention") for t in c["layer_types"]],
            "swa_head_dim": lambda c: c["head_dim"],
            "swa_v_head_dim": lambda c: c["v_head_dim"],
            "swa_num_attention_heads": lambda c: c["num_attention_heads"],
            "swa_num_key_value_heads": lambda c: c["num_key_value_heads"],
            "topk_method": lambda c: "noaux_tc",
            "layernorm_epsilon": lambda c: c["rms_norm_eps"],
        },
        unconvertible="mimo.py reads rope_parameters['partial_rotary_factor'] at the top level, and transformers "
        "5's MiMoV2FlashConfig splits MiMo-V2-Flash's rope keys per layer type (full_attention / sliding_attention)",
    ),
    "hunyuan_v1_moe": Released(
        why="hunyuan.py reads per-layer lists: tencent/Hunyuan-A13B-Instruct's config.json ships "
        "moe_intermediate_size, moe_topk and num_shared_expert one entry a layer",
        legacy={
            "moe_intermediate_size": lambda c: [c["intermediate_size"]] * c["num_hidden_layers"],
            "moe_topk": lambda c: [c["moe_topk"]] * c["num_hidden_layers"],
            "num_shared_expert": lambda c: [1] * c["num_hidden_layers"],
        },
        unconvertible="hunyuan.py reads the tokenizer's tiktoken mergeable_ranks, which only Hunyuan-A13B's own "
        "tokenization_hy.py provides (code in the model folder, run with trust_remote_code: never run here)",
    ),
    "deepseek_v4": Released(
        why="deepseek.py's DeepseekV4Model reads config.json's legacy keys, which transformers 5 folds into "
        "layer_types / mlp_layer_types: deepseek-ai/DeepSeek-V4-Flash's config.json ships compress_ratios (0 "
        "sliding, 4, 128 per layer) and num_hash_layers",
        legacy={
            "compress_ratios": lambda c: [_COMPRESS_RATIO[t] for t in c["layer_types"]],
            "num_hash_layers": lambda c: c["mlp_layer_types"].count("hash_moe"),
        },
        unconvertible="deepseek.py reads DeepSeek-V4-Flash's own tensor layout (layers.N.ffn.gate.tid2eid, FP4 "
        "experts with their .scale tensors, no 'model.' prefix), not the names and float experts transformers saves",
    ),
    "deepseek_v32": Released(
        unconvertible="deepseek.py asserts tokenizer.add_bos_token, which transformers 5 leaves False for a "
        "tokenizer with tokenizer.json (it drops tokenizer_config.json's add_bos_token: true, as DeepSeek-V3.2-Exp "
        "ships it)"
    ),
}


def trained_routers(model_type: str, folder: Path) -> None:
    """Give the saved tiny model at ``folder`` random values for its all-zero router (``Released.router``; seeded,
    normal with the config's ``initializer_range``)."""
    released = RELEASED.get(model_type)
    if released is None or released.router is None:
        return
    import torch
    from safetensors.torch import load_file, save_file

    std = json.loads((folder / "config.json").read_text()).get("initializer_range", 0.02)
    generator = torch.Generator().manual_seed(0)
    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(path)
        for name in sorted(tensors):
            if name.endswith(released.router) and not tensors[name].any():
                tensors[name] = torch.randn(tensors[name].shape, generator=generator).to(tensors[name].dtype) * std
        save_file(tensors, path, metadata={"format": "pt"})


def dress(model_type: str, folder: Path) -> None:
    """Give the saved tiny model at ``folder`` what the family's released folder has that the converter reads:
    ``Released.legacy``'s and ``spelled``'s keys in its ``config.json``, ``tensors``' names and ``tokens``."""
    released = RELEASED.get(model_type, Released())
    if released.legacy or released.spelled:
        path = folder / "config.json"
        config = json.loads(path.read_text())
        config |= {key: value(config) for key, value in released.legacy.items()} | released.spelled
        path.write_text(json.dumps(config, indent=2) + "\n")
    if released.tensors:
        _rename(folder / "model.safetensors", released.tensors)
    if released.tokens:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_special_tokens({"additional_special_tokens": list(released.tokens)})
        tokenizer.save_pretrained(folder)


def _rename(path: Path, rules: tuple[tuple[str, str], ...]) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(path)
    renamed = {}
    for name, tensor in tensors.items():
        for pattern, replacement in rules:
            name = re.sub(pattern, replacement, name)
        renamed[name] = tensor
    save_file(renamed, path, metadata={"format": "pt"})
